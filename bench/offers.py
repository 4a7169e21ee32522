"""OFFERED offers made through ``vacancy_dispatch``, the input of the claim benchmarks (``bench.claims``,
``bench.claims_layers``, ``bench.claims_compare``): one module they all read, so none imports another."""

from __future__ import annotations

from . import contention

OFFER_WORLDS = 4  # clinics (one dispatcher process each) the offers are made in


def make_offers(label: str, n: int, worlds: int = OFFER_WORLDS) -> tuple[list, list[tuple[str, str]]]:
    """``n`` OFFERED offers made by ``vacancy_dispatch``, split over ``worlds`` clinics with one dispatcher
    process each (separate clinics have separate queues, so the dispatchers do not convoy on one entry)."""
    import multiprocessing as mp

    from django.db import connections

    from waitlist.models import Offer

    built = [contention.build(f"{label}-{i}", n // worlds) for i in range(worlds)]
    connections.close_all()
    ctx = mp.get_context("fork")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=contention.dispatcher, args=(clinic.pk, refs, i, go, out))
        for i, (clinic, refs) in enumerate(built)
    ]
    for p in procs:
        p.start()
    go.set()
    contention.collect(out, procs, timeout=1800)
    for p in procs:
        p.join()
    clinics = [clinic for clinic, _refs in built]
    offers = list(
        Offer.objects.filter(clinic__in=clinics, status="OFFERED").values_list("clinic__ref", "ref").order_by("id")
    )
    return clinics, offers
