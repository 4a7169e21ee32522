"""The texts' writers: ``send`` (a notice's text), ``receipts`` (delivery receipts, the e-mail fallback),
``replies`` (a patient's reply as an answer)."""
