"""Server-rendered SVG trend chart (no script, no CDN, CSP-safe): three small panels sharing one
time axis — fill rate (line), time to fill p50 (line) and offers sent (bars) per day."""

from __future__ import annotations

from dataclasses import dataclass

from waitlist.figures.trends import TrendDay

WIDTH, PANEL_HEIGHT, GAP, LEFT = 1000, 50, 28, 4
#: Room right of the plot for the value axis, so its labels never sit on the newest day's dot or bar.
GUTTER = 60


@dataclass(frozen=True)
class Panel:
    key: str
    label: str
    summary: str
    top: int
    #: "x,y x,y …" for a line; empty for bars.
    points: str
    bars: list[dict]
    #: Days with a value, for the dots and their hover titles.
    dots: list[dict]
    #: The value axis: the top of the panel's scale (its bottom is 0).
    max_label: str = ""


def _x(i: int, n: int) -> float:
    return LEFT + (WIDTH - 2 * LEFT) * (i + 0.5) / max(n, 1)


def _line(values: list[float | None], top: int, n: int, maximum: float, days, fmt) -> tuple[str, list[dict]]:
    points, dots = [], []
    for i, value in enumerate(values):
        if value is None:
            continue
        y = top + PANEL_HEIGHT - (PANEL_HEIGHT - 4) * (value / maximum if maximum else 0) - 2
        points.append(f"{_x(i, n):.1f},{y:.1f}")
        dots.append({"x": f"{_x(i, n):.1f}", "y": f"{y:.1f}", "title": f"{days[i]:%m-%d}: {fmt(value)}"})
    return " ".join(points), dots


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def trend_chart(days: list[TrendDay]) -> dict:
    """The chart's geometry and labels for ``operations/partials/trend_chart.html``."""
    n = len(days)
    dates = [d.day for d in days]
    rates = [d.fill_rate for d in days]
    ttf = [d.time_to_fill_p50 for d in days]
    sent = [d.offers_sent for d in days]
    filled, decided = sum(d.filled for d in days), sum(d.decided for d in days)
    known_ttf = [v for v in ttf if v is not None]
    panels = []
    top = 0
    points, dots = _line(rates, top, n, 1.0, dates, lambda v: f"{v * 100:.0f}%")
    summary = f"{filled}/{decided} decided filled" if decided else "no decided vacancies"
    panels.append(Panel("fill_rate", "Fill rate", summary, top, points, [], dots, "100%"))
    top += PANEL_HEIGHT + GAP
    points, dots = _line(ttf, top, n, max(known_ttf, default=0), dates, _hours)
    panels.append(Panel("time_to_fill", "Time to fill (p50 per day)",
                        f"max {_hours(max(known_ttf))}" if known_ttf else "no fills", top, points, [], dots,
                        _hours(max(known_ttf)) if known_ttf else "—"))
    top += PANEL_HEIGHT + GAP
    peak = max(sent, default=0)
    bar_width = max((WIDTH - 2 * LEFT) / max(n, 1) - 2, 1)
    bars = []
    for i, value in enumerate(sent):
        height = (PANEL_HEIGHT - 4) * (value / peak) if peak else 0
        bars.append({"x": f"{_x(i, n) - bar_width / 2:.1f}", "y": f"{top + PANEL_HEIGHT - height:.1f}",
                     "width": f"{bar_width:.1f}", "height": f"{height:.1f}", "title": f"{dates[i]:%m-%d}: {value}"})
    panels.append(Panel("offers_sent", "Offers sent per day", f"{sum(sent)} in total, peak {peak}", top, "", bars, [],
                        str(peak)))
    return {
        "plot_width": WIDTH, "width": WIDTH + GUTTER, "height": top + PANEL_HEIGHT, "panel_height": PANEL_HEIGHT,
        "panels": panels,
        "first": dates[0] if dates else None, "last": dates[-1] if dates else None, "days": n,
        "ticks": _ticks(dates), "axis_y": top + PANEL_HEIGHT + 14,
        "table": [{"day": d.day, "fill_rate": "—" if d.fill_rate is None else f"{d.fill_rate * 100:.0f}%",
                   "time_to_fill": "—" if d.time_to_fill_p50 is None else _hours(d.time_to_fill_p50),
                   "offers_sent": d.offers_sent} for d in days],
    }


def _ticks(dates) -> list[dict]:
    """Date labels under the time axis: the first day, every week after it, and the last day."""
    n = len(dates)
    picked = sorted({0, n - 1, *range(7, n - 3, 7)}) if n else []
    return [{"x": f"{_x(i, n):.1f}", "label": f"{dates[i]:%m-%d}",
             "anchor": "start" if i == 0 else "end" if i == n - 1 else "middle"} for i in picked]


@dataclass(frozen=True)
class Series:
    """One panel of a ``day_chart``: its key, label, unit (for the axis) and value per day (None: no value)."""
    key: str
    label: str
    unit: str
    values: list[float | None]
    kind: str = "bars"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def day_chart(title: str, dates: list, series: list[Series], *, slug: str, note: str = "") -> dict:
    """A chart of several per-day series sharing the time axis (the trend chart's geometry), and the same numbers
    as a table, for ``operations/partials/day_chart.html``. Units are in the labels, values are bare numbers."""
    n = len(dates)
    panels, top = [], 0
    for s in series:
        known = [v for v in s.values if v is not None]
        peak = max(known, default=0)
        points, dots, bars = "", list[dict](), list[dict]()
        if s.kind == "line":
            points, dots = _line(s.values, top, n, peak, dates, _number)
        else:
            width = max((WIDTH - 2 * LEFT) / max(n, 1) - 2, 1)
            for i, value in enumerate(s.values):
                height = (PANEL_HEIGHT - 4) * ((value or 0) / peak) if peak else 0
                bars.append({"x": f"{_x(i, n) - width / 2:.1f}", "y": f"{top + PANEL_HEIGHT - height:.1f}",
                             "width": f"{width:.1f}", "height": f"{height:.1f}",
                             "title": f"{dates[i]:%m-%d}: {_number(value)}"})
        summary = (f"{_number(sum(known))} in total, peak {_number(peak)}" if s.kind == "bars"
                   else f"max {_number(peak)}" if known else "none")
        panels.append(Panel(s.key, f"{s.label} ({s.unit})", summary, top, points, bars, dots, _number(peak)))
        top += PANEL_HEIGHT + GAP
    height = top - GAP
    return {
        "title": title, "slug": slug, "note": note, "plot_width": WIDTH, "width": WIDTH + GUTTER,
        "height": height, "panel_height": PANEL_HEIGHT, "panels": panels,
        "first": dates[0] if dates else None, "last": dates[-1] if dates else None, "days": n,
        "ticks": _ticks(dates), "axis_y": height + 14,
        "columns": [f"{s.label} ({s.unit})" for s in series],
        "table": [{"day": day, "values": [_number(s.values[i]) for s in series]} for i, day in enumerate(dates)],
    }


def fill_chart(days) -> dict:
    """Filled, exhausted and expired vacancies per day of opening (``waitlist.figures.over_time``)."""
    dates = [d.day for d in days]
    return day_chart("Fill over time", dates, [
        Series("filled", "Filled", "vacancies", [d.filled for d in days]),
        Series("exhausted", "Exhausted", "vacancies", [d.exhausted for d in days]),
        Series("expired", "Expired", "vacancies", [d.expired for d in days]),
    ], slug="fill", note="by the day a vacancy opened")


def fairness_chart(days) -> dict:
    """Bookings through an offer per day and the median days the booked patients had waited."""
    dates = [d.day for d in days]
    return day_chart("Fairness over time", dates, [
        Series("booked", "Booked", "patients", [d.booked for d in days]),
        Series("waited", "Waited p50", "days", [d.waited_days_p50 for d in days], kind="line"),
    ], slug="fairness", note="patients booked through an offer, by the day of booking, and the median days they "
                             "had waited")
