"""Metrics of one run, from its log (vacancies, offers, messages) and the generated month.

The log has the same shape whether it came from the real services (``adapter.export``) or from a
documented model (``sim.models``), so every policy is measured by the same code.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from .adapter import PolicySpec
from .generator import Month, fits

USEFUL_LEAD = timedelta(hours=1)  # a cancellation with less notice than this is not counted as fillable


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def in_quiet_hours(at: datetime, month: Month) -> bool:
    p = month.params
    local = at.astimezone(ZoneInfo(p.timezone)).time()
    start, end = time.fromisoformat(p.quiet_start), time.fromisoformat(p.quiet_end)
    return (start <= local or local < end) if start > end else (start <= local < end)


def jain(values: list[float]) -> float | None:
    """Jain's fairness index: 1 when everyone gets the same, 1/n when one gets everything."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def compute(month: Month, spec: PolicySpec, log: dict) -> dict:
    vacancies, offers, messages = log["vacancies"], log["offers"], log["messages"]
    bookings = {b.key: b for b in month.bookings}
    fillable = [b for b in month.cancellations if b.starts_at - b.cancel_at >= USEFUL_LEAD]
    filled = [v for v in vacancies if v["filled_at"] is not None]
    fill_minutes = [(v["filled_at"] - v["opened_at"]).total_seconds() / 60 for v in filled]
    booked_by_entry = {o["entry"]: bookings[o["vacancy"]].starts_at for o in offers if o["booked"]}
    # Acceptance is over the offers that asked (a standing booking asks nothing: booked at once).
    asked = [o for o in offers if not o.get("standing")]
    accepted = [o for o in asked if o["booked"]]

    per_week: Counter = Counter()
    for m in messages:
        per_week[(m["entry"], int((m["at"] - month.start).total_seconds() // (7 * 86400)))] += 1
    weekly = list(per_week.values())

    sooner = {key: (month.by_key[key].current_at - at).total_seconds() / 86400 for key, at in booked_by_entry.items()}
    first_week = [o for o in asked if o["at"] < month.start + timedelta(days=7)]
    from .policies import MODELLED_RULES

    # Ours' rules for every policy: a property of the month. ``reachable`` is the matching (each patient fills at
    # most one slot); ``reachable_any`` the looser per-vacancy count (one patient may count for several).
    reachable, reachable_any = ceiling(month, MODELLED_RULES)
    neutral = ceiling_neutral(month, MODELLED_RULES)
    standing = standing_figures(month, log, filled)
    return {
        "cancellations": len(month.cancellations),
        "fillable_cancellations": len(fillable),
        "vacancies": len(vacancies),
        "filled": len(filled),
        "fill_rate": ratio(len(filled), len(fillable)),
        "fill_rate_of_vacancies": ratio(len(filled), len(vacancies)),
        "time_to_fill_minutes": {"p50": quantile(fill_minutes, 0.5), "p90": quantile(fill_minutes, 0.9)},
        "offers": len(offers),
        "offers_per_vacancy": ratio(len(offers), len(vacancies)),
        "asked_offers": len(asked),
        "accepted": len(accepted),
        "acceptance_per_offer": ratio(len(accepted), len(asked)),
        "offers_first_week": len(first_week),
        "accepted_first_week": sum(1 for o in first_week if o["booked"]),
        # On the month's first week (the list still fresh: the published 8–11% per offer are list-wide).
        "acceptance_per_offer_first_week": ratio(sum(1 for o in first_week if o["booked"]), len(first_week)),
        # Fillable cancellations some waiting, eligible patient would have accepted in time (see ``ceiling``).
        "ceiling": reachable,
        "fill_of_ceiling": ratio(len(filled), reachable),
        "ceiling_any": reachable_any,
        "fill_of_ceiling_any": ratio(len(filled), reachable_any),
        # Policy-neutral: no standing acceptance, no quiet hours, asked at once, a yes before start minus margin.
        "ceiling_neutral": neutral,
        "fill_of_ceiling_neutral": ratio(len(filled), neutral),
        **standing,
        **channel_figures(month, log, len(fillable)),
        "filled_attended_rate": ratio(standing["filled_attended"], len(fillable)),
        "attended_rate": ratio(standing["filled_attended"], len(fillable)),
        "offers_never_seen": sum(1 for o in offers if o["notified_at"] is None),
        "messages": len(messages),
        "messages_per_patient_week": {"max": max(weekly, default=0), "p95": quantile(weekly, 0.95),
                                      # messages in a week → patient-weeks (pooled over runs by sim/report.py)
                                      "histogram": {str(k): n for k, n in sorted(Counter(weekly).items())}},
        "quiet_hour_notices": sum(1 for m in messages if in_quiet_hours(m["at"], month)),
        "days_sooner": {"total": round(sum(sooner.values()), 1), "p50": quantile(list(sooner.values()), 0.5)},
        "exhausted_vacancies": sum(1 for v in vacancies if v["exhausted"]),
        "fairness": fairness(month, spec, log, sooner),
        # The product's own record of whom dispatch passed over and why (DispatchNote, summed over repeats).
        "dispatch_notes": dict(sorted(log.get("dispatch_notes", {}).items())),
        **({"shadow": log["shadow"]} if "shadow" in log else {}),
    }


def standing_figures(month: Month, log: dict, filled: list[dict]) -> dict:
    """Attended visits, standing bookings, releases and refills.

    Every booking that stands at the end is attended or not: a booking by reply, or a standing one its patient
    acknowledged (ACCEPTED), is drawn with ``no_show_accepted`` (``Month.no_show``, one draw per patient and slot,
    the same for every policy); a standing booking never acknowledged (UNREAD) is never attended; one its patient
    would have declined but read after its release deadline (LATE_DECLINE, or a release refused) is drawn with
    ``no_show_late_decline``."""
    standing = {(s["entry"], s["vacancy"]): s for s in log.get("standing", [])}
    bookings = month.bookings_by_key
    missed = missed_standing = 0
    cases: Counter = Counter()
    attended_by_channel: Counter = Counter()
    booked_by_channel: Counter = Counter()
    for o in log["offers"]:
        if not o["booked"]:
            continue
        s = standing.get((o["entry"], o["vacancy"]))
        case = "ACCEPTED" if s is None else {"RELEASED": "LATE_DECLINE", "KEPT_RELEASE_REFUSED": "LATE_DECLINE",
                                             "RELEASED_UNACKNOWLEDGED": "UNREAD"}.get(s["case"], s["case"])
        channel = month.by_key[o["entry"]].channel
        booked_by_channel[channel] += 1
        if s is not None:
            cases[case] += 1
        if case == "UNREAD" or month.no_show(o["entry"], bookings[o["vacancy"]], case):
            missed += 1
            missed_standing += s is not None
        else:
            attended_by_channel[channel] += 1
    released = [s for s in standing.values() if s.get("released_at") is not None]
    unacknowledged = {s["vacancy"] for s in released if s["case"] == "RELEASED_UNACKNOWLEDGED"}
    filled_keys = {v["key"] for v in filled}
    return {"standing_bookings": len(standing), "standing_releases": len(released),
            "standing_refilled": sum(1 for s in released if s["vacancy"] in filled_keys),
            # Slots whose automatic booking was released unacknowledged (at least once), and of those refilled.
            "standing_released_unacknowledged": len(unacknowledged),
            "standing_unacknowledged_refilled": len(unacknowledged & filled_keys),
            "standing_acknowledged": sum(1 for s in standing.values() if s.get("acknowledged_at") is not None),
            "standing_kept": dict(sorted(cases.items())),
            "standing_missed": missed_standing, "missed": missed, "filled_attended": len(filled) - missed,
            "booked_by_channel": dict(sorted(booked_by_channel.items())),
            "attended_by_channel": dict(sorted(attended_by_channel.items()))}


def channel_figures(month: Month, log: dict, fillable: int) -> dict:
    """Per channel: patients, their attended bookings over the fillable cancellations, and texts (messages to
    text readers) per patient per week (patient-weeks with at least one text)."""
    patients = Counter(e.channel for e in month.entries)
    texts: Counter = Counter()
    for m in log["messages"]:
        if month.by_key[m["entry"]].channel == "SMS":
            texts[(m["entry"], int((m["at"] - month.start).total_seconds() // (7 * 86400)))] += 1
    return {"patients_by_channel": dict(sorted(patients.items())),
            "texts": sum(texts.values()),
            "texts_per_patient_week": {"p95": quantile(list(texts.values()), 0.95),
                                       "histogram": {str(k): n for k, n in sorted(Counter(texts.values()).items())}}}


_CEILINGS: dict = {}


def ceiling(month: Month, rules: PolicySpec) -> tuple[int, int]:
    """How many fillable cancellations eligible patients could have filled: (the maximum matching, the looser
    per-vacancy count).

    An edge joins a fillable vacancy (opened at least ``min_lead_minutes`` before the slot, the product's rule)
    and a patient on the list before the slot (on it when the vacancy opened, or joining later), not opted out,
    fitting window and practitioner, who would have taken it in time: asked as soon as both were there (or at
    the end of quiet hours when that fell inside them), their reply to that slot is ACCEPT and arrives (read and
    sent awake, ``Month.answer_at``) before the slot's start minus the window's margin (or the answer window's
    end, if later); or, under a policy with
    standing acceptance, they opted in and the slot's lead then meets their minimum notice. Each patient fills
    at most one slot, so the ceiling is the maximum bipartite matching; the per-vacancy count (a vacancy with
    any edge) lets one
    patient count for several and is an upper bound of it."""
    key = (month.seed, month.clinic_label, month.params, rules.name)
    if key in _CEILINGS:
        return _CEILINGS[key]
    edges = ceiling_edges(month, rules)
    result = (max_matching(edges), sum(1 for patients in edges.values() if patients))
    _CEILINGS[key] = result
    return result


def ceiling_edges(month: Month, rules: PolicySpec) -> dict[str, list[str]]:
    """The ceiling's graph (``ceiling``): fillable vacancy key → the entry keys that would have filled it in time."""
    from .models import next_send_time
    from .windows import Window

    window = Window(rules, month.params)
    lead = timedelta(minutes=rules.min_lead_minutes)
    minutes = timedelta(minutes=month.params.slot_minutes)
    edges: dict[str, list[str]] = {}
    for b in month.cancellations:
        if b.starts_at - b.cancel_at < max(lead, USEFUL_LEAD):
            continue
        edges[b.key] = []
        for e in month.entries:
            # Asked the moment both the vacancy and the patient are there (a later arrival can still fill it).
            joined = max(b.cancel_at, e.arrives_at)
            asked = next_send_time(joined, month) if rules.quiet_hours else joined
            if (joined >= b.starts_at or (e.opt_out_at is not None and e.opt_out_at <= asked)
                    or not fits(e, b.practitioner, b.starts_at, b.starts_at + minutes, month.params.timezone)):
                continue
            reply = month.reply(e.key, b)
            notice = month.standing_notice(e.key) if rules.standing_acceptance else None
            # In time: before the slot's start minus the margin, or the answer window's end if later (the window
            # is never shorter than its minimum, even when that crosses the margin). A standing booking counts
            # only once acknowledged: the patient would say yes and reads it before the slot.
            latest = max(b.starts_at - window.margin, window.deadline(asked, b.starts_at))
            yes = reply.kind == "ACCEPT"
            if ((yes and month.answer_at(asked, reply) <= latest)
                    or (yes and notice is not None and b.starts_at - joined >= timedelta(minutes=notice)
                        and month.answer_at(joined, reply) < b.starts_at)):
                edges[b.key].append(e.key)
    return edges


def ceiling_neutral(month: Month, rules: PolicySpec) -> int:
    """The ceiling without any policy's features: a patient on the list who would accept the slot if asked the
    moment both were there (no quiet hours, no standing acceptance, no late accept), their yes read and sent awake
    before the slot's start minus the answer margin; each patient used once (maximum matching)."""
    key = (month.seed, month.clinic_label, month.params, "neutral")
    if key in _CEILINGS:
        return _CEILINGS[key][0]
    from .windows import Window

    margin = Window(rules, month.params).margin
    minutes = timedelta(minutes=month.params.slot_minutes)
    edges: dict[str, list[str]] = {}
    for b in month.cancellations:
        if b.starts_at - b.cancel_at < USEFUL_LEAD:
            continue
        edges[b.key] = []
        for e in month.entries:
            asked = max(b.cancel_at, e.arrives_at)
            if (asked >= b.starts_at or (e.opt_out_at is not None and e.opt_out_at <= asked)
                    or not fits(e, b.practitioner, b.starts_at, b.starts_at + minutes, month.params.timezone)):
                continue
            reply = month.reply(e.key, b)
            if reply.kind == "ACCEPT" and month.answer_at(asked, reply) <= b.starts_at - margin:
                edges[b.key].append(e.key)
    result = max_matching(edges)
    _CEILINGS[key] = (result, 0)
    return result


def max_matching(edges: dict[str, list[str]]) -> int:
    """The size of a maximum bipartite matching (augmenting paths, Kuhn): each vacancy to one patient and each
    patient to one vacancy."""
    return len(matching(edges))


def matching(edges: dict[str, list[str]]) -> dict[str, str]:
    """A maximum bipartite matching of ``edges`` (augmenting paths, Kuhn): patient → vacancy."""
    owner: dict[str, str] = {}

    def augment(vacancy: str, seen: set[str]) -> bool:
        for patient in edges[vacancy]:
            if patient in seen:
                continue
            seen.add(patient)
            if patient not in owner or augment(owner[patient], seen):
                owner[patient] = vacancy
                return True
        return False

    for vacancy in edges:
        augment(vacancy, set())
    return owner


def fairness(month: Month, spec: PolicySpec, log: dict, sooner: dict[str, float]) -> dict:
    """Wait reduction by band and by waiting-time quartile, pass-overs with reasons, Jain's index."""
    entries = sorted(month.entries, key=lambda e: (e.waiting_since, e.key))
    quartile = {e.key: 1 + (4 * i) // len(entries) for i, e in enumerate(entries)} if entries else {}

    def group(key_of) -> dict:
        out: dict = {}
        members = defaultdict(list)
        for e in entries:
            members[key_of(e)].append(e.key)
        for name, keys in sorted(members.items()):
            gained = [sooner.get(k, 0.0) for k in keys]
            booked = sum(1 for k in keys if k in sooner)
            out[str(name)] = {"patients": len(keys), "booked": booked, "booked_share": ratio(booked, len(keys)),
                              "days_sooner_per_patient": round(statistics.fmean(gained), 2)}
        return out

    passovers, reasons, opportunities, offers_received = _passovers(month, spec, log)
    shares = [offers_received.get(k, 0) / n for k, n in opportunities.items() if n]
    per_candidate = list(passovers.values())
    return {
        "by_band": group(lambda e: e.band),
        "by_wait_quartile": group(lambda e: f"Q{quartile[e.key]}"),
        "by_responsiveness": group(lambda e: e.responsiveness),
        "passovers": {"total": sum(per_candidate), "candidates": len(per_candidate),
                      "per_candidate_mean": ratio(sum(per_candidate), len(per_candidate)),
                      "per_candidate_max": max(per_candidate, default=0), "reasons": dict(reasons)},
        "jain_offers_per_opportunity": jain(shares),
    }


def _busy_intervals(log: dict) -> dict[str, list[tuple[datetime, datetime]]]:
    busy = defaultdict(list)
    for o in log["offers"]:
        if not o.get("concurrent"):
            busy[o["entry"]].append((o["at"], o["closed_at"] or o["at"] + timedelta(days=365)))
    return busy


def _passovers(month: Month, spec: PolicySpec, log: dict):
    """For each offer to X: the eligible, free candidates who had waited longer than X.

    The reason is the first that applies: PRIORITY (X's band is higher), SLOT_FIT (X named the
    practitioner, the other takes anyone), WEEKLY_CAP, DECLINE_SUPPRESSION, else ORDER (the product
    skipped them for a reason this log does not see: budget, a row locked by another dispatcher).
    A modelled policy that offers concurrently (broadcast) passes nobody over.
    """
    bookings = {b.key: b for b in month.bookings}
    opened = {v["key"]: v["opened_at"] for v in log["vacancies"]}
    booked_at = {o["entry"]: o["closed_at"] or o["at"] for o in log["offers"] if o["booked"]}
    busy = _busy_intervals(log)
    offered = defaultdict(list)  # entry → offer times
    declined = defaultdict(list)
    asked = defaultdict(set)  # vacancy → entries offered so far
    for o in log["offers"]:
        offered[o["entry"]].append(o["at"])
        if o["status"] == "DECLINED":
            declined[o["entry"]].append(o["closed_at"] or o["at"])

    def free(e, t) -> bool:
        if e.arrives_at > t or (e.opt_out_at is not None and e.opt_out_at <= t):
            return False
        if e.key in booked_at and booked_at[e.key] <= t:
            return False
        return not any(a <= t < b for a, b in busy.get(e.key, ()))

    passovers: Counter = Counter()
    reasons: Counter = Counter()
    for o in sorted(log["offers"], key=lambda o: o["at"]):
        b, t, x = bookings[o["vacancy"]], o["at"], month.by_key[o["entry"]]
        if not o.get("concurrent"):
            ends = b.starts_at + timedelta(minutes=month.params.slot_minutes)
            for y in month.entries:
                if (y.key == x.key or y.waiting_since >= x.waiting_since or y.key in asked[o["vacancy"]]
                        or not fits(y, b.practitioner, b.starts_at, ends, month.params.timezone) or not free(y, t)):
                    continue
                passovers[y.key] += 1
                reasons[_reason(spec, x, y, t, offered, declined)] += 1
        asked[o["vacancy"]].add(x.key)

    opportunities: Counter = Counter()
    for key, at in opened.items():
        b = bookings[key]
        ends = b.starts_at + timedelta(minutes=month.params.slot_minutes)
        for y in month.entries:
            if fits(y, b.practitioner, b.starts_at, ends, month.params.timezone) and (y.arrives_at <= at) and (
                    y.key not in booked_at or booked_at[y.key] > at):
                opportunities[y.key] += 1
    received = Counter(o["entry"] for o in log["offers"])
    return passovers, reasons, opportunities, received


def _reason(spec: PolicySpec, x, y, t: datetime, offered, declined) -> str:
    if spec.use_priority and y.band < x.band:
        return "PRIORITY"
    if spec.use_practitioner and x.practitioner is not None and y.practitioner is None:
        return "SLOT_FIT"
    recent = sum(1 for a in offered[y.key] if t - timedelta(days=7) < a <= t)
    if spec.weekly_offer_cap and recent >= spec.weekly_offer_cap:
        return "WEEKLY_CAP"
    if any(d <= t < d + timedelta(hours=spec.decline_suppression_hours) for d in declined[y.key]):
        return "DECLINE_SUPPRESSION"
    return "ORDER"
