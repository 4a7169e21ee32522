"""``sim/results/<policy>.json`` and ``docs/simulation.md`` with its figures (median, min–max over seeds)."""

from __future__ import annotations

import json
import platform
import random
import statistics
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from .generator import SCALES
from .policies import ALL_POLICIES, POLICIES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "simulation.md"
FIGURES = ROOT / "docs" / "simulation"

# (key in the flattened metrics, label, format)
HEADLINE = [
    ("fill_rate", "fill rate", "pct"),
    ("time_to_fill_minutes.p50", "time to fill p50 (min)", "num"),
    ("time_to_fill_minutes.p90", "time to fill p90 (min)", "num"),
    ("offers_per_vacancy", "offers / vacancy", "num"),
    ("acceptance_per_offer", "acceptance / offer", "pct"),
    ("offers_never_seen", "offers closed before their notice", "num"),
    ("messages_per_patient_week.p95", "msgs / patient / week p95", "num"),
    ("messages_per_patient_week.max", "msgs / patient / week max", "num"),
    ("quiet_hour_notices", "notices in quiet hours", "num"),
    ("days_sooner.total", "days sooner gained (total)", "num"),
    ("days_sooner.p50", "days sooner per booking p50", "num"),
    ("exhausted_vacancies", "vacancies exhausted", "num"),
    ("fairness.jain_offers_per_opportunity", "Jain's index (offers / opportunity)", "num"),
    ("fairness.passovers.per_candidate_mean", "pass-overs per passed candidate", "num"),
]


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def summarize(values: list) -> dict | None:
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def write_results(results: list[dict], folder: Path, *, scale: str, seeds: list[int], seconds: float,
                  cpu_seconds: float | None = None, specs=None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    labels = {p.name: p for p in (ALL_POLICIES if specs is None else specs)}
    for name in sorted({r["policy"] for r in results}):
        runs = [r for r in results if r["policy"] == name]
        keys = sorted({k for r in runs for k in flatten(r["metrics"])})
        flat = [flatten(r["metrics"]) for r in runs]
        body = {
            "policy": name,
            "label": labels[name].label,
            "modelled": bool(labels[name].modelled),
            "spec": labels[name].to_dict(),
            "scale": scale,
            "params": SCALES[scale].to_dict(),
            "seeds": seeds,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_seconds_all_policies": round(seconds, 1),
            "cpu_seconds_all_policies": None if cpu_seconds is None else round(cpu_seconds, 1),
            "machine": f"{platform.machine()} {platform.python_version()}",
            "summary": {k: s for k in keys if (s := summarize([f.get(k) for f in flat])) is not None},
            "runs": runs,
        }
        (folder / f"{name}.json").write_text(json.dumps(body, indent=1, sort_keys=True, default=str) + "\n")


def load(folder: Path) -> list[dict]:
    order = [p.name for p in POLICIES]
    found = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    return sorted(found, key=lambda r: order.index(r["policy"]) if r["policy"] in order else 99)


def fmt(summary: dict | None, kind: str) -> str:
    if summary is None:
        return "–"

    def one(v):
        if kind == "pct":
            return f"{100 * v:.0f}%"
        return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}".rstrip("0").rstrip(".")

    if summary["min"] == summary["max"]:
        return one(summary["median"])
    return f"{one(summary['median'])} ({one(summary['min'])}–{one(summary['max'])})"


def _bar(ax, results, key, title, pct=False):
    names, med, low, high = [], [], [], []
    for r in results:
        s = r["summary"].get(key)
        if s is None:
            continue
        k = 100 if pct else 1
        names.append(textwrap.fill(r["label"], 15))
        med.append(s["median"] * k)
        low.append((s["median"] - s["min"]) * k)
        high.append((s["max"] - s["median"]) * k)
    ax.bar(range(len(names)), med, yerr=[low, high], capsize=4, color="#4a7ab0")
    ax.set_xticks(range(len(names)), names, fontsize=6)
    ax.set_title(title, fontsize=9)


def plots(results: list[dict]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIGURES.mkdir(parents=True, exist_ok=True)
    made = []
    panels = [
        ("fill", [("fill_rate", "Fill rate (%)", True), ("acceptance_per_offer", "Acceptance per offer (%)", True)]),
        ("speed", [("time_to_fill_minutes.p50", "Time to fill p50 (min)", False),
                   ("time_to_fill_minutes.p90", "Time to fill p90 (min)", False)]),
        ("messages", [("offers_per_vacancy", "Offers per vacancy", False),
                      ("messages_per_patient_week.p95", "Messages / patient / week (p95)", False)]),
    ]
    for name, specs in panels:
        fig, axes = plt.subplots(1, len(specs), figsize=(12, 4.2))
        for ax, (key, title, pct) in zip(axes, specs, strict=True):
            _bar(ax, results, key, title, pct)
        fig.suptitle("median, error bars min–max over seeds", fontsize=8)
        fig.tight_layout()
        path = FIGURES / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append((name, path.name))
    for group, title in (("by_band", "Days sooner per waiting patient, by priority band"),
                         ("by_wait_quartile", "Days sooner per waiting patient, by waiting quartile (Q1 longest)")):
        fig, ax = plt.subplots(figsize=(11, 3.6))
        cats = sorted({k.split(".")[2] for r in results for k in r["summary"] if k.startswith(f"fairness.{group}.")})
        width = 0.8 / max(len(results), 1)
        for i, r in enumerate(results):
            meds, lows, highs = [], [], []
            for c in cats:
                zero = {"median": 0, "min": 0, "max": 0}
                s = r["summary"].get(f"fairness.{group}.{c}.days_sooner_per_patient") or zero
                meds.append(s["median"])
                lows.append(s["median"] - s["min"])
                highs.append(s["max"] - s["median"])
            ax.bar([j + i * width for j in range(len(cats))], meds, width, yerr=[lows, highs], capsize=2,
                   label=r["label"])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cats))],
                      [f"band {c}" if group == "by_band" else c for c in cats])
        ax.set_title(title + " — median, min–max over seeds", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = FIGURES / f"fairness_{group}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append((group, path.name))
    return made


# Pooled figures: (name, label, numerator key, denominator key or None for a plain sum, format).
POOLED = [
    ("fill", "fill rate (filled ÷ fillable)", "filled", "fillable_cancellations", "pct"),
    ("attended", "filled and attended (÷ fillable)", "filled_attended", "fillable_cancellations", "pct"),
    ("ceiling_share", "ceiling, matching (÷ fillable)", "ceiling", "fillable_cancellations", "pct"),
    ("fill_of_ceiling", "fill ÷ ceiling (matching)", "filled", "ceiling", "pct"),
    ("ceiling_any_share", "looser ceiling, any patient per slot (÷ fillable)", "ceiling_any",
     "fillable_cancellations", "pct"),
    ("fill_of_ceiling_any", "fill ÷ looser ceiling", "filled", "ceiling_any", "pct"),
    ("standing_bookings", "standing bookings (total)", "standing_bookings", None, "num"),
    ("standing_releases", "standing bookings released (total)", "standing_releases", None, "num"),
    ("standing_refilled", "released slots refilled (total)", "standing_refilled", None, "num"),
    ("standing_missed", "standing bookings missed, no-show (total)", "standing_missed", None, "num"),
    ("missed", "bookings missed, no-show (total)", "missed", None, "num"),
    ("acceptance", "acceptance / offer (offers that asked; standing bookings left out)", "accepted",
     "asked_offers", "pct"),
    ("acceptance_first_week", "acceptance / offer, first week (fresh list)", "accepted_first_week",
     "offers_first_week", "pct"),
    ("offers_per_vacancy", "offers / vacancy", "offers", "vacancies", "num"),
    ("slow_booked", "booked share, SLOW responders", "fairness.by_responsiveness.SLOW.booked",
     "fairness.by_responsiveness.SLOW.patients", "pct"),
    ("fast_booked", "booked share, FAST responders", "fairness.by_responsiveness.FAST.booked",
     "fairness.by_responsiveness.FAST.patients", "pct"),
    ("silent_booked", "booked share, SILENT", "fairness.by_responsiveness.SILENT.booked",
     "fairness.by_responsiveness.SILENT.patients", "pct"),
    ("band2_booked", "booked share, top priority band (2)", "fairness.by_band.2.booked",
     "fairness.by_band.2.patients", "pct"),
    ("band0_booked", "booked share, band 0", "fairness.by_band.0.booked", "fairness.by_band.0.patients", "pct"),
    ("q1_booked", "booked share, longest-waiting quartile", "fairness.by_wait_quartile.Q1.booked",
     "fairness.by_wait_quartile.Q1.patients", "pct"),
    ("quiet", "notices in quiet hours (total)", "quiet_hour_notices", None, "num"),
    ("late_replies", "replies after the offer closed (total)", "replies_after_close", None, "num"),
    ("days_sooner", "days sooner gained (total)", "days_sooner.total", None, "num"),
]
# Paired against FIFO on the same months (the difference's 95% interval from the month bootstrap).
PAIRED = ["fill", "attended", "fill_of_ceiling", "slow_booked", "band2_booked", "q1_booked"]
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 22  # the bootstrap's own seed: the page is reproducible from the result files


def _runs_by_month(result: dict) -> dict:
    return {(r["seed"], r["clinic"]): flatten(r["metrics"]) for r in result["runs"]}


def _ratio_of(runs: list[dict], num: str, den: str | None) -> float | None:
    top = sum(r.get(num) or 0 for r in runs)
    if den is None:
        return top
    bottom = sum(r.get(den) or 0 for r in runs)
    return top / bottom if bottom else None


def _p95(runs: list[dict]) -> float | None:
    """p95 of messages per patient-week, pooled over every run's patient-weeks."""
    counts = []
    for r in runs:
        for k, v in r.items():
            if k.startswith("messages_per_patient_week.histogram."):
                counts += [int(k.rsplit(".", 1)[1])] * int(v)
    return quantile_sorted(sorted(counts), 0.95)


def quantile_sorted(ordered: list, q: float) -> float | None:
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _interval(values: list[float]) -> tuple[float, float] | None:
    values = sorted(v for v in values if v is not None)
    if len(values) < 20:
        return None
    return quantile_sorted(values, 0.025), quantile_sorted(values, 0.975)


def _draws(months: list) -> list[list]:
    """The month bootstrap: each draw resamples whole months (clusters) with replacement."""
    rng = random.Random(BOOTSTRAP_SEED)
    return [[rng.choice(months) for _ in months] for _ in range(BOOTSTRAP_DRAWS)]


def _paired(a: dict, b: dict, months: list, draws: list[list], num: str, den: str | None) -> dict:
    """Policy ``a`` minus policy ``b`` on the same months (pooled ratios), with the bootstrap's interval."""
    def diff(ms):
        ms = [m for m in ms if m in a and m in b]
        x = _ratio_of([a[m] for m in ms], num, den)
        y = _ratio_of([b[m] for m in ms], num, den)
        return None if x is None or y is None else x - y

    return {"value": diff(months), "interval": _interval([diff(d) for d in draws])}


def pooled_stats(results: list[dict]) -> dict:
    """policy → figure → {value, low, high} pooled over months, and for each policy its paired difference
    against FIFO (``diff_<figure>``) on the months both ran. Ratios are pooled (sum ÷ sum), intervals are
    the 2.5 and 97.5 percentiles of a cluster bootstrap by month (the months are independent; offers and
    patients inside a month are not)."""
    by_policy = {r["policy"]: _runs_by_month(r) for r in results}
    months = sorted({m for runs in by_policy.values() for m in runs})
    draws = _draws(months)
    out: dict = {}
    fifo = by_policy.get("fifo", {})
    for name, runs in by_policy.items():
        stats: dict = {}
        own = [m for m in months if m in runs]
        for key, _, num, den, _ in POOLED:
            value = _ratio_of([runs[m] for m in own], num, den)
            spread = _interval([_ratio_of([runs[m] for m in d if m in runs], num, den) for d in draws])
            stats[key] = {"value": value, "interval": spread}
        stats["p95_messages"] = {"value": _p95([runs[m] for m in own]), "interval": None}
        shared = [m for m in own if m in fifo]
        if shared and name != "fifo":
            for key in PAIRED:
                _, _, num, den, _ = next(p for p in POOLED if p[0] == key)
                stats[f"diff_{key}"] = _paired(runs, fifo, shared, draws, num, den)
        base = by_policy.get("ours", {})
        both = [m for m in own if m in base]
        if name.startswith("ours_") and both:  # ours minus this feature-off run, on the months both ran
            stats["ours_gain_fill"] = _paired(base, runs, both, _draws(both), "filled", "fillable_cancellations")
        stats["months"] = len(own)
        out[name] = stats
    return out


def show(stat: dict | None, kind: str, signed: bool = False) -> str:
    if not stat or stat.get("value") is None:
        return "–"

    def one(v):
        if kind == "pct":
            return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}%"
        return f"{v:+.0f}" if signed else (f"{v:,.0f}" if abs(v) >= 10 else f"{v:.2f}".rstrip("0").rstrip("."))

    text = one(stat["value"])
    if stat.get("interval"):
        low, high = stat["interval"]
        text += f" [{one(low)}, {one(high)}]"
    return text


def verdict(results: list[dict], stats: dict) -> list[str]:
    """The issue's "Done when", computed from the pooled figures (nothing here is written by hand)."""
    labels = {r["policy"]: r["label"] for r in results}
    if "ours" not in stats or "fifo" not in stats:
        return ["* Ours or FIFO did not run: no verdict."]
    ours, fifo = stats["ours"], stats["fifo"]
    d = ours.get("diff_fill", {})
    low = (d.get("interval") or (None, None))[0]
    lines = []
    beats = d.get("value") is not None and d["value"] >= 0.15 and low is not None and low > 0
    lines.append(
        f"* **Fill**: ours {show(ours['fill'], 'pct')} against FIFO's {show(fifo['fill'], 'pct')} pooled; paired "
        f"difference {show(d, 'pct', True)} points → "
        + ("**meets** the bar (at least +15 points, interval above zero)." if beats else
           "**does not meet** the bar of at least +15 points with the interval above zero"
           + (" (the interval is above zero)." if low is not None and low > 0 else "."))
    )
    share = ours["fill_of_ceiling"]
    lines.append(
        f"* **Ceiling** (maximum matching, each patient one slot): "
        f"{show(ours['ceiling_share'], 'pct')} of the fillable cancellations could have been filled by a waiting, "
        f"eligible patient who would have taken it in time; ours fills {show(share, 'pct')} of that ceiling (FIFO "
        f"{show(fifo['fill_of_ceiling'], 'pct')}) → "
        + ("**meets** 0.8." if (share["value"] or 0) >= 0.8 else "**below** 0.8.")
        + f" The looser per-slot count ({show(ours['ceiling_any_share'], 'pct')} of the fillable, one patient "
        f"counted for every slot they would take): ours {show(ours['fill_of_ceiling_any'], 'pct')} of it."
    )
    lines.append(
        f"* **Filled and attended** (filled minus the bookings drawn as no-shows): ours "
        f"{show(ours['attended'], 'pct')}, FIFO {show(fifo['attended'], 'pct')} (paired "
        f"{show(ours.get('diff_attended'), 'pct', True)} points)."
    )
    lines.append(
        f"* **Standing acceptance** (ours, pooled totals): {show(ours['standing_bookings'], 'num')} automatic "
        f"bookings, {show(ours['standing_releases'], 'num')} released in time, of whose slots "
        f"{show(ours['standing_refilled'], 'num')} were refilled by the cascade; "
        f"{show(ours['standing_missed'], 'num')} kept standing bookings missed (no-show) of "
        f"{show(ours['missed'], 'num')} missed bookings in all (FIFO, which has no standing acceptance, "
        f"{show(fifo['missed'], 'num')} missed)."
    )
    om, fm = ours["p95_messages"]["value"], fifo["p95_messages"]["value"]
    if om is not None and fm is not None:
        lines.append(f"* **Messages**: p95 per patient per week (pooled patient-weeks) ours {om:g}, FIFO {fm:g} → "
                     + ("at most FIFO's." if om <= fm else "**more than FIFO's**."))
    q = ours["quiet"]["value"]
    lines.append(f"* **Quiet hours**: ours sent {q:g} notices in quiet hours (FIFO, which has none by design, "
                 f"{fifo['quiet']['value']:g}).")
    for key, what in (("slow_booked", "slow responders"), ("band2_booked", "the top priority band")):
        dd = ours.get(f"diff_{key}", {})
        ok = (dd.get("value") or 0) >= 0
        lines.append(f"* **Booked among {what}**: ours {show(ours[key], 'pct')}, FIFO {show(fifo[key], 'pct')} "
                     f"(paired {show(dd, 'pct', True)} points) → "
                     + ("at least FIFO's." if ok else "**below FIFO's**."))
    contributions = []
    for name, feature in (("ours_fixed_window", "the LEAD_TIME answer window (against the fixed 20 minutes)"),
                          ("ours_old_limits", "the new contact limits (against a cap of 3 a week and a decline "
                                              "holding back every offer for 72 h)"),
                          ("ours_no_standing", "standing acceptance (against nobody booked automatically)"),
                          ("ours_no_ask_last", "asking last the patients who do not answer (against keeping them "
                                               "in their place)"),
                          ("ours_no_late_accept", "late accepts (against turning away every yes after the "
                                                  "window)"),
                          ("ours_unanswered_window", "leaving the short window for patients whose recent offers "
                                                     "went unanswered off (against a 30-minute window after 2 "
                                                     "unanswered offers)"),
                          ("ours_no_caps", "the contact limits (against none: negative means they cost fills)"),
                          ("ours_gate_not_used", "the reliability gate (against NOT_USED)")):
        if name in stats and "ours_gain_fill" in stats[name]:
            contributions.append(f"{feature}: {show(stats[name]['ours_gain_fill'], 'pct', True)} points of fill "
                                 f"(paired on the {stats[name]['months']} months it ran; {labels[name]} "
                                 f"{show(stats[name]['fill'], 'pct')})")
    if contributions:
        lines.append("* **What each feature contributed** (ours minus the run with it turned off, pooled): "
                     + "; ".join(contributions) + ".")
    if "ours_fixed_window" not in stats:
        lines.append("* The product has no answer-window rule yet (`answer_window`), so every real policy ran "
                     "under the fixed window and no feature-off run of it was made.")
    modelled = [r["policy"] for r in results if r["modelled"] and r["policy"] in stats]
    if modelled:
        lines.append("* Modelled, under ours' answer window, quiet hours and one open offer per patient: " + ", ".join(
            f"{labels[m]} {show(stats[m]['fill'], 'pct')} at p95 {stats[m]['p95_messages']['value']:g} messages "
            "per patient-week" for m in modelled) + ".")
    return lines


def med(summary: dict, key: str) -> float:
    return (summary.get(key) or {}).get("median") or 0


def render_doc(folder: Path) -> Path:
    results = load(folder)
    if not results:
        DOC.write_text("# Backfill simulation\n\nNo results yet: run `make simulate`.\n")
        return DOC
    figures = plots(results)
    stats = pooled_stats(results)
    first = results[0]
    runs = [run for r in results if not r["modelled"] for run in r["runs"]]
    db_cpu = (sum(run["db_cpu_seconds"] for run in runs)
              if runs and all(run.get("db_cpu_seconds") is not None for run in runs) else None)
    statements = sum(run["metrics"].get("statements") or 0 for run in runs)
    lines = [
        "# Backfill simulation",
        "",
        "<!-- generated by `make simulate` (sim/report.py): edit the generator, not this file -->",
        "",
        "How many cancelled slots the waitlist refills, how quickly, for whom, and at what messaging cost, "
        "for the policies on **the same generated clinic month and the same patient behaviour**. "
        "`make simulate` regenerates this page, `sim/results/*.json` and the figures.",
        "",
        f"Scale `{first['scale']}` · seeds {first['seeds']} · generated {first['generated_at']} · "
        f"all policies took {first['wall_seconds_all_policies']:.0f} s wall"
        + (f", {first['cpu_seconds_all_policies']:.0f} s CPU in Python (this process and its workers)"
           if first.get("cpu_seconds_all_policies") is not None else "")
        + (f" and {db_cpu:.0f} s in the runs' PostgreSQL backends" if db_cpu is not None else
           " (the PostgreSQL server's CPU is not in that figure)")
        + f", {statements:,} SQL statements. Each run's `engine_cost` in `sim/results/*.json` gives events, "
        "seconds and statements per event kind (the engine jumps the clock from event to event: no fixed ticks).",
        "",
        *budget_line(first, db_cpu, statements),
        "",
        "How long it takes: the real runs are the cost (the modelled ones take well under a second). Each is a "
        "replay of thousands of commands through the product's services, and most of its statements are "
        "inside them (dispatch, notice delivery, expiry, staff review); a run keeps about one core busy between "
        "Python and its PostgreSQL backend, so on 2 cores the wall is at least half of the Python and "
        "PostgreSQL CPU above. Issue #12's budget for the default scale is 3 minutes on 2 cores. How the work "
        "is scheduled: `SIM_DATABASE_URL` names a template database holding the migrated schema, kept while "
        "the migrations do not change (its comment is a hash of every migration file), so only the first run "
        "after a migration change migrates; each run gets its own copy (`CREATE DATABASE … TEMPLATE`, a "
        "fraction of a second), so runs neither see each other's rows nor depend on the order they ran in. "
        "`SIM_WORKERS` processes (default 3 on 2 cores: a run's process waits while its PostgreSQL backend works, "
        "so a third keeps both cores busy) take the runs from one queue, longest first "
        "(policies without a weekly cap make about twice the offers), each starting the next when it finishes "
        "one; they set Django up while the template is checked, and the modelled policies run in the main "
        "process meanwhile. What runs: every month for ours, the FIFO cascade and the modelled policies; each "
        "feature-off run (`months_share` in sim/policies.py) on the first quarter of the months, paired with ours "
        "on those (the time budget: the real runs are the cost).",
        "",
        "## How it works",
        "",
        "* `sim/generator.py` builds a month from seeded distributions (below); `Month.reply(entry, slot)` is a pure "
        "function of (seed, patient, slot), so every policy meets the same answers.",
        "* **Real policies** (ours with the product's defaults; ours with one feature turned off at a time: the "
        "fixed 20-minute answer window instead of LEAD_TIME, the old contact limits (a weekly cap of 3 and a "
        "decline holding back every offer for 72 h), no standing acceptance, patients who do not answer kept in "
        "their place instead of asked last, no late accepts; the FIFO cascade) run through the "
        "product: `sim/engine.py` replays the month against PostgreSQL (its own database, `SIM_DATABASE_URL`, "
        "default `clinic_waitlist_sim`, as a template copied for each run). Each policy, quiet hours and daily "
        "contact cap included, is published with `policy_publish`; each simulated patient's consent is recorded "
        "(`consent_record`, GRANTED at import; an opt-out is the opt-out link's REVOKED, after which the matcher "
        "passes them over with NO_CONTACT_CONSENT); the reliability feed records a FRESH decision for all but "
        "`decision_unavailable_share` of them. The engine calls `appointment_cancel_with_vacancy`, "
        "`vacancy_dispatch` (again at a waiting vacancy's `waiting_until`: quiet hours, contact caps), the outbox "
        "worker (`outbox_deliver_due` → the real `deliver_offer_notice` → `offer_notice_delivered`, so the "
        "answer window counts from delivery: the engine reads each offer's `expires_at` and state from the "
        "database and never computes a window itself), `offer_claim` + `offer_book` (the claim page's accept; "
        "a yes after the window, `offer_late_accept` + `offer_book`, which the product refuses, or keeps while "
        "the time is offered to someone else), "
        "`offer_decline`, `standing_acceptance_record` at an opted-in entry's arrival and `standing_release` when its "
        "patient releases an automatic booking (dispatch then answers BOOKED: the engine reads the booking notice's "
        "delivery like an offer notice's and dispatches a released vacancy again at once), the expiry "
        "job's work at each offer's expiry (`offers_expire_due`, `expire_run` without its `JobRun` bookkeeping), "
        "`vacancy_review_resolve` (staff PROMOTE a REVIEW "
        "vacancy `staff_review_minutes` later, in clinic hours), `reconcile_run` daily, `entry_create`, and "
        "dispatch again when a candidate may have appeared (an arrival, an offer of theirs that closed, the "
        "entry's `suppressed_until` as the product stored it after a decline, a week after each of their offers "
        "when the policy row has a weekly cap; the product's minute-by-minute reconcile does the same). Such a "
        "wake asks the product's own eligibility (`matcher.ineligibility`, read-only) which open vacancies "
        "the entry may be offered now and dispatches only those: the engine copies none of the product's cap, "
        "suppression or window rules, so a change to them is measured as it is. The "
        "clock jumps to each event (time-machine, no fixed ticks) and `now=` is passed: nothing sleeps. Staff "
        "resolve a review only if the vacancy is still in REVIEW when they look (as in the console's queue). "
        "Patients reply `delay` after they **read** the notice, and neither read nor reply while asleep "
        "(`asleep_start`–`asleep_end`, an assumption): a notice sent at 02:00 is read at 07:00. All calls go "
        "through `sim/adapter.py`, the one place to adapt when the services change. Reads the run cannot change "
        "are not repeated (the waitlist flag, switched on once, is read once per run; vacancies the entry was "
        "already offered are not dispatched again for it), and events are ordered by database id, so a seed "
        "gives the same run every time. Each result file states the rules a run really ran under (`rules`: "
        "the published policy row's fields; for the modelled ones, their window, quiet hours and what they leave "
        "out).",
        "* **Modelled policies** (broadcast, batches of 3) are not expressible in the product; `sim/models.py` "
        "simulates them on the same month and behaviour with the same eligibility, quiet hours, lead and "
        "**answer window as ours** (the product's own `waitlist.rules.windows.answer_deadline` on ours' rule where "
        "the product has it, else ours' fixed window), and one open offer per patient (a patient answering "
        "one offer is not asked about another until it closes), but without decision freshness, weekly caps, "
        "decline suppression or daily contact caps. They are labelled *(modelled)*; they differ from ours "
        "only in asking several patients at once.",
        "* The FIFO cascade as our configuration, with the peer's rules: every entry rank 0 and any practitioner "
        "(so the order is created-at), a fixed 20-minute hold, 3-hour lead, accept books at once, no weekly "
        "cap, no decline suppression, no quiet hours, no contact cap, no reliability gate; a patient offered "
        "another practitioner than the one they wanted declines.",
        "",
        "## Results",
        "",
        f"Pooled over the {stats.get('ours', {}).get('months', 0)} months (each seed's clinic month; every policy "
        "ran on the same months and the same patient behaviour). Ratios are pooled (the months' numerators summed "
        "over their denominators summed), each with its 95% interval in brackets: the 2.5 and 97.5 percentiles "
        f"of a cluster bootstrap by month ({BOOTSTRAP_DRAWS:,} draws of whole months with replacement, seed "
        f"{BOOTSTRAP_SEED}): months are independent, vacancies and patients within one are not (they compete "
        "for the same list), so the month is the unit. Fill rate = vacancies filled ÷ cancellations made at "
        "least 1 h before the visit. The ceiling counts the fillable cancellations for which some waiting, "
        "eligible patient (on the list before the slot, not opted out, window and practitioner fit) would have "
        "accepted in time: their reply to that slot is ACCEPT and arrives, read and sent awake, before the slot's "
        "start minus ours' window margin, had they been asked as soon as both the vacancy and they were there "
        "(at the cancellation or their arrival, or at the end of quiet hours; only cancellations at least ours' "
        "`min_lead_minutes` ahead open a vacancy). "
        "It takes each vacancy on its own (one patient may count for several), so it is an upper bound no "
        "policy need reach; the ceiling used for the bar is instead the **maximum bipartite matching** of "
        "fillable vacancies and patients, with an edge where the patient would have filled that slot in time "
        "(the ACCEPT above, or a standing acceptance whose minimum notice the slot's lead at the cancellation "
        "meets), since each patient fills at most one slot; the looser per-slot count is shown beside it. Both "
        "are computed under ours' rules (lead, margin, quiet hours, standing acceptance) for every policy: a "
        "property of the month. Filled and attended: filled minus the bookings that stand at the end and are "
        "drawn as no-shows (`Month.no_show`, one draw per patient and slot, the same for every policy): 18% of "
        "bookings the patient would have accepted (by reply or standing; Fast Pass), 23% of standing bookings "
        "never read (Dantas 2018), all standing bookings the patient would have declined but read after "
        "their release deadline. Messages count offer notices and standing bookings' notices (a booking by "
        "reply also gets a confirmation, in every policy alike; it is not counted). Notices in quiet hours "
        "counts offer notices sent "
        "between `quiet_start` and `quiet_end` local: the FIFO cascade has no quiet hours (its count is its "
        "design); every policy of ours publishes them.",
        "",
    ]
    header = "| pooled figure | " + " | ".join(r["label"] for r in results) + " |"
    lines += [header, "|" + " --- |" * (len(results) + 1)]
    for key, label, _, _, kind in POOLED:
        lines.append(f"| {label} | " + " | ".join(show(stats[r["policy"]].get(key), kind) for r in results) + " |")
    lines.append("| months run | " + " | ".join(str(stats[r["policy"]]["months"]) for r in results) + " |")
    lines.append("| msgs / patient / week p95 (pooled patient-weeks) | " + " | ".join(
        show(stats[r["policy"]].get("p95_messages"), "num") for r in results) + " |")
    lines += ["", "Paired against the FIFO cascade on the same months (points; the difference's 95% interval from "
              "the same month bootstrap, both policies resampled together):", ""]
    others = [r for r in results if r["policy"] != "fifo"]
    lines += ["| difference vs FIFO | " + " | ".join(r["label"] for r in others) + " |",
              "|" + " --- |" * (len(others) + 1)]
    for key in PAIRED:
        label = next(p[1] for p in POOLED if p[0] == key)
        lines.append(f"| {label} | " + " | ".join(show(stats[r["policy"]].get(f"diff_{key}"), "pct", True)
                                                 for r in others) + " |")
    lines += ["", "Per month, median (min–max) over the months:", ""]
    lines += [header.replace("pooled figure", "metric"), "|" + " --- |" * (len(results) + 1)]
    for key, label, kind in HEADLINE:
        lines.append(f"| {label} | " + " | ".join(fmt(r["summary"].get(key), kind) for r in results) + " |")
    lines += ["", "### Verdict (issue #22's \"Done when\", computed)", ""] + verdict(results, stats) + [""]
    lines += ["## Figures", ""] + [f"![{name}](simulation/{path})" for name, path in figures] + [""]
    lines += ["## Fairness", "",
              "Days sooner per waiting patient (0 for those not booked) and the share booked, by priority band "
              "and by waiting-time quartile (Q1 = the quarter waiting longest). A pass-over is an eligible, free "
              "patient who had waited longer than the one offered; reasons: PRIORITY (the offered one's band "
              "was higher), SLOT_FIT (they named the practitioner), WEEKLY_CAP, DECLINE_SUPPRESSION, ORDER "
              "(skipped for a reason the log does not show: a budget, a row locked by another dispatcher). "
              "Jain's index is over offers ÷ opportunities (vacancies a patient was eligible for when opened). "
              "The product's notes are its `DispatchNote` rows (CONTACT_CAP, NO_CONTACT_CONSENT, PATIENT_OVERLAP, "
              "DECISION_*, ENTRY_LOCKED), counted with repeats.", ""]
    lines += ["| policy | band 0 | band 1 | band 2 | Q1 | Q2 | Q3 | Q4 | pass-over reasons (median) "
              "| product's pass-over notes (median) |", "| --- |" + " --- |" * 9]
    for r in results:
        s = r["summary"]
        cells = [fmt(s.get(f"fairness.by_band.{b}.days_sooner_per_patient"), "num") for b in "012"]
        cells += [fmt(s.get(f"fairness.by_wait_quartile.Q{q}.days_sooner_per_patient"), "num") for q in "1234"]
        reasons = ", ".join(f"{k.rsplit('.', 1)[1]} {v['median']:g}" for k, v in sorted(s.items())
                            if k.startswith("fairness.passovers.reasons.")) or "none"
        notes = ", ".join(f"{k.rsplit('.', 1)[1]} {v['median']:g}" for k, v in sorted(s.items())
                          if k.startswith("dispatch_notes.")) or "–"
        lines.append(f"| {r['label']} | " + " | ".join(cells) + f" | {reasons} | {notes} |")
    lines += shadow_section(results)
    lines += sweep_section(folder / "sweep", results)
    lines += other_seeds_section(folder / "other_seeds")
    fresh = ", ".join(f"{r['label']} {show(stats[r['policy']]['acceptance_first_week'], 'pct')}"
                      for r in results if not r["modelled"])
    lines += ["", CALIBRATION, f"* Measured acceptance per offer in the month's first week, while the list is fresh "
              f"(pooled, 95% interval): {fresh}; published: 8.3% (Sutter) to 11% (Fast Pass) per offer.",
              "", "## Parameters", "", "```"]
    lines += [f"{k} = {v}" for k, v in first["params"].items()] + ["```", ""]
    DOC.write_text("\n".join(lines))
    return DOC


# A measured rate of the real runs on two otherwise idle cores: (statements, wall seconds, when).
REFERENCE_RATE = (326_654, 173, "make simulate of 2026-12-02, 33 real runs, 3 workers")


def headline(folder: Path) -> dict:
    """The verdict's figures of the results in ``folder`` (``python -m sim.run --headline FILE`` writes them for a
    run on other seeds; docs/simulation.md shows them beside the committed seeds, "Other first seeds")."""
    results = load(folder)
    stats = pooled_stats(results)
    ours, fifo = stats["ours"], stats["fifo"]
    first = results[0]
    runs = [run for r in results if not r["modelled"] for run in r["runs"]]
    db_cpu = (sum(run["db_cpu_seconds"] for run in runs)
              if runs and all(run.get("db_cpu_seconds") is not None for run in runs) else None)

    def pct(stat):
        return show(stat, "pct")

    return {"seeds": first["seeds"], "generated_at": first["generated_at"], "ours_fill": pct(ours["fill"]),
            "fifo_fill": pct(fifo["fill"]), "paired_fill": show(ours.get("diff_fill"), "pct", True),
            "fill_of_ceiling": pct(ours["fill_of_ceiling"]), "fifo_fill_of_ceiling": pct(fifo["fill_of_ceiling"]),
            "p95_messages": [ours["p95_messages"]["value"], fifo["p95_messages"]["value"]],
            "slow_booked": [pct(ours["slow_booked"]), pct(fifo["slow_booked"])],
            "band2_booked": [pct(ours["band2_booked"]), pct(fifo["band2_booked"])],
            "quiet_notices": ours["quiet"]["value"], "wall_seconds": first["wall_seconds_all_policies"],
            "cpu_seconds": first.get("cpu_seconds_all_policies"), "db_cpu_seconds": db_cpu,
            "statements": sum(run["metrics"].get("statements") or 0 for run in runs)}


def other_seeds_section(folder: Path) -> list[str]:
    """Headline figures of runs on other first seeds (``SIM_SEED``), committed as headlines only."""
    found = sorted((json.loads(p.read_text()) for p in folder.glob("*.json")), key=lambda h: h["seeds"][0]) \
        if folder.is_dir() else []
    if not found:
        return []
    rows = [f"| {h['seeds'][0]}–{h['seeds'][-1]} | {h['ours_fill']} | {h['fifo_fill']} | {h['paired_fill']} | "
            f"{h['fill_of_ceiling']} | {h['p95_messages'][0]:g} / {h['p95_messages'][1]:g} | "
            f"{h['slow_booked'][0]} / {h['slow_booked'][1]} | {h['band2_booked'][0]} / {h['band2_booked'][1]} | "
            f"{h['quiet_notices']:g} | {h['wall_seconds']:.0f} s, {h['cpu_seconds'] or 0:.0f} + "
            f"{h['db_cpu_seconds'] or 0:.0f} s CPU, {h['statements']:,} |" for h in found]
    return ["", "## Other first seeds", "",
            "The same `make simulate` with another first seed (`SIM_SEED`; twelve other months), its headline "
            "figures only (`python -m sim.run --headline FILE`; its result files are not kept). Ours / FIFO where "
            "two figures are given.", "",
            "| seeds | ours fill | FIFO fill | paired vs FIFO (points) | ours fill ÷ ceiling | p95 msgs / patient-week "
            "| booked, slow responders | booked, top band | ours' quiet-hour notices | wall, CPU (Python + "
            "PostgreSQL), statements |", "| --- |" + " --- |" * 9, *rows]


def budget_line(first: dict, db_cpu: float | None, statements: int) -> list[str]:
    """The 3-minute budget, judged on CPU as well as wall: on a machine shared with other work the wall says
    more about the neighbours than about the simulator."""
    cpu = first.get("cpu_seconds_all_policies")
    if cpu is None or db_cpu is None:
        return []
    idle = (cpu + db_cpu) / 2
    wall = first["wall_seconds_all_policies"]
    done, seconds, when = REFERENCE_RATE
    by_rate = statements * seconds / done
    return [f"Budget (issue #22: under 3 minutes on 2 cores): this run took {wall:.0f} s wall; its Python and "
            f"PostgreSQL CPU come to {cpu + db_cpu:.0f} s (about {idle:.0f} s wall on two cores), figures that "
            "grow when the machine is shared (contention inflates CPU time too). The load-independent measure is "
            f"the statement count: at the rate measured on two idle cores ({done:,} statements in {seconds} s "
            f"wall, {when}) these {statements:,} statements take about {by_rate:.0f} s "
            f"({'within' if by_rate < 180 else 'over'} the budget)."]


def sweep_section(folder: Path, results: list[dict]) -> list[str]:
    """LEAD_TIME settings (``--sweep``) beside ours with the product's defaults, paired on the same months."""
    sweep = load(folder) if folder.is_dir() else []
    ours = next((r for r in results if r["policy"] == "ours"), None)
    if not sweep or ours is None:
        return []
    base = _runs_by_month(ours)
    rows, best = [], None
    for r in sweep:
        runs = _runs_by_month(r)
        months = sorted(m for m in runs if m in base)
        if not months:
            continue
        fill = _ratio_of([runs[m] for m in months], "filled", "fillable_cancellations")
        gain = _paired(runs, base, months, _draws(months), "filled", "fillable_cancellations")
        p95 = _p95([runs[m] for m in months])
        rows.append(f"| {r['label']} | {100 * fill:.1f}% | {show(gain, 'pct', True)} | {p95:g} |")
        if best is None or fill > best[1]:
            best = (r["label"], fill, len(months))
    # The sweep is run apart (``--sweep``): say so when ours' rules changed since, beyond the swept fields.
    swept = {"answer_window", "answer_window_percent", "answer_window_max_minutes", "answer_window_margin_minutes"}
    now_rules = ours["runs"][0]["metrics"].get("rules", {})
    then_rules = sweep[0]["runs"][0]["metrics"].get("rules", {})
    changed = sorted(k for k in set(now_rules) | set(then_rules)
                     if k not in swept and now_rules.get(k) != then_rules.get(k))
    ours_months = sorted(m for m in base if any(m in _runs_by_month(r) for r in sweep))
    ours_fill = _ratio_of([base[m] for m in ours_months], "filled", "fillable_cancellations")
    defaults = ours["runs"][0]["metrics"].get("rules", {})
    return ["", "## LEAD_TIME settings", "",
            f"Ours with one LEAD_TIME setting changed at a time (`python -m sim.run --sweep`), on the first "
            f"{len(ours_months)} months, paired with ours at the product's defaults (percent "
            f"{defaults.get('answer_window_percent')}, max {defaults.get('answer_window_max_minutes')} min, margin "
            f"{defaults.get('answer_window_margin_minutes')} min), which filled {100 * (ours_fill or 0):.1f}% of "
            "them.", "",
            *(["**The sweep ran before ours' other rules changed** (its runs' " + ", ".join(
                f"`{k}` {then_rules.get(k)!r}" for k in changed) + "; ours now " + ", ".join(
                f"`{k}` {now_rules.get(k)!r}" for k in changed) + "): its pairing with ours' current runs "
                "compares more than the LEAD_TIME setting. `python -m sim.run --sweep` runs it again.", ""]
              if changed else []),
            "| setting | fill | vs the defaults (points, 95% interval) | msgs / patient / week p95 |",
            "| --- | --- | --- | --- |", *rows, "",
            f"Best fill of these: {best[0]} ({100 * best[1]:.1f}%)." if best else ""]


def shadow_section(results: list[dict]) -> list[str]:
    """The month replayed with a candidate policy in SHADOW beside the enforced one (issue #12)."""
    for r in results:
        for run in r["runs"]:
            shadow = run["metrics"].get("shadow")
            if not shadow:
                continue
            reasons = shadow.get("differences_by_reason") or {}
            rate = shadow.get("agreement_rate")
            return ["", "## Shadow policy", "",
                    f"{r['label']} on seed {run['seed']}'s month ran with a candidate policy in SHADOW "
                    f"(`{json.dumps(shadow.get('changes'), default=str)}`, `python -m sim.run --shadow JSON`): the "
                    "product's `shadow_observe` ran the matcher with the candidate's fields on every dispatch and "
                    "recorded whom it would have offered, without changing the run. Agreement (the same patient "
                    f"offered): {'–' if rate is None else f'{100 * rate:.1f}%'} of {shadow.get('observations')} "
                    f"dispatches ({shadow.get('agreed')} agreed). Differences by the product's reason: "
                    + (", ".join(f"`{k}` {v}" for k, v in sorted(reasons.items())) or "none")
                    + ". A difference is a dispatch where the candidate would have offered someone else or nobody; "
                    "its reason is the product's code for what the candidate did instead (`shadow_summary`)."]
    return []


CALIBRATION = """## Calibration and sources

* Epic Fast Pass (JMIR 2024, e52071): 60,660 offers for 21,978 open slots, 11% accepted per offer, about
  30% of slots filled, patients seen a median 14 days sooner; Sutter Health's rollout (JMIR 2020, e16451):
  8.3% per offer. `accept_share` and the responsiveness classes (`fast_share`, `slow_share`, reply medians)
  are assumptions: a fast responder reached while the hold lasts accepts about 12% of offers (0.4 · 0.9 ·
  0.35), near Fast Pass. The measured acceptance per offer (table) is lower because responsive patients are
  booked early in the month and the list that stays is mostly slow or silent patients, and because a
  policy that ignores a named practitioner collects declines; the parameters are named so they can be
  recalibrated when a clinic's own reply data exist.
* Standing acceptance ("book me automatically"): `standing_share` = 0.3 of entries opt in when they join and
  pick a minimum notice from `standing_notice_minutes` with `standing_notice_weights` (both assumptions: no
  published figure); the adapter grants it at arrival (`standing_acceptance_record`). Dispatch books such a
  patient at once; the patient acts on the booking notice when they would have answered an offer of that
  slot (`Month.answer_at`; SILENT patients never read it); one whose reply to that slot is DECLINE and who
  reads it before `release_until` releases it then (`standing_release`, and the engine dispatches the
  reopened vacancy at once: the cascade); everyone else keeps it. No-shows of kept bookings: 18% when they
  would have accepted (Fast Pass, JMIR 2024: 5,399 visits of 6,603 accepts: `no_show_accepted`, applied to
  bookings by reply too), 23% when never read (no-shows average 23% across specialties, Dantas et al.,
  Health Policy 2018: `no_show_unread`), 100% when they would have declined but read it too late
  (`no_show_late_decline`, an assumption). The FIFO cascade has no standing acceptance (the peer has none),
  nor do the modelled policies (they model asking several patients, not automatic booking); the feature-off
  run "ours, no standing acceptance" asks the patients who opted in like everyone else.
* MGMA (2024): about 27% of cancelled visits are rebooked within 30 days across US practices (the bar a
  waitlist has to beat).
* Cancellation probability grows with booking lead (VHA clinics, J Ambul Care Manage 2008: 19% at one
  month to 50% by twelve): `cancel_base` + `cancel_per_month` · lead months, capped at `cancel_max`.
* Late cancellations are about half of all (outpatient neurology, 2024): `same_day_share` +
  `overnight_share` = 0.5.
* Booking horizons of 4–12 weeks (MDM Policy & Practice 2024): `booking_lead_mean_days`, `booking_lead_max_days`.
* Acceptance varies with age and channel (Luma Health, vendor data): modelled as responsiveness classes
  (fast, slow, silent), not as age.
* Contact caps and opt-outs are standard in commercial products: `contact_cap_per_day`, `opt_out_share`.
* Assumptions (no source): booked share, waitlist backlog and arrival rate, window lengths, the named-
  practitioner share, priority band weights, the current appointment's distance (days sooner), the
  patients' night (`asleep_start`–`asleep_end`: a notice is not read and a reply not sent then).
* Vendor claims (40–90% fill for first-to-reply SMS) are marketing, not measurements; the broadcast model
  shows what first-to-reply costs in messages."""
