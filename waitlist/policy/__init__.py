"""The clinic's waitlist policy (versions, publish, the editor's form) and the rollout controls (feature switch,
tenant allowlist).
"""
