"""The DP-SGD headline of README.md and docs/guides/training.md is the stored result of
``benchmarks/bench_optax_headline.py`` (``benchmarks/results/optax_headline.json``): the figures are
recomputed here from the stored runs (mean and standard deviation over seeds, the best fixed clip of
the sweep, the gap) and must appear, as printed, in the headline sentence of both documents. No
training: a change of ``dpjax train`` that moves the numbers needs the script rerun, and then this
test says which sentence to update."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "optax_headline.json"
DOCUMENTS = ("README.md", "docs/guides/training.md")
DEFAULT = "quantile q=0.75"  # dpjax train's default clip (settings.DEFAULTS: quantile 0.75)


def cell_stats(runs, dataset, epsilon):
    """``{clip label: (mean, std ddof 1, seeds)}`` of one (dataset, epsilon) cell, from the runs."""
    accuracies = {}
    for run in runs:
        if run["dataset"] == dataset and run["epsilon"] == epsilon:
            accuracies.setdefault(run["clip"], []).append(run["accuracy"])
    return {clip: (np.mean(a), np.std(a, ddof=1), len(a)) for clip, a in accuracies.items()}


def headline(path):
    """The paragraph of ``path`` that states the headline (from "With its defaults" to its end)."""
    text = Path(ROOT / path).read_text()
    start = r"With its defaults \(`quantile_clip\(\)`\), `dpjax train` on Adult"
    match = re.search(start + r".*?(?:\n\n|\Z)", text, re.S)
    assert match, f"{path}: no headline paragraph"
    return " ".join(match.group(0).split())


def cell_figures(runs, dataset, epsilon):
    """``(default, best fixed, number of fixed clips)``: (mean, std, seeds) of the default clip and of
    the best fixed clip of the sweep (in hindsight, on the mean test accuracy)."""
    stats = cell_stats(runs, dataset, epsilon)
    fixed = [s for clip, s in stats.items() if clip.startswith("fixed")]
    return stats[DEFAULT], max(fixed, key=lambda s: s[0]), len(fixed)


def expected_figures():
    """The figures the headline states, as it prints them."""
    runs = json.loads(RESULTS.read_text())["runs"]
    (mean, std, seeds), best, swept = cell_figures(runs, "adult", 3.0)
    gap = 100 * (best[0] - mean)
    figures = [
        f"reaches {mean:.4f} ± {std:.4f} test accuracy over {seeds} seeds",
        f"{abs(gap):.2f} points {'below' if gap >= 0 else 'above'} the best fixed clip",
        f"sweep over {swept} clip norms, {best[0]:.4f} ± {best[1]:.4f}",
    ]
    for prefix, epsilon in (("on MNIST-5k at epsilon 3", 3.0), ("and at epsilon 1", 1.0)):
        default, best, _ = cell_figures(runs, "mnist", epsilon)
        figures.append(f"{prefix}, {default[0]:.4f} ± {default[1]:.4f} against {best[0]:.4f} ± {best[1]:.4f}")
    return figures


@pytest.mark.parametrize("path", DOCUMENTS)
def test_headline_figures_are_the_stored_results(path):
    text = headline(path)
    for figure in expected_figures():
        assert figure in text, f"{path}: {figure!r} not in the headline: {text!r}"
