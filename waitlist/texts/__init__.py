"""Texts, both ways (issue 39): offer and booking notices by SMS first, delivery receipts, replies as answers.

``models`` (imported by ``waitlist.models``), ``compose`` (the words, fitted to one or two segments),
``services.send`` (the outbox handlers' text path), ``services.receipts`` (delivery receipts and the e-mail
fallback), ``services.replies`` (the inbound webhook's service), ``views``/``urls`` (the webhooks and the
``/c/<code>`` short link).
"""
