"""Dispatch: the matcher, the vacancy fence, promotion (offer and hold written together), the background loop
(expiry, reconcile) and the reads that explain a vacancy without an offer.
"""
