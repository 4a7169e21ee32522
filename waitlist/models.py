"""waitlist models."""
