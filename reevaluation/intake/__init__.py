"""The CRM's signed events: trust checks, the inbox, a scope's head and one job per revision."""
