"""A worker's round: claim, fetch every assessment, then write back in batches what can be."""
