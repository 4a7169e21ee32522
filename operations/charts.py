"""Server-rendered SVG trend chart (no script, no CDN, CSP-safe): three small panels sharing one
time axis — fill rate (line), time to fill p50 (line) and offers sent (bars) per day."""

from __future__ import annotations

from dataclasses import dataclass

from waitlist.figures.trends import TrendDay

WIDTH, PANEL_HEIGHT, GAP, LEFT = 1000, 50, 28, 4


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
        "width": WIDTH, "height": top + PANEL_HEIGHT, "panel_height": PANEL_HEIGHT, "panels": panels,
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
