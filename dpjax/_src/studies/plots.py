"""Study figures: small multiples of each statistic against the grid parameter (a log axis when its
values are positive), errors on a log y axis, rates and counts on a linear one from 0.

One figure per study, one panel per (metric, statistic) with its own y axis, titled with the metric's
name, the statistic and what it measures, and labelled with the statistic, the name and the unit
(``dpjax/studies/_figure_notes.py``). Each line is one mechanism on one dataset (colour and marker:
mechanism; line style: dataset, solid for the first, never dashed), with its confidence band; a
mechanism's closed form, where it has one, is the black dashed line over it: dashed means "closed
form" in every figure. Series are drawn widest first, so a series that coincides with another shows
as a coloured rim around it instead of vanishing, and the legend names what it coincides with. A rate
stuck at 0 or 1 everywhere in a panel is said in words, not drawn flat; cells whose interval has zero
width are circled and the legend says why; a series on the axis at 0, or a panel whose series all lie
within 2% of each other, is named in a note in the panel. A linear axis of non-negative values starts
at 0.
Replicate 0 is drawn when there are several.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np

from dpjax._src.studies import figure_notes

__all__: list[str] = []

_STYLES = ("-", ":", "-.", (0, (3, 1, 1, 1, 1, 1)))  # datasets; dashed is kept for the closed form
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def x_parameter(table, grid: dict) -> str | None:
    """The grid parameter on the x axis: the first with several values (else the first)."""
    varying = [p for p in grid if p in table.columns and table[p].nunique() > 1]
    return varying[0] if varying else next(iter(grid), None)


def study_figure(result, *, columns: int = 3):
    """The small-multiples figure of a :class:`~dpjax.studies.StudyResult`."""
    import matplotlib.pyplot as plt

    study, table = result.study, result.table
    if "replicate" in table.columns:
        table = table[table["replicate"] == 0]
    x_name = x_parameter(table, study.grid)
    others = [p for p in study.grid if p != x_name and p in table.columns and table[p].nunique() > 1]
    panels = [(m, s) for m in study.metrics for s in m.statistics
              if ((table["metric"] == m.name) & (table["statistic"] == s)).any()]
    n_rows = math.ceil(len(panels) / columns)
    n_cols = math.ceil(len(panels) / n_rows)  # balanced: 4 panels are 2 x 2
    width = max(4.3 * n_cols, 8.0)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, 3.2 * n_rows + 1.3), squeeze=False,
                             layout="constrained")
    datasets = list(dict.fromkeys(table["dataset"]))
    line_keys = ["mechanism", "dataset", *others]
    lines = list(dict.fromkeys(tuple(r) for r in table[line_keys].itertuples(index=False)))
    colour_keys = list(dict.fromkeys((line[0], *line[2:]) for line in lines))
    colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(colour_keys)}
    handles: dict[str, Any] = {}  # legend label: the artist drawn for it
    same = figure_notes.Coincidences()
    for ax, (metric, statistic) in zip(axes.flat, panels, strict=False):
        cell = table[(table["metric"] == metric.name) & (table["statistic"] == statistic)]
        stuck, drawn = figure_notes.stuck_rate(metric, statistic, cell), {}
        for line in lines if stuck is None else []:
            rows = cell
            for k, v in zip(line_keys, line, strict=True):
                rows = rows[rows[k] == v]
            if rows.empty:
                continue
            rows = rows.sort_values(x_name) if x_name else rows
            x = rows[x_name].to_numpy(float) if x_name else np.zeros(len(rows))
            rank = colour_keys.index((line[0], *line[2:]))
            label = " · ".join([str(line[0])] + ([str(line[1])] if len(datasets) > 1 else [])
                               + [f"{k}={v:g}" for k, v in zip(others, line[2:], strict=True)])
            same.add((metric.name, statistic), label, x, rows["estimate"])
            drawn[label] = rows["estimate"]
            _series(ax, handles, x, rows, label, colours[(line[0], *line[2:])], rank, len(colour_keys),
                    _STYLES[datasets.index(line[1]) % 4])
        if stuck is not None:
            ax.text(0.5, 0.5, figure_notes.stuck_text(stuck, cell.groupby(line_keys).ngroups, x_name),
                    transform=ax.transAxes, ha="center", va="center", fontsize=9)
        note = figure_notes.edge_note(drawn, _scale(metric, cell), x_name)
        if note is not None:
            ax.text(0.5, note[1], note[0], transform=ax.transAxes, ha="center", va="bottom", fontsize=8,
                    bbox=dict(facecolor="white", alpha=0.85, lw=0))
        _axes(ax, cell, metric, statistic, x_name)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles = {same.legend_label(label): h for label, h in handles.items()}
    record = result.record
    title = f"{study.name}: {study.description}" if study.description else study.name
    fig.suptitle("\n".join(textwrap.wrap(title, int(width * 12))), fontsize=11)
    if "closed form" in handles:
        handles["closed form"] = handles.pop("closed form")  # last
    fig.legend(list(handles.values()), list(handles), loc="outside lower center",
               ncol=min(max(1, int(width // 3.2)), len(handles)), fontsize=8.5, frameon=False,
               title=f"{record['trials']} trials per point · bands: {100 * record['confidence']:g}% "
               f"confidence intervals · seed {record['seed']}", title_fontsize=8.5)
    return fig


def _series(ax, handles, x, rows, label, colour, rank, n_colours, style) -> None:
    """One series of a panel: its line (wider the earlier it is drawn), band, zero-width circles and
    closed form; new legend entries go to ``handles``."""
    wide = (n_colours - 1 - rank) / max(n_colours - 1, 1)  # 1 for the first drawn
    y = rows["estimate"].to_numpy(float)
    (handle,) = ax.plot(x, y, linestyle=style, marker=_MARKERS[rank % len(_MARKERS)], color=colour,
                        lw=1.3 + 2.2 * wide, ms=4 + 4 * wide, label=label)
    handles.setdefault(label, handle)
    ax.fill_between(x, rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float), color=colour,
                    alpha=0.18, lw=0)
    flat = figure_notes.zero_width(rows)
    if flat.any():
        (z_handle,) = ax.plot(x[flat], y[flat], ls="none", marker="o", ms=13, mfc="none", mec="black",
                              mew=1.0, zorder=5)
        handles.setdefault(figure_notes.ZERO_WIDTH, z_handle)
    theory = rows["theory"].to_numpy(float)
    if np.isfinite(theory).any():
        (t_handle,) = ax.plot(x, theory, color="black", lw=1.1, ls=(0, (4, 3)), zorder=4)
        handles.setdefault("closed form", t_handle)


def _scale(metric, cell) -> str:
    """The panel's y scale: the metric's, but linear where a value or interval end is not positive."""
    values = cell[["estimate", "ci_low", "ci_high"]].to_numpy(float)
    positive = values[np.isfinite(values)]
    return "log" if metric.scale == "log" and positive.size and (positive > 0).all() else "linear"


def _axes(ax, cell, metric, statistic, x_name) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = cell[["estimate", "ci_low", "ci_high"]].to_numpy(float)
    positive = values[np.isfinite(values)]
    if _scale(metric, cell) == "log":
        ax.set_yscale("log")
        # Plain numbers at 1-2-5 steps (or finer on a short range), not mathtext powers of ten.
        decades = np.log10(positive.max() / positive.min())
        subs = (1,) if decades > 3 else (1, 2, 5) if decades > 0.7 else (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)
        ax.yaxis.set_major_locator(LogLocator(subs=subs))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    elif positive.size and (cell["estimate"].dropna() >= 0).all():  # non-negative values (counts, rates):
        # no negative range (the CI band clipped), and room above the top value (no series on the spine)
        ax.set_ylim(bottom=0, top=1.05 * positive.max() if positive.max() > 0 else 1)
    if x_name and cell[x_name].nunique() > 1:
        xs = np.unique(cell[x_name].to_numpy(float))
        if (xs > 0).all():
            ax.set_xscale("log")
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.xaxis.set_minor_formatter(NullFormatter())
    name, description = figure_notes.panel_title(metric, statistic).split("\n", 1)
    ax.set_title("\n".join([name, *textwrap.wrap(description, 46)]), fontsize=9.5)
    ax.set_ylabel("\n".join(textwrap.wrap(figure_notes.axis_label(metric, statistic), 40)), fontsize=9)
    ax.set_xlabel({"epsilon": "ε (privacy parameter)"}.get(x_name, x_name or ""), fontsize=9)
    ax.tick_params(labelsize=8.5)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)


def _figure_problems(result, fig=None) -> list[str]:
    """What would make the study's figure misleading, read from its results (and, when given, from
    the drawn figure's axes and lines, not pixels): no two mechanisms differing anywhere on the grid
    (a flat study), a series equal to another at every point of a panel (drawn over it; with a figure,
    only when its legend does not say they coincide), a linear axis reaching below 0 for non-negative
    values, a dashed line that is not a closed form. Empty when there is nothing to say."""
    table = result.table
    if "replicate" in table.columns:
        table = table[table["replicate"] == 0]
    x_name = x_parameter(table, result.study.grid)
    others = [p for p in result.study.grid if p != x_name and p in table.columns and table[p].nunique() > 1]
    problems, differ = [], False
    noted = " ".join(t.get_text() for legend in getattr(fig, "legends", []) for t in legend.get_texts())
    for (metric, statistic), cell in table.groupby(["metric", "statistic"], sort=False):
        series = {}
        for key, rows in cell.groupby(["mechanism", "dataset", *others], sort=False):
            rows = rows.sort_values(x_name) if x_name else rows
            series[key] = np.round(rows["estimate"].to_numpy(float), 12)
        keys = list(series)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                same_grid = series[a].shape == series[b].shape
                if same_grid and np.array_equal(series[a], series[b], equal_nan=True):
                    if "coincides with" in noted:
                        continue
                    problems.append(f"{metric} {statistic}: {b} hides {a} (equal at every point)")
                elif a[1:] == b[1:] and a[0] != b[0]:
                    differ = True
    if len({m for m in table["mechanism"]}) > 1 and not differ:
        problems.append("flat: the mechanisms do not differ anywhere on the grid")
    for ax in [] if fig is None else fig.axes:
        if not ax.get_visible():
            continue
        data = np.concatenate([line.get_ydata() for line in ax.get_lines()] or [np.zeros(0)]).astype(float)
        finite = data[np.isfinite(data)]
        if ax.get_yscale() == "linear" and finite.size and finite.min() >= 0 and ax.get_ylim()[0] < 0:
            problems.append(f"{ax.get_title()!r}: axis below 0 for non-negative values")
        for line in ax.get_lines():
            if line.get_linestyle() == "--" and _rgba(line.get_color()) != (0.0, 0.0, 0.0, 1.0):
                problems.append(f"{ax.get_title()!r}: a dashed line that is not the closed form")
        if ax.get_yscale() == "linear":
            problems += _unnoted_edges(ax)
    return problems


def _unnoted_edges(ax) -> list[str]:
    """A drawn linear panel's series that its edges or each other hide, when its text does not say so:
    a series at 0 at every point, or every series within 2% of the top value of each other."""
    series = [np.asarray(line.get_ydata(), float) for line in ax.get_lines()
              if line.get_linestyle() not in ("None", "none", "") and _rgba(line.get_color()) != (0, 0, 0, 1)]
    series = [y[np.isfinite(y)] for y in series if np.isfinite(y).any()]
    text, problems = " ".join(t.get_text() for t in ax.texts), []
    if any((y == 0).all() for y in series) and "at 0 at" not in text and "between" not in text:
        problems.append(f"{ax.get_title()!r}: a series on the axis at 0 at every point, with no note")
    every = np.concatenate(series) if series else np.zeros(0)
    top = every.max() if every.size else 0.0
    narrow = len(series) > 1 and top > 0 and top - every.min() <= figure_notes.NARROW * top
    if narrow and "between" not in text:
        problems.append(f"{ax.get_title()!r}: every series within 2% of each other, with no note")
    return problems


def _rgba(colour) -> tuple:
    from matplotlib.colors import to_rgba

    return tuple(float(c) for c in to_rgba(colour))
