"""reevaluation models."""
