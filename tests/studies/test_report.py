"""What ``dpjax study`` prints: every printed estimate lies inside its printed interval, all numbers
of a cell share one precision and format, no heading is cut, and long steps are never silent."""

import io
import itertools
import re
import time
import types

import numpy as np
import pandas as pd
import pytest

from dpjax._src.studies import progress as progress_lib
from dpjax._src.studies.metrics import Metric
from dpjax._src.studies.report import _cell, format_result

NUMBER = r"-?\d+(?:\.(\d+))?(e[+-]\d\d)?"
SYMMETRIC = re.compile(rf"^({NUMBER}) ±({NUMBER})$")
INTERVAL = re.compile(rf"^({NUMBER}) \[({NUMBER}), ({NUMBER})\]$")


def _parts(text):
    """(estimate, low, high, formats) of a printed cell; formats: (decimals, exponent) of each number."""
    if match := SYMMETRIC.match(text):
        e, h = float(match.group(1)), float(match.group(4))
        return e, e - h, e + h, {len(match.group(i) or "") for i in (2, 5)}, {match.group(i) for i in (3, 6)}
    match = INTERVAL.match(text)
    assert match, text
    e, lo, hi = (float(match.group(i)) for i in (1, 4, 7))
    return e, lo, hi, {len(match.group(i) or "") for i in (2, 5, 8)}, {match.group(i) for i in (3, 6, 9)}


def _triples(rng, count):
    """Estimates with intervals around them: symmetric and skewed, at magnitudes from 1e-9 to 1e9,
    widths from 1e-6 to 10 of the estimate's magnitude, zeros and negatives, rates in [0, 1]."""
    scale = 10.0 ** rng.uniform(-9, 9, count)
    estimate = scale * rng.choice([-1.0, 1.0, 1.0], count) * rng.uniform(0.1, 1, count)
    width = scale * 10.0 ** rng.uniform(-6, 1, count)
    share = np.where(rng.random(count) < 0.5, 0.5, rng.uniform(0, 1, count))
    low, high = estimate - share * width, estimate + (1 - share) * width
    rate = rng.integers(0, 41, count) / 40
    rates = np.stack([rate, np.maximum(rate - 0.1, 0), np.minimum(rate + 0.07, 1)], axis=1)
    return np.concatenate([np.stack([estimate, low, high], axis=1), rates, [[0.0, 0.0, 0.01]]])


def test_every_printed_cell_holds_its_estimate_at_one_precision():
    for estimate, low, high in _triples(np.random.default_rng(0), 4000):
        text = _cell({"estimate": estimate, "ci_low": low, "ci_high": high})
        e, lo, hi, decimals, exponents = _parts(text)
        assert lo <= e <= hi, text
        assert len(decimals) == 1 and len(exponents) == 1, text  # one precision, one format
        slack = 1e-9 * (high - low)  # parsing the printed decimals back into floats
        assert lo <= low + slack and hi >= high - slack, text  # the printed interval covers the CI


def test_table_cells_and_headings_of_a_result():
    """Every value cell of a formatted study (three grid points, a closed-form row) parses and
    contains its estimate; the heading's notes (timing included) are never cut."""
    metric = Metric("abs_error", None, "absolute error", "data units", statistics=("mean", "q90"))
    study = types.SimpleNamespace(name="s", description="a study " * 20, grid={"epsilon": (0.1, 1.0, 10.0)},
                                  metrics=[metric])
    rows = []
    for mechanism, base in (("a mechanism with a rather long name, k=10", 151.2), ("b", 0.1673)):
        for i, eps in enumerate((0.1, 1.0, 10.0)):
            for statistic, skew in (("mean", 0.5), ("q90", 0.8)):
                estimate = base / 10**i
                width = 0.07 * estimate
                rows.append({"study": "s", "mechanism": mechanism, "dataset": "d", "epsilon": eps,
                             "metric": "abs_error", "statistic": statistic, "estimate": estimate,
                             "ci_low": estimate - skew * width, "ci_high": estimate + (1 - skew) * width,
                             "theory": 1 / eps if mechanism == "b" else np.nan})
    record = {"wall_seconds": 12.34, "steps": [], "confidence": 0.95, "trials": 1000, "compiles": 123456,
              "cache_hits": 7}
    result = types.SimpleNamespace(study=study, table=pd.DataFrame(rows), record=record)
    text = format_result(result, width=60)
    assert "…" not in text and "12.3 s" in text and "a mechanism with a rather long name, k=10" in text
    cells = [cell for line in text.splitlines() if line.startswith("     ")
             for cell in re.split(r"\s{2,}", line.strip()) if SYMMETRIC.match(cell) or INTERVAL.match(cell)]
    assert len(cells) == 2 * 2 * 3  # mechanisms x statistics x grid points
    for cell in cells:
        e, lo, hi, decimals, _ = _parts(cell)
        assert lo <= e <= hi and len(decimals) == 1, cell


def test_line_progress_says_what_is_still_running(monkeypatch):
    monkeypatch.setattr(progress_lib, "_HEARTBEAT", 0.2)
    stream = io.StringIO()
    with progress_lib.Progress(2, lines=True, stream=stream) as progress:
        progress.start("Laplace on normal")
        time.sleep(1.0)
        progress.done("Laplace on normal")
        time.sleep(0.5)  # nothing running: no heartbeat
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/2] Laplace on normal"
    assert lines[1].startswith("  … still running: Laplace on normal (") and len(lines) <= 6
    assert all("still running" in line for line in lines[1:])


def _simulated_beats(terminal, phase, relabel_at=None):
    """The heartbeat's lines of a ``phase``-second block on a simulated clock: ``(time, text)``; at
    ``relabel_at`` the block goes on as another phase."""
    now, lines = [0.0], []
    beat = progress_lib._Beat("compiling x", clock=lambda: now[0])

    def wait(seconds):
        end = now[0] + seconds
        if relabel_at is not None and now[0] < relabel_at <= end:
            now[0] = relabel_at
            beat.phase("writing x.png")
        if end >= phase:
            now[0] = phase
            return True  # the block ends before the next line
        now[0] = end
        return False

    progress_lib._beat(progress_lib._BEAT, terminal, lambda: lines.append((now[0], beat.line())),
                       lambda: now[0], wait)
    return lines


def test_heartbeat_never_leaves_a_terminal_silent_over_5_s_and_keeps_logs_short():
    every, hour = progress_lib._BEAT, 3600.0
    lines = _simulated_beats(True, hour)
    times = [0.0, *(t for t, _ in lines), hour]
    assert max(b - a for a, b in itertools.pairwise(times)) <= 5.0  # the promise, on a terminal
    assert lines[0] == (every, f"  … compiling x ({every:.0f} s)")
    assert lines[-1][1] == f"  … compiling x ({lines[-1][0]:.0f} s)"
    logged = _simulated_beats(False, hour)  # a log file: a line every max(every, elapsed / 5) seconds
    assert logged[0][0] == every and len(logged) < 40
    assert all(b - a == pytest.approx(max(every, a / 5)) for (a, _), (b, _) in itertools.pairwise(logged))
    assert _simulated_beats(True, every - 0.1) == []  # a short block says nothing


def test_heartbeat_keeps_its_clock_of_silence_across_phases():
    """Two quiet phases of one block, each shorter than the beat, are one silence: a line comes
    ``_BEAT`` seconds after the block began, naming the second phase and counting from its start."""
    every = progress_lib._BEAT
    lines = _simulated_beats(True, 1.6 * every, relabel_at=0.8 * every)
    assert lines == [(every, f"  … writing x.png ({0.2 * every:.0f} s)")]
