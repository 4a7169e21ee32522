"""Booking-reliability decisions: the feed that records them and the provider that reads the newest per patient."""
