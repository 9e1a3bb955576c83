"""Terminal tables of study results that fit a given width (100 columns by default).

One block per study: a heading (what ran, how many trials and compilations), then per (metric,
statistic) a line saying what is measured and in which unit, and a table with one row per mechanism
and dataset and one column per value of the grid parameter (epsilon): ``estimate ±h`` where ``h`` is
half the width of a symmetric confidence interval, or ``estimate [a, b]`` with the interval when it is
not symmetric (rates, quantiles). A mechanism's closed form, where it has one, is the row below it.
A cell whose interval has zero width (the trials that bound it tie) is marked ``°`` and a note
under the table says why.
"""

from __future__ import annotations

import math
import textwrap

from dpjax._src.studies.plots import x_parameter

__all__ = [
    "format_result",
]

_WIDTH = 100
_ZERO_WIDTH = ("°: interval of zero width: the trials that bound it gave the same value (every trial, for a "
               "mean; many tied trials, for a quantile of releases on a grid or of tied integer data)")


def _number(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.{digits}g}"


def _scaled(units: int, decimals: int, exponent: int) -> str:
    """``units * 10**-decimals`` written with exactly ``decimals`` decimals (and ``e±XX`` if any)."""
    sign, digits = ("-" if units < 0 else ""), str(abs(units)).rjust(decimals + 1, "0")
    text = sign + (f"{digits[:-decimals]}.{digits[-decimals:]}" if decimals > 0 else digits)
    return text + (f"e{exponent:+03d}" if exponent else "")


def _cell(row) -> str:
    """``estimate ±h`` for a symmetric interval, ``estimate [low, high]`` otherwise, all at one
    precision (two significant digits of the interval's width) and one format: fixed-point, or
    scientific with one power of ten when the values reach 1e6 or the width needs more than six
    decimals. The interval is rounded outwards and the estimate to the nearest, clamped into the
    printed interval, so the printed estimate always lies in it."""
    estimate, low, high = row["estimate"], row["ci_low"], row["ci_high"]
    if not math.isfinite(estimate):
        return "–"
    if math.isfinite(low) and math.isfinite(high) and high <= low:
        return _number(estimate) + " °"
    if not (math.isfinite(low) and math.isfinite(high)):
        return _number(estimate)
    low, high = min(low, estimate), max(high, estimate)
    largest = max(abs(low), abs(high))
    decimals = 1 - math.floor(math.log10(high - low))
    exponent = math.floor(math.log10(largest)) if largest >= 1e6 or decimals > 6 else 0
    decimals = max(0, decimals + exponent)
    unit = 10.0 ** (decimals - exponent)
    e, lo, hi = round(estimate * unit), math.floor(low * unit), math.ceil(high * unit)
    e = min(max(e, lo), hi)
    if abs((high - estimate) - (estimate - low)) <= 0.01 * (high - low):
        h = max(e - lo, hi - e)  # the printed ±h covers the interval
        return f"{_scaled(e, decimals, exponent)} ±{_scaled(h, decimals, exponent)}"
    low_text, high_text = _scaled(lo, decimals, exponent), _scaled(hi, decimals, exponent)
    return f"{_scaled(e, decimals, exponent)} [{low_text}, {high_text}]"


def _wrap_notes(notes: list[str], width: int) -> list[str]:
    """The notes joined by `` · ``, broken between notes (never inside one) into lines of ``width``."""
    lines = ["   " + notes[0]]
    for note in notes[1:]:
        if len(lines[-1]) + 3 + len(note) <= width:
            lines[-1] += " · " + note
        else:
            lines.append("   " + note)
    return lines


def _grid(header: list[str], rows: list[list[str]], labels: int, width: int) -> list[str]:
    """Left-aligned label columns, then right-aligned value columns, in groups that fit ``width``."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    label_width = sum(widths[:labels]) + 2 * labels
    groups: list[list[int]] = []
    group: list[int] = []
    used = label_width
    for i in range(labels, len(header)):
        if group and used + widths[i] + 2 > width:
            groups.append(group)
            group, used = [], label_width
        group.append(i)
        used += widths[i] + 2
    groups.append(group)
    lines = []
    for group in groups:
        for r in [header, *rows]:
            left = "".join(r[i].ljust(widths[i] + 2) for i in range(labels))
            lines.append((left + "  ".join(r[i].rjust(widths[i]) for i in group)).rstrip())
    return lines


def format_result(result, *, width: int = _WIDTH, seconds: float | None = None) -> str:
    """The terminal block of one :class:`~dpjax.studies.StudyResult`."""
    study, table, record = result.study, result.table, result.record
    if "replicate" in table.columns:
        table = table[table["replicate"] == 0]
    x_name = x_parameter(table, study.grid)
    others = [p for p in study.grid if p != x_name and p in table.columns and table[p].nunique() > 1]
    xs = list(dict.fromkeys(table[x_name])) if x_name else [None]
    symbols: dict[str | None, str | None] = {"epsilon": "ε"}
    symbol = symbols.get(x_name, x_name)
    heading = f"== {study.name}: {study.description}" if study.description else f"== {study.name}"
    lines = textwrap.wrap(heading, width, subsequent_indent="   ")
    seconds = record["wall_seconds"] if seconds is None else seconds
    fallbacks = [s for s in record["steps"] if s["path"].startswith("one compile per grid point")]
    level = f"{100 * record['confidence']:g}%"
    notes = [f"{record['trials']} trials per cell", f"±h: half the {level} CI", f"[a, b]: the {level} CI",
             f"{record['compiles']} compiles"
             + (f" ({record['cache_hits']} from the cache)" if record.get("cache_hits") else ""),
             f"{seconds:.1f} s"]
    lines += _wrap_notes(notes, width)
    if fallbacks:
        names = ", ".join(dict.fromkeys(s["mechanism"] for s in fallbacks))
        lines += textwrap.wrap(f"one compile per grid point (traced parameters refused): {names}", width,
                               initial_indent="   ", subsequent_indent="     ")
    several_datasets = table["dataset"].nunique() > 1
    for metric in study.metrics:
        for statistic in metric.statistics:
            cell = table[(table["metric"] == metric.name) & (table["statistic"] == statistic)]
            if cell.empty:
                continue
            lines += textwrap.wrap(f"{metric.title(statistic)} [{metric.unit}]", width, initial_indent="   ",
                                   subsequent_indent="     ")
            header = (["dataset"] if several_datasets else []) + ["mechanism"]
            labels = len(header)
            header += [f"{symbol}={x:g}" if x_name else "value" for x in xs]
            rows = []
            keys = ["dataset", "mechanism", *others]
            for key, group in cell.groupby(keys, sort=False):
                label = key[1] + "".join(f", {p}={v:g}" for p, v in zip(others, key[2:], strict=True))
                by_x = {row[x_name] if x_name else None: row for _, row in group.iterrows()}
                values = [_cell(by_x[x]) if x in by_x else "" for x in xs]
                rows.append(([key[0]] if several_datasets else []) + [label] + values)
                theory = [by_x[x]["theory"] if x in by_x else None for x in xs]
                if any(t is not None and math.isfinite(t) for t in theory):
                    rows.append(([""] if several_datasets else []) + ["  closed form"]
                                + [_number(t) for t in theory])
            lines += ["     " + line for line in _grid(header, rows, labels, width - 5)]
    if any(" °" in line for line in lines):
        lines += textwrap.wrap(_ZERO_WIDTH, width, initial_indent="   ", subsequent_indent="     ")
    return "\n".join(lines)
