"""What a patient is told: the offer notice, the booking confirmation, the opt-out page."""
