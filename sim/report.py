"""``sim/results/<policy>.json`` and ``docs/simulation.md`` with its figures (median, min–max over seeds)."""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from . import trust
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
                  cpu_seconds: float | None = None, specs=None, load: tuple | None = None) -> None:
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
            "run_note": os.environ.get("SIM_RUN_NOTE", ""),
            "load_note": "" if load is None else (
                f"The machine is shared: load average {load[0]:.1f} (1 min) when the run started, "
                f"{os.getloadavg()[0]:.1f} when it ended, on {os.cpu_count()} cores."),
            "summary": {k: s for k in keys if (s := summarize([f.get(k) for f in flat])) is not None},
            "runs": runs,
        }
        (folder / f"{name}.json").write_text(json.dumps(body, indent=1, sort_keys=True, default=str) + "\n")


def load(folder: Path) -> list[dict]:
    order = [p.name for p in POLICIES]
    found = [json.loads(p.read_text()) for p in folder.glob("*.json") if p.name != "sensitivity.json"]
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
    ("attended", "attended visits (÷ fillable): the headline", "filled_attended", "fillable_cancellations", "pct"),
    ("ceiling_neutral_share", "policy-neutral ceiling, matching (÷ fillable)", "ceiling_neutral",
     "fillable_cancellations", "pct"),
    ("attended_of_neutral", "attended ÷ policy-neutral ceiling", "filled_attended", "ceiling_neutral", "pct"),
    ("unack_released", "unacknowledged automatic bookings released (total)", "standing_released_unacknowledged",
     None, "num"),
    ("unack_refilled", "their slots refilled (total)", "standing_unacknowledged_refilled", None, "num"),
    ("filled_sms", "filled, text readers (÷ fillable)", "booked_by_channel.SMS", "fillable_cancellations", "pct"),
    ("filled_email", "filled, e-mail readers (÷ fillable)", "booked_by_channel.EMAIL", "fillable_cancellations",
     "pct"),
    ("attended_sms", "attended, text readers (÷ fillable)", "attended_by_channel.SMS", "fillable_cancellations",
     "pct"),
    ("attended_email", "attended, e-mail readers (÷ fillable)", "attended_by_channel.EMAIL",
     "fillable_cancellations", "pct"),
    ("texts", "texts sent (total)", "texts", None, "num"),
    ("ceiling_share", "per-policy ceiling with standing acceptance, matching (÷ fillable)", "ceiling",
     "fillable_cancellations", "pct"),
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
        "How many cancelled slots the waitlist refills and how many of them become **attended visits**, for ours "
        "and fair competitors on **the same generated clinic months and the same patients**. `make simulate` "
        "regenerates this page, `sim/results/*.json` (central runs), `sim/results/sensitivity.json` (corners) "
        "and the figures.",
        "",
        f"Scale `{first['scale']}` · held-out seeds {first['seeds']} · generated {first['generated_at']} · "
        f"everything (central runs and corners) took {first['wall_seconds_all_policies']:.0f} s wall"
        + (f", {first['cpu_seconds_all_policies']:.0f} s CPU in Python (this process and its workers)"
           if first.get("cpu_seconds_all_policies") is not None else "")
        + (f" and {db_cpu:.0f} s in the central runs' PostgreSQL backends" if db_cpu is not None else "")
        + f", {statements:,} SQL statements in the central runs. {first.get('load_note', '')}",
        "",
        *([f"**How this page was run.** {first['run_note']}", ""] if first.get("run_note") else []),
        *trust.sections(folder, results),
        "## How it works",
        "",
        "* `sim/generator.py` builds a month from seeded distributions (the table above); `Month.reply(entry, slot)` "
        "is a pure function of (seed, patient, slot), so every policy meets the same answers. Each patient reads one "
        "channel (text or e-mail, their own draw), never reads (SILENT) or replies within minutes or hours, and "
        "reads nothing at night. Each states when they can come as the product's entry field (days of the week × "
        "morning, afternoon, evening: the 21-bit mask of `waitlist.joining.availability`), their own draw: "
        "\"any time\" or some weekdays and parts of the day (`availability_*` in the table); offered a time outside "
        "it, a patient who would have said yes declines.",
        "* **Real policies** run through the product (`sim/engine.py` via `sim/adapter.py`, the one place that calls "
        "its services): ours (the product's defaults) and the peer's FIFO cascade with and without quiet hours. "
        "Each policy is published with `policy_publish`; each patient joins with their availability in the entry's "
        "own field, so the product's matcher (its UNAVAILABLE rule) decides whom a slot may go to. The engine "
        "replays cancellations, arrivals, opt-outs, replies, deliveries, expiries, staff reviews and reconciles "
        "against PostgreSQL with a travelling clock, and reads every window and state from the database. An "
        "automatic booking is acknowledged through the product's `acknowledgement_record` when its patient reads "
        "the notice and would come, or released by them through `standing_release`; one still unacknowledged is "
        "reminded and released by the product's own acknowledgement job (`acknowledgements_run`, issue #39), which "
        "the engine runs at the `remind_at` and `release_at` the product stored for it (the policy's defaults: "
        "reminder the later of 2 h after booking and 24 h before the slot, at least 1 h before the release; release "
        "10 minutes before the booking's release deadline). The reminder counts as a message; the model gives it no "
        "effect on reading.",
        "* **Modelled competitors** (`sim/models.py`, labelled *(modelled)*): a first-to-reply broadcast (everyone "
        "eligible at once, the slot open until its start minus the 60-minute margin, first yes wins, a later yes "
        "told it is taken) and a tiered broadcast (3 patients first, twice as many each time a third of the time "
        "left passes, everyone in the last 3 hours), both with standing acceptance (the first eligible opted-in "
        "patient booked at once, the product's `release_deadline`), the product's acknowledgement rule "
        "(`ack_times`: the same reminder and release), the patients' availability (the product's "
        "`availability.fits`, as a broadcast product with an availability field would), quiet hours, lead and "
        "patients; no contact caps.",
        "* The FIFO cascade as our configuration with the peer's rules: created-at order, no availability (its "
        "entries are \"any time\": a patient offered a time they cannot come declines), a fixed 20-minute hold to "
        "the slot, 3-hour lead, no weekly cap, no decline suppression, no contact cap, no reliability gate, no "
        "standing acceptance, no late accept, and no quiet hours (the second variant has ours').",
        "",
        "## Secondary figures",
        "",
        f"Pooled over the {stats.get('ours', {}).get('months', 0)} held-out months, 95% intervals from a cluster "
        f"bootstrap by month ({BOOTSTRAP_DRAWS:,} draws, seed {BOOTSTRAP_SEED}). Fill rate = vacancies filled ÷ "
        "fillable cancellations. Messages count offer notices, automatic bookings' notices, reminders and "
        "\"taken\" notices.",
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
    fresh = ", ".join(f"{r['label']} {show(stats[r['policy']]['acceptance_first_week'], 'pct')}"
                      for r in results if not r["modelled"])
    lines += ["", f"Measured acceptance per offer in the month's first week, while the list is fresh "
              f"(pooled, 95% interval): {fresh}; published: 8.3% (Sutter) to 11% (Fast Pass) per offer.", ""]
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



