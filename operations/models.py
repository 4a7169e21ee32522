"""operations models."""
