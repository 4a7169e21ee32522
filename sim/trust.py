"""Issue #41's figures: attended visits against the best competitor, the sensitivity corners (``sensitivity.json``
and the tornado chart), the parameter table, the calibration check and the goal's verdict, all computed from the
result files (nothing here is written by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from .assumptions import GROUPS, METRIC_ONLY, PARAMETERS
from .generator import SCALES
from .policies import COMPETITORS

MODELLED_COMPETITORS = ("broadcast", "tiered")
# make simulate of 2026-12-02 on two otherwise idle cores (issue #22's runs, 3 workers): the load-independent scale.
IDLE_RATE = (326_654, 173, "make simulate of 2026-12-02, 3 workers")
GOAL_PESSIMISTIC = 10.0  # points of attended visits over the best competitor, pooled over >= 400 fillable
GOAL_CENTRAL = 15.0
MIN_FILLABLE = 400


def pooled(runs: list[dict], num: str = "filled_attended", den: str = "fillable_cancellations") -> dict:
    a = sum(r["metrics"].get(num) or 0 for r in runs)
    b = sum(r["metrics"].get(den) or 0 for r in runs)
    return {num: a, den: b, "rate": a / b if b else None}


def by_corner(results: list[dict]) -> dict[str, dict[str, dict[int, dict]]]:
    """corner → policy → seed → run."""
    out: dict = {}
    for r in results:
        out.setdefault(r.get("corner", "central"), {}).setdefault(r["policy"], {})[r["seed"]] = r
    return out


def best_per_month(runs: dict[str, dict[int, dict]], seeds: list[int], competitors=COMPETITORS) -> dict[int, str]:
    """Per month, the competitor with the most attended visits (of those that ran that month)."""
    out = {}
    for seed in seeds:
        present = [c for c in competitors if seed in runs.get(c, {})]
        if present:
            out[seed] = max(present, key=lambda c: (runs[c][seed]["metrics"]["filled_attended"], c))
    return out


def lead(runs: dict[str, dict[int, dict]], seeds: list[int], competitors=COMPETITORS) -> dict | None:
    """Ours minus the best competitor of each month, pooled (points of attended ÷ fillable)."""
    ours = runs.get("ours", {})
    seeds = [s for s in seeds if s in ours]
    best = best_per_month(runs, seeds, competitors)
    seeds = [s for s in seeds if s in best]
    if not seeds:
        return None
    fillable = sum(ours[s]["metrics"]["fillable_cancellations"] for s in seeds)
    gap = sum(ours[s]["metrics"]["filled_attended"] - runs[best[s]][s]["metrics"]["filled_attended"] for s in seeds)
    return {"points": 100 * gap / fillable if fillable else None, "fillable": fillable, "months": len(seeds),
            "best": {str(s): best[s] for s in seeds}}


def lead_interval(runs: dict[str, dict[int, dict]], seeds: list[int], draws: int = 2000) -> tuple | None:
    """The month bootstrap's 95% interval of ``lead`` (whole months resampled)."""
    import random

    ours = runs.get("ours", {})
    best = best_per_month(runs, [s for s in seeds if s in ours])
    months = sorted(best)
    if len(months) < 3:
        return None
    rng = random.Random(22)
    values = []
    for _ in range(draws):
        pick = [rng.choice(months) for _ in months]
        f = sum(ours[s]["metrics"]["fillable_cancellations"] for s in pick)
        g = sum(ours[s]["metrics"]["filled_attended"] - runs[best[s]][s]["metrics"]["filled_attended"] for s in pick)
        values.append(100 * g / f if f else 0.0)
    values.sort()
    return values[int(0.025 * draws)], values[int(0.975 * draws) - 1]


def p95_weekly(runs: list[dict], key: str = "messages_per_patient_week") -> float | None:
    counts: list[int] = []
    for r in runs:
        for k, n in (r["metrics"].get(key, {}).get("histogram") or {}).items():
            counts += [int(k)] * int(n)
    if not counts:
        return None
    counts.sort()
    pos = (len(counts) - 1) * 0.95
    low = int(pos)
    high = min(low + 1, len(counts) - 1)
    return counts[low] + (counts[high] - counts[low]) * (pos - low)


def sensitivity(results: list[dict], seeds: list[int], corner_months: int) -> dict:
    """sensitivity.json: per corner and policy the pooled attended visits, fillable cancellations and fill
    (attended ÷ fillable), and ours minus the best competitor; one-at-a-time corners on the first
    ``corner_months`` months (compared with the central runs on those months), the pessimistic one on all."""
    corners = by_corner(results)
    first = seeds[:corner_months]
    out: dict = {"central_months": seeds, "corner_months": first, "corners": {}, "groups": GROUPS,
                 "metric_only_groups": sorted(METRIC_ONLY),
                 "note": "fill = attended visits / fillable cancellations; one-at-a-time corners ran ours (real) and "
                         "the modelled competitors; the FIFO variants ran in the central and pessimistic corners"}

    def entry(runs: dict, months: list[int]) -> dict:
        policies = {}
        for name, by_seed in sorted(runs.items()):
            picked = [by_seed[s] for s in months if s in by_seed]
            if picked:
                p = pooled(picked)
                policies[name] = {"attended": p["filled_attended"], "fillable": p["fillable_cancellations"],
                                  "fill": p["rate"], "filled": pooled(picked, "filled")["filled"],
                                  "months": [r["seed"] for r in picked]}
        return {"policies": policies, "ours_minus_best": lead(runs, months, competitors)}

    competitors = COMPETITORS
    out["corners"]["central"] = entry(corners.get("central", {}), seeds)
    # The one-at-a-time corners run the modelled competitors only: their central reference is the same.
    competitors = MODELLED_COMPETITORS
    out["corners"]["central_on_corner_months"] = entry(corners.get("central", {}), first)
    for name, runs in sorted(corners.items()):
        if name in ("central", "pessimistic"):
            continue
        out["corners"][name] = entry(runs, first)
    competitors = COMPETITORS
    if "pessimistic" in corners:
        ran = sorted(corners["pessimistic"].get("ours", {}))
        out["corners"]["pessimistic"] = entry(corners["pessimistic"], ran)
        sides = next((r.get("sides") for rs in corners["pessimistic"].values() for r in rs.values()), None)
        out["pessimistic_sides"] = sides
    return out


def tornado(sens: dict, path: Path) -> bool:
    """A horizontal bar per assumption group: ours minus the best competitor at its low and high values (the
    corner months), around the central value on the same months."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = (sens["corners"].get("central_on_corner_months", {}).get("ours_minus_best") or {}).get("points")
    if base is None:
        return False
    rows = []
    for group in GROUPS:
        lo = (sens["corners"].get(f"{group}_low", {}).get("ours_minus_best") or {}).get("points")
        hi = (sens["corners"].get(f"{group}_high", {}).get("ours_minus_best") or {}).get("points")
        if lo is not None and hi is not None:
            rows.append((group, lo, hi))
    if not rows:
        return False
    rows.sort(key=lambda r: abs(r[2] - r[1]))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    for i, (_group, lo, hi) in enumerate(rows):
        ax.barh(i, lo - base, left=base, color="#c0504d", label="low value" if i == 0 else None)
        ax.barh(i, hi - base, left=base, color="#4a7ab0", alpha=0.8, label="high value" if i == 0 else None)
    ax.axvline(base, color="black", lw=1)
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)), [GROUPS[g] for g, _, _ in rows], fontsize=7)
    ax.set_xlabel("ours − best competitor, points of attended visits ÷ fillable cancellations")
    ax.set_ylabel("assumption group (one at a time)")
    ax.set_title(f"Sensitivity on months {sens['corner_months']} (central {base:+.1f} points)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _num(v) -> str:
    return "–" if v is None else f"{v:.1f}"


def _pts(v) -> str:
    return "–" if v is None else f"{v:+.1f}"


def parameter_table() -> list[str]:
    central = SCALES["default"]
    lines = ["| parameter | value | kind | source or reason | low | high | corner group |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, row in PARAMETERS.items():
        value = getattr(central, name)
        lines.append(f"| `{name}` | {value} | {row.kind.lower()} | {row.source} | "
                     f"{'' if row.low is None else row.low} | {'' if row.high is None else row.high} | "
                     f"{row.group or ''} |")
    return lines


def sections(folder: Path, results: list[dict]) -> list[str]:
    """The page's issue #41 sections (``results``: the policies' files as sim/report.py loads them)."""
    sens_path = folder / "sensitivity.json"
    sens = json.loads(sens_path.read_text()) if sens_path.exists() else None
    drawn = False
    if sens:
        from .report import FIGURES

        drawn = tornado(sens, FIGURES / "tornado.png")
    runs = {r["policy"]: {run["seed"]: run for run in r["runs"]} for r in results}
    labels = {r["policy"]: r["label"] for r in results}
    seeds = sorted(runs.get("ours", {}))
    lines = ["## Headline: attended visits (issue #41)", ""]
    if not seeds:
        return lines + ["No run of ours: no headline.", ""]
    head = lead(runs, seeds)
    interval = lead_interval(runs, seeds)
    lines += [
        f"Held-out months: seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} one-practitioner clinic months). Every default "
        "of ours was chosen on seeds 1–12 (the months of issues #12 and #22); no figure on this page comes from "
        "them. **Attended visits ÷ fillable cancellations** (a cancellation at least 1 h before the visit): a "
        "booking counts when it is attended, drawn per patient and slot (18% of accepted bookings are not attended: "
        "Fast Pass, JMIR 2024), and an automatic booking counts only once its patient has acknowledged it (read its "
        "notice and would have said yes); one never acknowledged is never attended. Each patient states when they "
        "can come (the product's availability field: days × morning, afternoon, evening; \"any time\" for "
        f"{_pct(SCALES['default'].availability_any_share)} of them, see the parameter table): ours offers only "
        "inside it (the product's matcher), and so do the modelled broadcasts; the FIFO cascade ignores it, and a "
        "patient it offers a time they cannot come declines.",
        "",
        "| policy | attended ÷ fillable | filled ÷ fillable | attended ÷ policy-neutral ceiling | msgs / patient-week "
        "p95 | texts / patient-week p95 | notices in quiet hours | months |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, by_seed in runs.items():
        rs = list(by_seed.values())
        a, f = pooled(rs), pooled(rs, "filled")
        neutral = pooled(rs, "filled_attended", "ceiling_neutral")
        quiet = sum(r["metrics"]["quiet_hour_notices"] for r in rs)
        lines.append(f"| {labels[name]} | {_pct(a['rate'])} ({a['filled_attended']}/{a['fillable_cancellations']}) | "
                     f"{_pct(f['rate'])} | {_pct(neutral['rate'])} | {_num(p95_weekly(rs))} | "
                     f"{_num(p95_weekly(rs, 'texts_per_patient_week'))} | {quiet} | {len(rs)} |")
    ceiling = pooled(list(runs["ours"].values()), "ceiling_neutral")
    per_policy = pooled(list(runs["ours"].values()), "ceiling")
    lines += [
        "",
        f"* **Ours − the best competitor of each month**: {_pts(head and head['points'])} points of attended visits "
        f"pooled over {head and head['fillable']} fillable cancellations"
        + (f" (95% interval {interval[0]:+.1f} to {interval[1]:+.1f}, month bootstrap)" if interval else "")
        + ". The best competitor per month: "
        + ", ".join(f"{s}: {labels.get(c, c)}" for s, c in (head or {}).get("best", {}).items()) + ".",
        f"* **Ceilings**: policy-neutral (a patient who would accept if asked at the cancellation, a yes before the "
        f"slot's start minus the 60-minute margin, each patient once: maximum matching; no standing acceptance, no "
        f"quiet hours, no late accept) {_pct(ceiling['rate'])} of the fillable; the per-policy ceiling under ours' "
        f"rules including acknowledged standing acceptance {_pct(per_policy['rate'])}.",
    ]
    ours_rs = list(runs["ours"].values())
    released = sum(r["metrics"].get("standing_released_unacknowledged", 0) for r in ours_rs)
    refilled = sum(r["metrics"].get("standing_unacknowledged_refilled", 0) for r in ours_rs)
    standing = sum(r["metrics"].get("standing_bookings", 0) for r in ours_rs)
    acknowledged = sum(r["metrics"].get("standing_acknowledged", 0) for r in ours_rs)
    lines.append(f"* **Automatic bookings (ours)**: {standing} made, {acknowledged} acknowledged; on {released} slots "
                 f"an automatic booking was released unacknowledged by the product's acknowledgement job "
                 f"(`acknowledgements_run`, issue #39, run at the times it stored), and {refilled} of those slots "
                 "were refilled.")
    if "ours_today" in runs:
        months = sorted(runs["ours_today"])
        a = pooled([runs["ours"][s] for s in months if s in runs["ours"]])
        b = pooled([runs["ours_today"][s] for s in months])
        lines.append(f"* **That job, measured** (ours with it minus ours without it, on months {months}): "
                     f"{_pct(a['rate'])} vs {_pct(b['rate'])} attended ÷ fillable.")
    lines.append("* **By channel (ours)**: filled by text readers "
                 f"{sum(r['metrics'].get('booked_by_channel', {}).get('SMS', 0) for r in ours_rs)}, by e-mail readers "
                 f"{sum(r['metrics'].get('booked_by_channel', {}).get('EMAIL', 0) for r in ours_rs)}; "
                 "attended visits of text readers "
                 f"{sum(r['metrics'].get('attended_by_channel', {}).get('SMS', 0) for r in ours_rs)}, of e-mail "
                 f"readers {sum(r['metrics'].get('attended_by_channel', {}).get('EMAIL', 0) for r in ours_rs)} "
                 f"(patients: {sum(r['metrics'].get('patients_by_channel', {}).get('SMS', 0) for r in ours_rs)} "
                 f"text, {sum(r['metrics'].get('patients_by_channel', {}).get('EMAIL', 0) for r in ours_rs)} e-mail); "
                 f"texts per patient per week p95 {p95_weekly(ours_rs, 'texts_per_patient_week')}.")
    lines += ["", "Per month (attended visits / fillable cancellations):", "",
              "| seed | fillable | " + " | ".join(labels[n] for n in runs) + " | ours − best |",
              "| --- | --- |" + " --- |" * (len(runs) + 1)]
    best = best_per_month(runs, seeds)
    for s in seeds:
        o = runs["ours"][s]["metrics"]
        cells = [str(runs[n][s]["metrics"]["filled_attended"]) if s in runs[n] else "–" for n in runs]
        gap = o["filled_attended"] - runs[best[s]][s]["metrics"]["filled_attended"] if s in best else None
        lines.append(f"| {s} | {o['fillable_cancellations']} | " + " | ".join(cells) + f" | {gap:+d} |"
                     if gap is not None else f"| {s} | {o['fillable_cancellations']} | " + " | ".join(cells) + " | – |")
    lines += ["", *goal(runs, sens, labels), "", *calibration(runs, labels), ""]
    central_real = sum(len(runs[r["policy"]]) for r in results if not r.get("modelled") and r["policy"] in runs)
    lines += sensitivity_section(sens, labels, drawn, central_real, len(seeds))
    lines += ["", "## Every parameter of sim/generator.py", "",
              "Scenario settings say what month is simulated; policy settings are the product's defaults; sourced "
              "values rest on the figure named (facts in shared/design/SIMULATION-FACTS.md); assumptions carry the "
              "low and high values the corners use, moved together by group.", ""] + parameter_table() + [""]
    return lines


def goal(runs: dict, sens: dict | None, labels: dict) -> list[str]:
    lines = ["### The goal (issue #41 §5), computed", ""]
    seeds = sorted(runs["ours"])
    central = lead(runs, seeds)
    fifo_p95 = p95_weekly(list(runs.get("fifo", {}).values()))
    ours_p95 = p95_weekly(list(runs["ours"].values()))
    quiet = sum(r["metrics"]["quiet_hour_notices"] for r in runs["ours"].values())
    c = central["points"] if central else None
    lines.append(f"* **Central**: ours − best competitor {_pts(c)} points (goal +{GOAL_CENTRAL:g}) → "
                 + ("**holds**." if c is not None and c >= GOAL_CENTRAL else
                    f"**does not hold: short by {GOAL_CENTRAL - (c or 0):.1f} points**."))
    lines.append(f"* **Messages**: p95 per patient-week ours {ours_p95}, FIFO {fifo_p95} → "
                 + ("at most FIFO's" if ours_p95 is not None and fifo_p95 is not None and ours_p95 <= fifo_p95
                    else "**above FIFO's**") + f"; ours' notices in quiet hours: {quiet}.")
    pess = (sens or {}).get("corners", {}).get("pessimistic")
    if pess and pess.get("ours_minus_best"):
        p = pess["ours_minus_best"]
        pol = pess["policies"]
        ok = p["points"] is not None and p["points"] >= GOAL_PESSIMISTIC and p["fillable"] >= MIN_FILLABLE
        named = ", ".join(f"{g} {side}" for g, side in (sens.get("pessimistic_sides") or {}).items())
        short = GOAL_PESSIMISTIC - (p["points"] or 0)
        lines.append(f"* **Pessimistic corner** ({named}): "
                     f"ours − best competitor {_pts(p['points'])} points over {p['fillable']} fillable cancellations "
                     f"({p['months']} months; goal +{GOAL_PESSIMISTIC:g} over at least {MIN_FILLABLE}) → "
                     + ("**holds**." if ok else f"**does not hold: short by {short:.1f} points**.")
                     + " Attended ÷ fillable there: " + ", ".join(f"{labels.get(n, n)} {_pct(v['fill'])}"
                                                                 for n, v in pol.items()) + ".")
    else:
        lines.append("* **Pessimistic corner**: not run (`--no-corners`).")
    # The room above the best competitor: no policy attends more than the ceiling's fills times the share that
    # shows (the ceiling's edges are patients who would say yes; 1 - no_show_accepted of them come).
    ours_rs = list(runs["ours"].values())
    show = 1 - SCALES["default"].no_show_accepted
    for key, what in (("ceiling_neutral", "policy-neutral"), ("ceiling", "per-policy (with acknowledged standing "
                                                                           "acceptance)")):
        room = pooled(ours_rs, key)
        best = best_per_month(runs, seeds)
        fillable = sum(runs["ours"][s]["metrics"]["fillable_cancellations"] for s in best)
        best_attended = sum(runs[best[s]][s]["metrics"]["filled_attended"] for s in best)
        if room["rate"] is not None and fillable:
            bound = 100 * (room["rate"] * show - best_attended / fillable)
            lines.append(f"* **Room above the best competitor** ({what} ceiling): {_pct(room['rate'])} of the fillable "
                         f"could be filled, about {_pct(room['rate'] * show)} attended (×{show:.2f}); the best "
                         f"competitor of each month attended {_pct(best_attended / fillable)}: no policy can lead it "
                         f"by more than about {bound:+.1f} points here"
                         + (", less than the goal's +15." if bound < GOAL_CENTRAL else "."))
    lines += ["", why(pooled(ours_rs, "ceiling_neutral")["rate"])]
    return lines


def why(ceiling_rate: float | None) -> str:
    """The page's reading of the headline, in the simulator's own terms."""
    return (
        "Why, in the simulator's own terms. (1) Availability: each patient states when they can come (the "
        "product's field); ours and the broadcasts offer only inside it, so fewer patients fit each slot and every "
        f"policy fills less: the policy-neutral ceiling is {_pct(ceiling_rate)} of the fillable here (66.3% on the "
        "page before availability was simulated, when everyone could come any time). The FIFO cascade, which "
        "ignores it, loses most: each offer of a time the patient cannot come is a decline and a hold gone. (2) The "
        "audit's corrections remove most of the old lead: an automatic booking counts only when its patient "
        "acknowledges it, and the competitors have what ours has (automatic booking with the product's "
        "acknowledgement rule, its reminder and release, replies accepted until the slot's start minus the margin, "
        "quiet hours, the same patients, channels and availability). (3) What remains between ours and a broadcast "
        "is the order of asking: ours asks one patient at a time, each with an answer window, so patients who never "
        "read or reply in hours use up time near the slot (late accepts win some of it back); a broadcast asks "
        "everyone who can come and books the first yes, and pays for it in messages (the p95 above), not in fills. "
        "(4) The room: the ceiling lines above bound any policy's lead over the best competitor, and where that "
        "bound is below the goal no choice of ours' settings can meet it on these months. Levers not measured in "
        "this run: the time-limited \"reply if you can come\" poll close to the slot (not in the product; it would "
        "let ours ask many at once near the slot without an offer or a hold, which at best brings ours level with a "
        "broadcast there, not 10-15 points above it), answer windows and asking order (their sweeps belong on seeds "
        "1-12 first), and availability upkeep. The honest claim this run supports is the one in the tables: on the "
        "held-out months ours attends fewer visits than a fair first-to-reply broadcast (the gap and its interval "
        "above), far more than the FIFO cascade, with fewer messages per patient at the p95 and its priority order; "
        "no double-digit lead."
    )


def calibration(runs: dict, labels: dict) -> list[str]:
    lines = ["### Calibration against published fills", ""]
    for name in ("fifo", "fifo_quiet"):
        if name not in runs:
            continue
        rs = list(runs[name].values())
        fill = pooled(rs, "filled")["rate"]
        acc = pooled(rs, "accepted", "asked_offers")["rate"]
        lines.append(f"* {labels[name]}: fill {_pct(fill)} of fillable cancellations, acceptance per offer "
                     f"{_pct(acc)}, attended {_pct(pooled(rs)['rate'])}.")
    lines += [
        "* Published: Epic Fast Pass (JMIR 2024, e52071) about 30% of open slots filled, 11% of offers accepted, "
        "82% of accepts completed; Sutter Health's Fast Pass (JMIR 2020, e16451) 8.3% per offer; MGMA (2024) about "
        "27% of cancelled visits rebooked within 30 days. Vendor claims of 40–90% for first-to-reply text are "
        "marketing, not measurements.",
        "* What would have to change for ours to be believed: a clinic's own reply data (share who never read, reply "
        "delays by channel, acceptance per offer) in place of the assumptions below, and a pilot that reports "
        "attended visits ÷ fillable cancellations beside its FIFO or broadcast baseline.",
    ]
    return lines


def cost_lines(c: dict, central_real: int | None) -> list[str]:
    """What the whole ``make simulate`` cost: CPU (the simulator's, whatever the machine's load) and wall (the
    machine's), with the estimates for an idle 2-core machine."""
    cpu = c["cpu_seconds_python"] + c["db_cpu_seconds"]
    split = (f" ({central_real} central, {c['real_runs'] - central_real} in the corners)"
             if central_real is not None else "")
    return [
        f"Cost of everything `make simulate` ran: {c['real_runs']} real runs{split}, {c['statements']:,} SQL "
        f"statements; CPU {c['cpu_seconds_python']:.0f} s in Python (this process and its workers) + "
        f"{c['db_cpu_seconds']:.0f} s in the runs' PostgreSQL backends = {cpu:.0f} s; wall {c['wall_seconds']:.0f} s "
        f"with the machine's load average {c['load_average_at_start'][0]:.1f} at the start and "
        f"{c['load_average_at_end'][0]:.1f} at the end on its 2 cores shared with other work. The wall time is the "
        f"machine's, the CPU and the statements the simulator's. On an idle 2-core machine: at most about "
        f"{cpu / 2:.0f} s with both cores busy (CPU seconds measured under load are longer than idle ones, so this "
        f"bounds it from above), and about {c['statements'] * IDLE_RATE[1] / IDLE_RATE[0]:.0f} s at the statement "
        f"rate measured on two idle cores ({IDLE_RATE[0]:,} statements in {IDLE_RATE[1]} s, {IDLE_RATE[2]}); the "
        "budget is 300 s." + (rerun_line(c) if c.get("rerun") else ""), ""]


def rerun_line(c: dict) -> str:
    """Where some of the page's runs were run again after the invocation the cost line measures."""
    r = c["rerun"]
    return (f" Ours' {r['runs']} runs on this page were run again after that invocation (a fix in how the engine "
            f"reads an automatic booking's notice; the FIFO runs are that invocation's, unchanged), in "
            f"{r['wall_seconds']:.0f} s wall at load {r['load_average_at_start'][0]:.1f}–"
            f"{r['load_average_at_end'][0]:.1f}: {r['ours_runs_statements']:,} statements and "
            f"{r['ours_runs_cpu_seconds_python'] + r['ours_runs_db_cpu_seconds']:.0f} CPU-s in their workers and "
            f"backends; the page's runs together sent {c['page_statements']:,} statements, about "
            f"{c['page_statements'] * IDLE_RATE[1] / IDLE_RATE[0]:.0f} s at the idle rate.")


def sensitivity_section(sens: dict | None, labels: dict, drawn: bool = True,
                        central_real: int | None = None, central_months: int = 12) -> list[str]:
    lines = ["## Sensitivity corners", ""]
    if not sens:
        return lines + ["Not run (`--no-corners`).", ""]
    pess = sens["corners"].get("pessimistic", {}).get("policies", {})
    pess_months = pess.get("ours", {}).get("months", [])
    fifo_months = pess.get("fifo", {}).get("months", [])
    lines += [
        f"Each assumption group at its low and high values, one at a time, on months {sens['corner_months']} (ours "
        "through the product, the broadcast and the tiered broadcast modelled; the FIFO variants are not rerun "
        "there, for the time budget, so a corner's best competitor and its central reference on the same months, "
        "`central_on_corner_months`, are the better of the two broadcasts); the metric-only group (no-shows of "
        "late-read declined bookings) is rescored on the central runs. One month per corner is about 40 fillable "
        "cancellations: a corner's bar moves by several points from chance alone, so the chart ranks assumptions "
        "roughly, it does not measure them. The pessimistic corner: every group at the side declared in "
        "`sim/assumptions.py` (`PESSIMISTIC`, chosen before any run as the side where asking one patient at a time "
        "suffers most against a broadcast; the measured one-at-a-time sides are listed beside it below), on "
        f"{len(pess_months)} months ({pess_months}) for ours through the product and the modelled broadcasts, and "
        f"FIFO through the product on {fifo_months}. Fewer months than the central run (every policy on all "
        f"{central_months} held-out months): the 5-minute budget goes mostly to the central runs, and a "
        "one-practitioner month has about 40 fillable cancellations, so the pessimistic corner pools fewer than the "
        "400 the goal asks for. ",
        "`sim/results/sensitivity.json` holds each corner's pooled attended visits, fillable cancellations and fill "
        "per policy.",
        "",
        *(cost_lines(c, central_real) if (c := sens.get("cost")) else []),
        ("![tornado](simulation/tornado.png)" if drawn else "No tornado chart: no assumption group ran at both its "
         "low and high values in this run (see the table)."),
        "",
        "| corner | months | " + " | ".join(labels.get(n, n) for n in ("ours", "broadcast", "tiered", "fifo"))
        + " | ours − best (points) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, c in sens["corners"].items():
        pol = c["policies"]
        counts = {n: len(pol[n]["months"]) for n in ("ours", "broadcast", "tiered", "fifo") if n in pol}
        months = str(max(counts.values(), default=0)) + "".join(
            f" ({labels.get(n, n)}: {k})" for n, k in counts.items() if k != max(counts.values()))
        cells = [_pct(pol[n]["fill"]) + f" ({pol[n]['attended']}/{pol[n]['fillable']})" if n in pol else "–"
                 for n in ("ours", "broadcast", "tiered", "fifo")]
        lines.append(f"| {name} | {months} | " + " | ".join(cells) + f" | "
                     f"{_pts((c.get('ours_minus_best') or {}).get('points'))} |")
    measured = {}
    for group in GROUPS:
        lo = (sens["corners"].get(f"{group}_low", {}).get("ours_minus_best") or {}).get("points")
        hi = (sens["corners"].get(f"{group}_high", {}).get("ours_minus_best") or {}).get("points")
        if lo is not None and hi is not None:
            measured[group] = "low" if lo < hi else "high"
    declared = sens.get("pessimistic_sides") or {}
    lines += ["", "Pessimistic sides, declared vs measured one at a time (the side with the smaller lead): "
              + ", ".join(f"{g} {declared.get(g, '–')} / {measured.get(g, 'not run')}" for g in GROUPS) + ".", ""]
    return lines
