"""An offer's life after dispatch: claim, decline, expiry, late acceptance, booking, staff recovery; the claim
page, its tokens and calendar file.
"""
