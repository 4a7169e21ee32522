"""The answer-window rule a policy runs under, for the modelled policies and the ceiling.

The real runs never compute a window: the engine reads each offer's ``expires_at`` from the database.
The modelled policies (``sim.models``) and the ceiling (``sim.metrics``) need the same rule outside the
database, so they call the product's own pure function, ``waitlist.rules.terms.answer_deadline``, with the
rule built from the policy's fields (the product's defaults for what a ``PolicySpec`` does not set).
Where the product does not have that function (before the LEAD_TIME window landed) the rule is the
fixed window the product then applied: ``min(start + hold_minutes, slot start)``.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

WINDOW_FIELDS = ("answer_window", "answer_window_percent", "answer_window_min_minutes",
                 "answer_window_max_minutes", "answer_window_margin_minutes")


def product_windows():
    """The product's module of the answer window (``waitlist.rules.terms``; ``waitlist.rules.windows`` before the
    offer's terms were one module) when it has one, else None."""
    try:
        from waitlist.rules import terms as windows
    except ImportError:
        try:
            from waitlist.rules import windows
        except ImportError:
            return None
    return windows if hasattr(windows, "answer_deadline") and hasattr(windows, "WindowRule") else None


def product_defaults() -> dict:
    """The product's defaults for the window fields (the model's field defaults), where it has them."""
    try:
        from waitlist.models import WaitlistPolicy
    except Exception:  # Django not set up: no defaults to read
        return {}
    out = {}
    for name in WINDOW_FIELDS:
        try:
            field = WaitlistPolicy._meta.get_field(name)
        except Exception:
            continue
        default = field.get_default()
        out[name] = default
    return out


def rule_values(spec) -> dict:
    """The window fields ``spec`` runs under: the product's defaults, then the spec's ``extra``; the
    fixed window (``hold_minutes``) when the product has no window rule. This is what result files state."""
    values = {"hold_minutes": spec.hold_minutes, "min_lead_minutes": spec.min_lead_minutes}
    if product_windows() is None:
        return values | {"answer_window": "FIXED"}
    values.update(product_defaults())
    values.update({k: v for k, v in spec.extra.items() if k in WINDOW_FIELDS})
    return values


def margin_minutes(values: dict) -> int:
    """How long before the slot every window ends (either rule; 0 where the product has no margin)."""
    return int(values.get("answer_window_margin_minutes") or 0)


class Window:
    """``deadline(start, slot_starts_at)`` of one policy on one month (time zone and quiet hours)."""

    def __init__(self, spec, params, *, quiet_hours: bool | None = None):
        self.values = rule_values(spec)
        quiet = spec.quiet_hours if quiet_hours is None else quiet_hours
        self.quiet = (time.fromisoformat(params.quiet_start), time.fromisoformat(params.quiet_end)) if quiet \
            else (None, None)
        self.tz_name = params.timezone
        self.margin = timedelta(minutes=margin_minutes(self.values))
        windows = product_windows()
        self.rule = None
        if windows is not None:
            v = self.values
            self.rule = windows.WindowRule(
                kind=v.get("answer_window") or "FIXED", fixed_minutes=v["hold_minutes"],
                percent=v.get("answer_window_percent"), min_minutes=v.get("answer_window_min_minutes"),
                max_minutes=v.get("answer_window_max_minutes"), margin_minutes=v.get("answer_window_margin_minutes"),
                tz_name=self.tz_name, quiet_start=self.quiet[0], quiet_end=self.quiet[1])
            self._deadline = windows.answer_deadline

    def deadline(self, start: datetime, slot_starts_at: datetime) -> datetime:
        if self.rule is not None:
            return self._deadline(self.rule, start=start, slot_starts_at=slot_starts_at)
        return min(start + timedelta(minutes=self.values["hold_minutes"]), slot_starts_at)
