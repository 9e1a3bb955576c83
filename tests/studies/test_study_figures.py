"""The default studies' figures, checked from their results and drawn axes (not pixels): the
mechanisms differ somewhere on the grid, no series lies under another, no axis reaches below 0 for
non-negative values, and a dashed line always means "closed form"."""

import types

import matplotlib
import numpy as np
import pandas as pd
import pytest

from dpjax._src.studies.metrics import Metric
from dpjax._src.studies.plots import _figure_problems, study_figure
from dpjax.studies import run_study, studies

matplotlib.use("Agg")


def _result(estimates: dict, theory=None):
    """A two-dataset result of one linear, non-negative metric with the given series."""
    rows = []
    for (mechanism, dataset), values in estimates.items():
        for eps, value in zip((0.25, 1.0, 4.0), values, strict=True):
            rows.append({"study": "s", "mechanism": mechanism, "dataset": dataset, "epsilon": eps,
                         "metric": "wrong", "statistic": "mean", "estimate": value, "se": 0.0,
                         "ci_low": value, "ci_high": value, "theory": theory, "unit": "fraction"})
    metric = Metric("wrong", None, "wrong answers", "fraction", scale="linear")
    study = types.SimpleNamespace(name="s", description="", grid={"epsilon": (0.25, 1.0, 4.0)},
                                  metrics=[metric])
    record = {"trials": 10, "confidence": 0.95, "seed": 0}
    return types.SimpleNamespace(study=study, table=pd.DataFrame(rows), record=record)


def test_the_checks_catch_flat_hidden_and_impossible_figures():
    flat = _result({("A", "d"): [0, 0, 0], ("B", "d"): [0, 0, 0]})
    problems = _figure_problems(flat)
    assert "flat: the mechanisms do not differ anywhere on the grid" in problems
    assert any("hides" in p for p in problems)
    fine = _result({("A", "d"): [0.3, 0.1, 0.0], ("B", "d"): [0.2, 0.0, 0.0], ("A", "e"): [0.1, 0, 0]},
                   theory=0.1)
    fig = study_figure(fine)
    assert _figure_problems(fine, fig) == []  # one style per dataset, never dashed; axis from 0
    assert fig.axes[0].get_ylim()[0] == 0
    zeros = _result({("A", "d"): [0, 0, 0], ("B", "d"): [0.0, 0.0, 1e-3]})
    assert _figure_problems(zeros, study_figure(zeros)) == []
    matplotlib.pyplot.close("all")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["above_threshold_first_heavy_item", "pie_threshold", "top_k_recall"])
def test_default_study_figures_show_the_mechanisms_differing(name):
    """The studies whose figures were flat or hid a series: at 200 trials (the differences are of
    tens of percent of the releases, many standard errors at this size) every check passes."""
    result = run_study(studies()[name], trials=200, seed=0, progress=False)
    fig = result.figure()
    assert _figure_problems(result, fig) == []
    assert np.isfinite(result.table["estimate"]).any()
    matplotlib.pyplot.close("all")


def test_series_on_an_edge_or_over_each_other_are_noted():
    """A series at 0 at every point lies on the axis, and series within 2% of each other lie over one
    another: the panel names them; without the note the check reports it; nothing lies on the top spine."""
    zero = _result({("A", "d"): [0.3, 0.1, 0.05], ("B", "d"): [0.0, 0.0, 0.0], ("C", "d"): [0.0, 0.0, 0.0]})
    fig = study_figure(zero)
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [t.get_text() for t in ax.texts] == ["at 0 at every ε (on the axis):\nB\nC"]
    assert _figure_problems(zero, fig) == [] and ax.get_ylim() == (0, pytest.approx(1.05 * 0.3))
    ax.texts[0].remove()
    assert _figure_problems(zero, fig) == [f"{ax.get_title()!r}: a series on the axis at 0 at every point, "
                                           "with no note"]
    narrow = _result({("A", "d"): [0.99, 1.0, 1.0], ("B", "d"): [0.985, 0.995, 1.0]})
    fig = study_figure(narrow)
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [t.get_text() for t in ax.texts] == [
        "all 2 series between 0.985 and 1\nat every ε (over each other)"]
    assert _figure_problems(narrow, fig) == [] and ax.get_ylim()[1] > 1.0
    ax.texts[0].remove()
    assert _figure_problems(narrow, fig) == [f"{ax.get_title()!r}: every series within 2% of each other, "
                                             "with no note"]
    apart = _result({("A", "d"): [0.9, 1.0, 1.0], ("B", "d"): [0.5, 0.7, 1.0]})  # told apart: no note
    assert [t.get_text() for ax in study_figure(apart).axes for t in ax.texts] == []
    matplotlib.pyplot.close("all")
