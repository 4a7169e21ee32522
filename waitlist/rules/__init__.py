"""Rules every feature reads: hard eligibility, answer windows, whether a patient can be reached now."""
