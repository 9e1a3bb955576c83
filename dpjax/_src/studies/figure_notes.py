"""What a study figure says in words: panel titles and axis labels in the user's terms, coinciding
series, rates stuck at 0 or 1, and cells whose confidence interval has zero width.

* A panel is titled by the metric's **name** and the statistic (``"median_error · mean"``), its
  description below; the y axis says the statistic, the name and the unit. Two metrics with the same
  description (``abs_error`` on the median and on the mean) are never confused.
* A series equal at every point to one drawn before it is still drawn (narrower, over it), and the
  legend names the series it coincides with.
* A rate (a 0/1 metric) that is 0 (or 1) at every point of every series of a panel is not drawn as a
  flat line: the panel says so in words.
* A series of a linear panel that lies on the axis at 0 at every point, or a panel whose series all
  lie within 2% of its top value of each other (a precision of 0.99-1 on a 0-1 axis, lines over each
  other), is named in a note in the panel (:func:`edge_note`).
* A cell whose interval has zero width (the trials that bound it gave the same value: every trial,
  for a mean; many tied trials, for a quantile of releases on a grid or of tied integer data) is
  circled, and the legend explains the circle.
"""

from __future__ import annotations

import numpy as np

from dpjax._src.studies.statistics import describe

__all__: list[str] = []

ZERO_WIDTH = "circled: interval of zero width (the trials that bound it tie)"


def panel_title(metric, statistic: str) -> str:
    """``"<name> · <statistic>"`` and, on a second line, what one trial's value is."""
    what = "rate" if metric.rate and statistic == "mean" else describe(statistic)
    return f"{metric.name} · {what}\n{metric.description}"


def axis_label(metric, statistic: str) -> str:
    """The y label: the statistic of the metric's name, in its unit."""
    what = "rate" if metric.rate and statistic == "mean" else describe(statistic)
    return f"{what} of {metric.name} ({metric.unit})"


def stuck_rate(metric, statistic: str, cell) -> float | None:
    """0 or 1 when ``metric`` is a rate whose every estimate in the panel ``cell`` is that value."""
    if not (metric.rate and statistic == "mean"):
        return None
    values = cell["estimate"].to_numpy(float)
    values = values[np.isfinite(values)]
    for stuck in (0.0, 1.0):
        if values.size and (values == stuck).all():
            return stuck
    return None


def stuck_text(stuck: float, series: int, x_name: str | None) -> str:
    """What a panel whose rate is ``stuck`` at 0 or 1 says instead of a flat line."""
    where = f"every {x_name}" if x_name else "every point"
    trials = "no trial was 1" if stuck == 0 else "every trial was 1"
    return f"rate {stuck:g} at {where}\nin all {series} series ({trials})"


def zero_width(rows) -> np.ndarray:
    """Which rows have a finite estimate and an interval of zero width."""
    low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    return np.isfinite(rows["estimate"].to_numpy(float)) & np.isfinite(low) & (high <= low)


class Coincidences:
    """Series equal at every point of a panel to a series drawn before them: ``{label: {others}}``."""

    def __init__(self) -> None:
        self.drawn: dict = {}
        self.same: dict[str, list[str]] = {}

    def add(self, panel, label: str, x, y) -> None:
        key = (np.round(np.asarray(x, float), 12).tobytes(), np.round(np.asarray(y, float), 12).tobytes())
        other = self.drawn.setdefault(panel, {}).setdefault(key, label)
        if other != label and other not in self.same.setdefault(label, []):
            self.same[label].append(other)

    def legend_label(self, label: str) -> str:
        others = self.same.get(label)
        return f"{label} (coincides with {', '.join(others)})" if others else label


NARROW = 0.02  # a panel whose series all lie within this share of its top value is flat as a whole


def edge_note(series: dict, scale: str, x_name: str | None) -> tuple[str, float] | None:
    """The note of a linear panel (``series``: label -> estimates) on series that cannot be told apart
    from its edges or from each other, and its height in the panel (0 to 1): the series at 0 at every
    point (on the axis; the note at the bottom), or, when every series lies within :data:`NARROW` of
    the panel's top value of each other, that range (in the middle). ``None`` if none."""
    if scale != "linear" or not series:
        return None
    where = f"every {'ε' if x_name == 'epsilon' else x_name}" if x_name else "every point"
    values = {label: np.asarray(y, float) for label, y in series.items()}
    values = {label: y[np.isfinite(y)] for label, y in values.items() if np.isfinite(y).any()}
    if not values:
        return None
    every = np.concatenate(list(values.values()))
    low, high = every.min(), every.max()
    if len(values) > 1 and high > 0 and high - low <= NARROW * high:
        text = f"all {len(values)} series between {low:.3g} and {high:.3g}\nat {where} (over each other)"
        return text, 0.5
    at_zero = [label for label, y in values.items() if (y == 0).all()]
    if at_zero:
        return f"at 0 at {where} (on the axis):\n" + "\n".join(at_zero), 0.04
    return None
