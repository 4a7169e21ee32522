"""Where the fillable but unfilled vacancies go: ``python -m sim.diagnose [--policy ours] [--seeds N] [--set JSON]``.

Runs one policy (optionally with policy fields changed: ``--set '{"weekly_offer_cap": 6}'``) on the first
months through the product, like ``sim.run``, and explains the gap to the ceiling (``metrics.ceiling``): for
every fillable vacancy the run left unfilled although some waiting patient would have filled it in time (an
edge of the ceiling's graph), what became of those patients (booked elsewhere first, offered but too late,
never asked) and, for the never-asked, how the vacancy spent its time (offers out to others, by how those
answered; staff review; waiting) and what held the patient back when it ran out of candidates. A read of the
run's log and the engine's dispatch trace; it changes nothing and copies no product rule except as an
explanation (the weekly cap and suppression read from the offers the run made).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import time
from collections import Counter, defaultdict
from datetime import timedelta

from . import db
from .generator import SCALES, generate

WEEK = timedelta(days=7)


def _spec(name: str, changes: dict):
    from .policies import ALL_POLICIES

    spec = next(p for p in ALL_POLICIES if p.name == name)
    fields = {f.name for f in dataclasses.fields(spec)}
    direct = {k: v for k, v in changes.items() if k in fields}
    extra = {**spec.extra, **{k: v for k, v in changes.items() if k not in fields}}
    return dataclasses.replace(spec, **direct, extra=extra)


def _job(args) -> dict:
    index, name, changes, seed, scale = args
    db.configure_environment()
    import django

    django.setup()
    from django.db import connection

    from . import adapter, metrics
    from .engine import Replay

    spec = _spec(name, changes)
    month = generate(seed, SCALES[scale], 0)
    url = db.run_url(f"d{index}")
    db.create_run_database(url)
    db.use_database(url)
    started = time.perf_counter()
    adapter.enable_waitlist()
    replay = Replay(month, spec, f"diag-{name}-{month.clinic_label}")
    log = replay.run()
    from waitlist.models import Vacancy

    ref_key = dict(Vacancy.objects.filter(clinic=replay.world.clinic).values_list("ref", "vacancy_key"))
    trace = [(at, replay.booking_of[ref_key[ref]].key, outcome) for at, ref, outcome in replay.trace]
    result = metrics.compute(month, spec, log) | {"late_accepts": dict(replay.late_accepts)}
    seconds = time.perf_counter() - started
    connection.close()
    db.drop_run_database(url)
    return {"seed": seed, "seconds": round(seconds, 1), "statements": replay.statements,
            "metrics": {k: result[k] for k in ("filled", "fillable_cancellations", "ceiling", "fill_of_ceiling",
                                                "offers", "messages_per_patient_week")}
            | {"booked_share": {k: v["booked_share"] for k, v in result["fairness"]["by_responsiveness"].items()},
               "band2": result["fairness"]["by_band"].get("2", {}).get("booked_share"),
               "late_accepts": result["late_accepts"]},
            "gap": analyse(month, spec, log, trace)}


def analyse(month, spec, log: dict, trace: list) -> dict:
    """The gap between the run's fills and the ceiling, vacancy by vacancy (see the module's docstring)."""
    from .metrics import ceiling_edges, matching
    from .policies import MODELLED_RULES
    from .windows import Window

    edges = ceiling_edges(month, MODELLED_RULES)
    margin = Window(MODELLED_RULES, month.params).margin
    filled = {v["key"] for v in log["vacancies"] if v["filled_at"] is not None}
    opened = {v["key"]: v["opened_at"] for v in log["vacancies"]}
    offers_of: dict[str, list[dict]] = defaultdict(list)
    by_entry: dict[str, list[dict]] = defaultdict(list)
    for o in log["offers"]:
        offers_of[o["vacancy"]].append(o)
        by_entry[o["entry"]].append(o)
    booked = {o["entry"]: (o["vacancy"], o["closed_at"] or o["at"]) for o in log["offers"] if o["booked"]}
    trace_of: dict[str, list] = defaultdict(list)
    for at, key, outcome in trace:
        trace_of[key].append((at, outcome))
    bookings = month.bookings_by_key

    def blocked(entry_key: str, at) -> list[str]:
        """What held the entry back at ``at`` (from the run's own offers; the product's rules decided)."""
        e = month.by_key[entry_key]
        why = []
        if e.arrives_at > at:
            why.append("NOT_ARRIVED")
        if e.opt_out_at is not None and e.opt_out_at <= at:
            why.append("OPTED_OUT")
        mine = by_entry[entry_key]
        if any(o["at"] <= at < (o["closed_at"] or month.end) and o["status"] in ("OFFERED", "ACCEPTED", "EXPIRED",
                                                                                "DECLINED", "WITHDRAWN")
               and not o["booked"] for o in mine):
            why.append("ANSWERING_ANOTHER")
        recent = [o for o in mine if at - WEEK < o["at"] <= at and not o.get("standing")]
        if spec.weekly_offer_cap and len(recent) >= spec.weekly_offer_cap:
            why.append("WEEKLY_CAP")
        hours = spec.decline_suppression_hours
        if hours and any(o["status"] == "DECLINED" and o["closed_at"] and o["closed_at"] <= at
                         < o["closed_at"] + timedelta(hours=hours) for o in mine):
            why.append("DECLINED_RECENTLY")
        if not month.has_decision(entry_key):
            why.append("NO_DECISION")
        return why or ["OTHER"]

    classes: Counter = Counter()
    detail: Counter = Counter()
    spent: Counter = Counter()  # minutes of the unasked vacancies' usable time, by what filled it
    holdbacks: Counter = Counter()
    for key, patients in edges.items():
        if key in filled or not patients:
            continue
        b = bookings[key]
        deadline = b.starts_at - margin
        states = {}
        for p in patients:
            mine = [o for o in offers_of[key] if o["entry"] == p]
            if mine:
                states[p] = f"OFFERED_{mine[-1]['status']}"
            elif p in booked and booked[p][1] < b.starts_at:
                states[p] = "BOOKED_ELSEWHERE_BEFORE_OPEN" if booked[p][1] <= b.cancel_at else "BOOKED_ELSEWHERE"
            else:
                states[p] = "NOT_ASKED"
        if "NOT_ASKED" in states.values():
            cls = "NOT_ASKED"
        elif any(s.startswith("OFFERED") for s in states.values()):
            cls = "OFFERED_TOO_LATE"
        else:
            cls = "ALL_BOOKED_ELSEWHERE"
        classes[cls] += 1
        for s in states.values():
            detail[s] += 1
        if cls != "NOT_ASKED":
            continue
        # How the vacancy's usable time (opened → slot start minus the margin) was spent.
        start = opened.get(key, b.cancel_at)
        total = max((deadline - start).total_seconds() / 60, 0)
        busy = 0.0
        for o in offers_of[key]:
            end = min(o["closed_at"] or deadline, deadline)
            minutes = max((end - o["at"]).total_seconds() / 60, 0)
            busy += minutes
            reply = month.reply(o["entry"], b).kind
            spent[f"offer_to_{month.by_key[o['entry']].responsiveness}_{reply}_{o['status']}"] += minutes
        events = trace_of[key]
        review = 0.0
        for i, (at, outcome) in enumerate(events):
            if outcome == "STAFF_REVIEW":
                later = [t for t, out in events[i + 1:] if out.startswith("REVIEW_")]
                end = min(later[0] if later else deadline, deadline)
                review += max((end - at).total_seconds() / 60, 0)
        spent["staff_review"] += review
        spent["idle_or_waiting"] += max(total - busy - review, 0)
        spent["total"] += total
        outcomes = [out for _, out in events]
        last = outcomes[-1] if outcomes else "NEVER_DISPATCHED"
        sub = "ENDED_" + last
        classes[f"NOT_ASKED:{sub}"] += 1
        no_candidate = [at for at, out in events if out == "NO_CANDIDATE"]
        probe = no_candidate[-1] if no_candidate else start
        for p, s in states.items():
            if s == "NOT_ASKED":
                for why in blocked(p, probe):
                    holdbacks[why] += 1
    unfilled = [k for k in edges if k not in filled]
    residual = {k: [p for p in edges[k] if p not in booked] for k in unfilled}
    return {"fillable": sum(1 for _ in edges), "ceiling": len(matching(edges)), "filled": len(filled),
            "unfilled_with_edge": sum(1 for k in unfilled if edges[k]),
            "residual_matching": len(matching(residual)), "classes": dict(classes), "patient_states": dict(detail),
            "unasked_minutes": {k: round(v) for k, v in spent.items()}, "holdbacks": dict(holdbacks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.diagnose")
    parser.add_argument("--policy", default="ours")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first", type=int, default=int(os.environ.get("SIM_SEED", "1")))
    parser.add_argument("--set", type=json.loads, default={}, metavar="JSON", help="policy fields changed")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("SIM_WORKERS", "3")))
    parser.add_argument("--scale", default="default")
    parser.add_argument("--json", action="store_true", help="print every run's figures")
    args = parser.parse_args(argv)
    db.configure_environment()
    import django

    django.setup()
    db.use_database(db.sim_url())
    db.prepare_template()
    seeds = [args.first + i for i in range(args.seeds)]
    tag = abs(hash((args.policy, json.dumps(args.set, sort_keys=True)))) % 10000
    jobs = [(tag * 100 + i, args.policy, args.set, seed, args.scale) for i, seed in enumerate(seeds)]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        runs = sorted(pool.map(_job, jobs, chunksize=1), key=lambda r: r["seed"])
    total: Counter = Counter()
    sums: dict[str, Counter] = defaultdict(Counter)
    weeks: Counter = Counter()
    for r in runs:
        m = r["metrics"]
        total.update(filled=m["filled"], fillable=m["fillable_cancellations"], ceiling=m["ceiling"],
                     offers=m["offers"], statements=r["statements"], residual=r["gap"]["residual_matching"])
        total["seconds"] += r["seconds"]
        for name in ("classes", "patient_states", "unasked_minutes", "holdbacks"):
            sums[name].update(r["gap"][name])
        sums["late_accepts"].update(m.get("late_accepts", {}))
        weeks.update({int(k): n for k, n in m["messages_per_patient_week"]["histogram"].items()})
        for k, v in m["booked_share"].items():
            sums["booked_share"][k] += v or 0
        sums["booked_share"]["band2"] += m["band2"] or 0
        if args.json:
            print(json.dumps(r, default=str))
    ordered = sorted(weeks.elements())
    p95 = ordered[int(0.95 * (len(ordered) - 1))] if ordered else None
    print(f"{args.policy} {json.dumps(args.set)} seeds {seeds[0]}..{seeds[-1]}: fill {total['filled']}/"
          f"{total['fillable']} = {total['filled'] / total['fillable']:.3f}, ceiling {total['ceiling']}, "
          f"fill/ceiling {total['filled'] / total['ceiling']:.3f}, residual matching {total['residual']}, "
          f"offers {total['offers']}, p95 msgs/week {p95}, statements {total['statements']}, "
          f"run seconds {total['seconds']:.0f}, wall {time.perf_counter() - started:.0f}")
    print("  booked share (mean over months):",
          {k: round(v / len(runs), 3) for k, v in sums["booked_share"].items()})
    for name in ("classes", "patient_states", "unasked_minutes", "holdbacks", "late_accepts"):
        print(f"  {name}:", dict(sorted(sums[name].items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
