"""What a patient is proposed after a reevaluation: the models, commands, reads, signed page and urls."""
