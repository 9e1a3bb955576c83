"""A figure rule of the reproductions: no series hidden behind another. A series that lies on one
drawn before it (the same values, or within 1% of the panel's range at every x, which the eye cannot
separate) is drawn on top of it, dashed and with hollow markers, so both stay visible, and its legend
label says which one it coincides with."""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    "HIDDEN",
    "plot_series",
]

HIDDEN = 0.01  # two lines closer than this share of the panel's range at every x look like one


def plot_series(ax, x, series, *, plot=None, span: float | None = None, **style) -> list[str]:
    """Draws ``series`` (``[(label, y, fmt), ...]``, y on a linear scale) on ``ax`` with ``plot``
    (default ``ax.plot``; e.g. ``ax.semilogx``) and ``style``; returns the labels as drawn. A series
    equal to an earlier one is labelled ``"LABEL (= EARLIER, identical)"``, one within
    :data:`HIDDEN` of ``span`` (the y axis's extent; default the range of all the series)
    ``"LABEL (≈ EARLIER)"``; either is drawn dashed over it with hollow markers."""
    plot = plot or ax.plot
    values = [np.asarray(y, np.float64) for _, y, _ in series]
    finite = np.concatenate([v[np.isfinite(v)] for v in values] or [np.zeros(1)])
    near = HIDDEN * (span if span is not None else finite.max() - finite.min())
    drawn: list[tuple[str, np.ndarray]] = []
    labels: list[str] = []
    for (label, _, fmt), y in zip(series, values, strict=True):
        twin, same = None, False
        for name, seen in drawn:
            if seen.shape == y.shape and np.allclose(seen, y, rtol=1e-9, atol=near, equal_nan=True):
                twin, same = name, np.allclose(seen, y, rtol=1e-9, atol=0, equal_nan=True)
                break
        if twin is None:
            plot(x, y, fmt, label=label, **style)
        else:
            shown = f"{label} (= {twin}, identical)" if same else f"{label} (≈ {twin})"
            marker = re.sub(r"--|-\.|-|:", "", fmt)  # the fmt's colour and marker, its line dashed
            plot(x, y, marker, label=shown, **{**style, "ls": "--", "mfc": "none", "zorder": 3})
        labels.append(label if twin is None else shown)
        drawn.append((label, y))
    return labels
