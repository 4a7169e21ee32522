"""Standing acceptance: a patient's "book me automatically", its page and commands."""
