"""A clinic's mutation mode and drain: the switch rules, automatic stops, and the rollback readout."""
