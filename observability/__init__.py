"""Production operability: /metrics, /healthz, /readyz, JSON logs and correlation ids (docs/runbook.md)."""
