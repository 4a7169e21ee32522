"""Patients join a clinic's waiting list themselves (issue 40): the public page and its headless contract, the
one-time code that proves their contact, availability, their status page and the upkeep question."""
