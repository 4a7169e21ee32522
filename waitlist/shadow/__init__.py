"""Shadow policies: a candidate policy observed beside the live one, then published or discarded."""
