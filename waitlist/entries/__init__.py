"""Waitlist entries: create, priority, withdraw."""
