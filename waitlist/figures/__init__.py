"""The console's and /metrics' figures: fill, fairness, trends, readiness, the Action queue and its evidence
panels. Reads only.
"""
