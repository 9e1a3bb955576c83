"""The study API: your mechanisms, your data, a parameter grid and metrics in; a tidy table out.

Example (a mechanism of your own, three epsilons, 2,000 trials per cell)::

    import jax, jax.numpy as jnp, numpy as np
    from dpjax.additive import laplace_mechanism
    from dpjax.studies import Mechanism, Study, metrics, run_study
    from dpjax.studies import Exponential

    def private_mean(key, x, epsilon):                  # any f(key, data, **params)
        return laplace_mechanism(key, jnp.clip(x, 0, 1).mean(), epsilon, sensitivity=1 / x.size)

    study = Study(
        "my_mean",
        mechanisms=[Mechanism("laplace mean", private_mean,
                              theory={"abs_error": lambda x, epsilon: Exponential(1 / (x.size * epsilon))})],
        datasets={"uniform": np.random.default_rng(0).uniform(size=1000)},
        grid={"epsilon": [0.1, 1.0, 10.0]},
        truth=lambda x, epsilon: jnp.clip(x, 0, 1).mean(),
        metrics=[metrics.abs_error(("mean", "q95"))],
    )
    result = run_study(study, trials=2000, seed=0)
    result.table        # one row per (mechanism, dataset, epsilon, metric, statistic)
    result.figure()     # error vs epsilon, log-log, 95% bands, theory dashed
    result.save("out")  # my_mean.csv, my_mean.json (with the run record), my_mean.png

How it runs. For each mechanism and dataset, the whole grid is **one compiled call**: ``vmap`` over
the grid's parameter values inside ``vmap`` over the trial keys, chunked over trials by
:func:`~dpjax.studies.runner.monte_carlo` to bound memory. Trial ``i`` of every cell uses
``fold_in(key, i)`` with one key per (study, mechanism, dataset), so:

* results are reproducible per seed and do not depend on the chunk size;
* every grid point uses the same trial keys (common random numbers): a cell's numbers do not
  depend on which other grid points or datasets are in the study, and differences between grid
  points are measured with less noise (the confidence interval of each cell is still its own);
* datasets with the same shapes share the compiled code.

Parameters named in ``static`` (those that fix a shape, such as ``k``) are looped over, one compile
per value. A mechanism that refuses a traced grid parameter (it raises
:class:`dpjax.validation.TracedParameterError`, or JAX's own error for a tracer converted to a
Python number, bool or NumPy array) is run with one compile per grid point instead, and the record
says so.

The data, the grid values and the mechanism's fixed ``params`` reach ``fn`` as follows: ``data``
(and the truth's ``data``) is passed as an argument of the compiled call; fixed ``params`` and
per-dataset parameters are Python values closed over (static); grid values are traced scalars.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src import interrupt
from dpjax._src.datasets import builtin
from dpjax._src.studies import streaming
from dpjax._src.studies.checkpoint import StepStore, fingerprint
from dpjax._src.studies.compiles import CompileCounter
from dpjax._src.studies.metrics import Metric
from dpjax._src.studies.progress import Progress
from dpjax._src.studies.record import run_record
from dpjax._src.studies.runner import run
from dpjax._src.studies.status import ChunkStatus
from dpjax._src.studies.theory import theory_value
from dpjax._src.studies.trial_cache import TRIALS, content_key
from dpjax._src.validation import TracedParameterError, check_int

if TYPE_CHECKING:
    from matplotlib.figure import Figure
else:  # matplotlib loads only when a figure is drawn: at run time the annotation reads Any
    Figure = Any

__all__ = [
    "COLUMNS",
    "Mechanism",
    "Study",
    "StudyResult",
    "column_descriptions",
    "error_location",
    "run_study",
    "save_figure",
    "step_count",
]

COLUMNS = {
    "study": "the study's name",
    "mechanism": "the mechanism (or variant) that made the releases",
    "dataset": "the dataset the releases were made on",
    "metric": "what was measured on each release (described, with its unit, in the table headings "
    "and in results.json)",
    "statistic": "the summary of the trials' metric values: mean, rmse, median or qNN (NN% quantile)",
    "estimate": "the statistic's Monte Carlo estimate over the trials",
    "se": "standard error of the estimate",
    "ci_low": "lower end of the confidence interval of the statistic",
    "ci_high": "upper end of the confidence interval of the statistic",
    "theory": "closed-form value of the statistic where the mechanism has one (else empty)",
    "unit": "unit of metric, estimate, se, ci_low, ci_high and theory",
    "trials": "independent releases per cell",
    "failure_rate": "share of trials whose metric was not finite (invalid marker, nothing released), "
    "left out of the statistic",
    "ci_method": "how the interval was computed: CLT, Wilson (rates), CLT (mean square), order statistics "
    "(exact, or 'streamed' from a quantile sketch)",
    "replicate": "index of the independent replicate of the whole study (only with replicates > 1)",
}


_PARAMETERS = {
    "epsilon": "the privacy parameter ε of each release (a grid parameter; record.grid lists its values)",
    "k": "the number of items each release selects (a grid parameter; record.grid lists its values)",
}


def column_descriptions(columns, studies) -> dict[str, str]:
    """What each of ``columns`` holds: :data:`COLUMNS`, :data:`_PARAMETERS`, and for any other grid or
    derived parameter of ``studies`` a line saying which it is (so every column is described)."""
    described = {}
    for column in columns:
        if column in COLUMNS or column in _PARAMETERS:
            described[column] = COLUMNS.get(column) or _PARAMETERS[column]
            continue
        derived = [s.name for s in studies if column in s.derived]
        if derived:
            described[column] = (f"a parameter computed on the host from each grid point (study "
                                 f"{', '.join(derived)}) and passed to the mechanisms")
        elif any(column in s.grid for s in studies):
            described[column] = f"the grid parameter {column} (record.grid lists its values)"
    return described


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """A mechanism under study.

    Attributes:
      name: its label in tables and figures.
      fn: ``fn(key, data, **params) -> release`` (a pytree of arrays), key first and pure.
      params: fixed keyword arguments (Python values, closed over: static).
      variants: if given, ``fn`` returns ``{variant: release}`` (several estimators from one
        release, e.g. a measurement and its post-processed improvement) and each variant is a
        mechanism of its own in the table, all from one compiled call.
      theory: per metric name (or ``(variant, metric name)``), ``theory(data, **params)`` with
        concrete parameters, returning a law or ``{statistic: value}`` (see
        :mod:`dpjax.studies.theory`).
      description: one line for listings.
    """

    name: str
    fn: Callable
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    variants: tuple[str, ...] = ()
    theory: Mapping[Any, Callable] = dataclasses.field(default_factory=dict)
    description: str = ""

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))

    @property
    def labels(self) -> tuple[str, ...]:
        """The names its releases appear under in the table."""
        return self.variants or (self.name,)


@dataclasses.dataclass(frozen=True)
class Study:
    """A Monte Carlo study: mechanisms x datasets x parameter grid, measured by metrics.

    Attributes:
      name: the study's name (file names, the ``study`` column).
      mechanisms: :class:`Mechanism` objects, or a mapping ``{name: fn}``.
      datasets: ``{name: data}`` where data is an array or pytree of arrays, a :class:`Dataset`, or
        the name of a built-in dataset (see :mod:`dpjax.datasets.builtin`); or ``{name: (data,
        params)}`` with per-dataset fixed parameters (static) for ``fn``, ``truth`` and theory; a
        parameter given as a function is called with the (host) data, e.g. a threshold at a rank.
      metrics: what to measure (see :mod:`dpjax.studies.metrics`).
      grid: ``{parameter: values}``; the study runs on their product. Values may be traced.
      truth: ``truth(data, **params) -> pytree`` in JAX, what the metrics compare releases with
        (``None`` when no metric needs one). For mechanisms with variants, a truth dict with a key
        per variant gives each variant its own truth.
      static: grid parameters that must be concrete (they fix a shape): one compile per value.
      derived: ``{name: fn}``: parameters computed on the host from each grid point,
        ``fn(**grid point)``, and passed to ``fn``/``truth`` like grid values (traced). For host-side
        calibrations (e.g. a per-step epsilon found by bisection) that would otherwise make a
        mechanism refuse a traced grid. They get a column of their own in the table.
      description: one line for listings and figure titles.
      family: the mechanism family, for listings.
    """

    name: str
    mechanisms: Sequence[Mechanism] | Mapping[str, Callable]
    datasets: Mapping[str, Any]
    metrics: Sequence[Metric]
    grid: Mapping[str, Sequence] = dataclasses.field(default_factory=lambda: {"epsilon": (1.0,)})
    truth: Callable | None = None
    static: Sequence[str] = ()
    derived: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    description: str = ""
    family: str = "user"

    def __post_init__(self):
        mechanisms = self.mechanisms
        if isinstance(mechanisms, Mapping):
            mechanisms = [Mechanism(name, fn) for name, fn in mechanisms.items()]
        mechanisms = tuple(mechanisms)
        labels = [label for m in mechanisms for label in m.labels]
        if not mechanisms or len(set(labels)) != len(labels):
            raise ValueError(f"study {self.name!r}: mechanisms must be given, with distinct names.")
        metrics = tuple(self.metrics)
        if not metrics or len({m.name for m in metrics}) != len(metrics):
            raise ValueError(f"study {self.name!r}: metrics must be given, with distinct names.")
        if not self.datasets:
            raise ValueError(f"study {self.name!r}: give at least one dataset.")
        grid = _check_grid(self.grid)
        static = tuple(self.static)
        unknown = sorted(set(static) - set(grid))
        if unknown:
            raise ValueError(f"study {self.name!r}: static parameters {unknown} are not in the grid.")
        derived = dict(self.derived)
        clash = sorted(set(derived) & set(grid))
        if clash:
            raise ValueError(f"study {self.name!r}: derived parameters {clash} are also grid parameters.")
        object.__setattr__(self, "derived", derived)
        object.__setattr__(self, "mechanisms", mechanisms)
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "static", static)
        object.__setattr__(self, "datasets", dict(self.datasets))


def _check_grid(grid: Mapping[str, Sequence]) -> dict[str, tuple]:
    checked = {}
    for name, values in grid.items():
        values = tuple(np.atleast_1d(np.asarray(values)).tolist())
        if not values:
            raise ValueError(f"grid parameter {name!r} has no values.")
        checked[name] = values
    return checked


@dataclasses.dataclass
class StudyResult:
    """What :func:`run_study` returns.

    Attributes:
      study: the :class:`Study` that ran.
      table: a tidy ``pandas.DataFrame``, one row per (mechanism, dataset, grid point, metric,
        statistic[, replicate]); its columns are described in ``COLUMNS``.
      record: the run record: seed, trials, versions, backend, date, wall time, compiles per step.
    """

    study: Study
    table: Any
    record: dict

    def figure(self) -> Figure:
        """The study's small-multiples figure (see :func:`dpjax.studies.plots.study_figure`)."""
        from dpjax._src.studies.plots import study_figure

        return study_figure(self)

    def metadata(self) -> dict:
        """Everything needed to read the table: the record, the metrics and the columns."""
        return {
            "study": self.study.name,
            "description": self.study.description,
            "record": self.record,
            "metrics": {m.name: {"description": m.description, "unit": m.unit} for m in self.study.metrics},
            "columns": column_descriptions(self.table.columns, [self.study]),
        }

    def save(self, directory: str | os.PathLike, *, figure: bool = True) -> list[Path]:
        """Writes ``<name>.csv`` (the table), ``<name>.json`` (record, legend, rows) and ``<name>.png``,
        each atomically (a temporary file renamed into place)."""
        import json

        from dpjax._src.outdir import atomic_path, write_text

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / self.study.name
        paths = [stem.with_suffix(".csv"), stem.with_suffix(".json")]
        with atomic_path(paths[0]) as tmp:
            self.table.to_csv(tmp, index=False)
        payload = {**self.metadata(), "rows": json.loads(self.table.to_json(orient="records"))}
        write_text(paths[1], json.dumps(payload, indent=2) + "\n")
        if figure:
            paths.append(stem.with_suffix(".png"))
            save_figure(self.figure(), paths[-1])
        return paths


def save_figure(fig, path, **options) -> None:
    """Saves a matplotlib figure as PNG atomically and closes it."""
    import matplotlib.pyplot as plt

    from dpjax._src.outdir import atomic_path

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=options.pop("dpi", 110), **options)
    finally:
        plt.close(fig)


class _Data(NamedTuple):
    """One dataset of a study: on the device (what ``fn`` gets), on the host (for theory values and
    parameters computed from the data), and its fixed parameters."""

    device: Any
    host: Any
    params: Mapping


def _load_dataset(entry, seed: int) -> _Data:
    """The :class:`_Data` of one ``datasets`` entry."""
    params: Mapping = {}
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], Mapping):
        entry, params = entry
    if isinstance(entry, str):
        entry = builtin.load(entry, seed)
    if isinstance(entry, builtin.Dataset):
        entry = entry.values
    params = {k: v(entry) if callable(v) else v for k, v in params.items()}
    return _Data(jax.tree.map(jnp.asarray, entry), entry, params)


_MISSING = object()


def _pick(tree, key):
    """``tree[key]`` (the whole ``tree`` for ``key=None``), or ``_MISSING``."""
    if key is None:
        return tree
    if isinstance(tree, Mapping) and key in tree:
        return tree[key]
    return _MISSING


def _measure(mechanism: Mechanism, metrics: Sequence[Metric], release, truth) -> dict:
    """``{(label, metric name): scalar}`` for one release."""
    out = {}
    for label in mechanism.labels:
        r = release[label] if mechanism.variants else release
        t = truth[label] if mechanism.variants and isinstance(truth, Mapping) and label in truth else truth
        for metric in metrics:
            r_m = _pick(r, metric.output)
            if r_m is _MISSING:
                continue
            t_m = _pick(t, metric.truth)
            if t_m is _MISSING:
                raise ValueError(f"metric {metric.name!r} reads truth[{metric.truth!r}]: no such entry.")
            value = jnp.asarray(metric.fn(r_m, t_m))
            if value.ndim != 0:
                raise ValueError(
                    f"metric {metric.name!r} must give one number per trial, got shape {value.shape}."
                )
            out[(label, metric.name)] = value.astype(jnp.result_type(float))
    return out


def _trial_function(mechanism, metrics, truth_fn, fixed: dict, point: dict | None):
    """``trial(key, data, grid) -> {(label, metric): [G]}``: vmap over the traced grid; or, with a
    concrete ``point``, ``trial(key, data) -> {(label, metric): scalar}`` at that point."""

    def at(key, data, values):
        params = {**fixed, **values}
        release = mechanism.fn(key, data, **params)
        truth = None if truth_fn is None else truth_fn(data, **params)
        return _measure(mechanism, metrics, release, truth)

    if point is not None:
        return lambda key, data: at(key, data, point)
    return lambda key, data, grid: jax.vmap(lambda values: at(key, data, values))(grid)


# A mechanism's refusal of a traced grid parameter: dpjax's own, and JAX's when the mechanism converts
# a tracer to a Python number, a bool or a NumPy array.
_TRACED_REFUSALS = (
    TracedParameterError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)


def _per_chunk(grid_points: int, chunk_size: int | None) -> int | None:
    """At most this many trials per compiled call: ``chunk_size`` releases (one trial's ``grid_points``
    when they alone are more); ``None``: sized from memory."""
    return None if chunk_size is None else max(1, chunk_size // grid_points)


class _Plan(NamedTuple):
    """What :func:`run_study` runs: the study, its resolved grid and datasets, the Monte Carlo settings."""

    study: Study
    grid: dict[str, tuple]
    datasets: list[str]
    static_points: list[dict]  # one compile each (parameters that fix a shape)
    grid_points: list[dict]  # traced: one compiled call covers them all
    trials: int
    replicates: int
    chunk_size: int | None
    confidence: float
    seed: int


class _Cell(NamedTuple):
    """One step of a run: a mechanism on a dataset at a static point, over the traced grid points."""

    mechanism: Mechanism
    dataset: str
    data: _Data
    static: dict
    points: list[dict]  # the traced grid points, with the derived parameters
    grid: dict  # {parameter: array over the points}, what the compiled call gets

    @property
    def label(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.static.items())
        return f"{self.mechanism.name} on {self.dataset}" + (f" ({where})" if where else "")

    @property
    def fixed(self) -> dict:
        """The closed-over (static) parameters: the mechanism's, the dataset's and the static point."""
        return {**self.mechanism.params, **self.data.params, **self.static}


def _plan(study: Study, *, trials, seed, grid, datasets, replicates, confidence, chunk_size) -> _Plan:
    """The validated settings and the resolved grid and datasets of a run (see :func:`run_study`)."""
    full_grid = dict(study.grid)
    if grid:
        unknown = sorted(set(grid) - set(full_grid))
        if unknown:
            raise ValueError(f"study {study.name!r} has no grid parameter {unknown}.")
        full_grid.update(_check_grid(grid))
    names = list(study.datasets) if datasets is None else [d for d in study.datasets if d in datasets]
    if not names:
        raise ValueError(f"study {study.name!r} runs on none of the datasets {list(datasets or [])}.")

    def points(params):
        return [dict(zip(params, v, strict=True)) for v in itertools.product(*(full_grid[p] for p in params))]

    return _Plan(
        study, full_grid, names,
        static_points=points([p for p in full_grid if p in study.static]),
        grid_points=points([p for p in full_grid if p not in study.static]),
        trials=check_int(trials, "trials", minimum=1),
        replicates=check_int(replicates, "replicates", minimum=1),
        chunk_size=None if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1),
        confidence=confidence,
        seed=seed,
    )


def step_count(study: Study, datasets: Sequence[str] | None = None) -> int:
    """The steps (compiled calls, progress bar steps) of ``study`` on ``datasets`` (default: all)."""
    names = [d for d in study.datasets if not datasets or d in datasets]
    return len(study.mechanisms) * math.prod(len(study.grid[p]) for p in study.static) * len(names)


def _cells(plan: _Plan):
    """The steps of a run, in order; each dataset is loaded once, when first needed."""
    loaded: dict[str, _Data] = {}
    for mechanism in plan.study.mechanisms:
        for static in plan.static_points:
            points = [{**pt, **{name: fn(**static, **pt) for name, fn in plan.study.derived.items()}}
                      for pt in plan.grid_points]
            grid = {p: jnp.asarray([pt[p] for pt in points]) for p in points[0]}
            for name in plan.datasets:
                if name not in loaded:
                    loaded[name] = _load_dataset(plan.study.datasets[name], plan.seed)
                yield _Cell(mechanism, name, loaded[name], static, points, grid)


def run_study(
    study: Study,
    *,
    trials: int = 1000,
    seed: int = 0,
    grid: Mapping[str, Sequence] | None = None,
    datasets: Sequence[str] | None = None,
    replicates: int = 1,
    confidence: float = 0.95,
    chunk_size: int | None = None,
    progress: bool | Progress | None = None,
    checkpoint: str | Path | None = None,
    on_error: str = "raise",
) -> StudyResult:
    """Runs ``study`` and returns its table, record and figure.

    Args:
      study: the :class:`Study`.
      trials: independent releases per cell (per mechanism, dataset and grid point).
      seed: the seed of the noise and of the built-in datasets.
      grid: replaces the study's values of these grid parameters (e.g. ``{"epsilon": [0.5, 2]}``).
      datasets: run only on these of the study's datasets.
      replicates: independent repetitions of the whole study; replicate ``r`` uses trials
        ``r*trials ... (r+1)*trials - 1`` of the same key stream (replicate 0 is the plain run),
        and the table gets a ``replicate`` column. Used to check that intervals cover.
      confidence: level of the confidence intervals.
      chunk_size: at most this many releases (trials x grid points) per compiled call; by default
        the chunks are sized from the device's memory and the compiled call's
        (the studies guide, "What a study costs").
      progress: a progress bar (``None``: on a terminal), or a :class:`Progress` to report to.
      checkpoint: a directory where each finished step (one mechanism on one dataset at one
        static point, all its traced grid points) is saved as it ends, atomically. A run that is
        stopped (Ctrl-C, a signal, a crash) and called again with the same checkpoint loads the
        finished steps instead of running them, and returns a result bit-identical to an
        uninterrupted run: each step's key is ``fold_in`` of the seed by the study, mechanism and
        dataset names, never the state of a running split. The files are JSON (reading them runs
        no code) with a fingerprint of what made each step (settings, seed, the source files of
        the mechanism, truth and metrics, the data, dpjax's code and the library versions, the
        backend, ``jax_enable_x64``): a step made otherwise raises
        :class:`~dpjax.studies.checkpoint.CheckpointMismatch` naming what differs, and a file that
        cannot be trusted (corrupt, truncated, another step's) is computed again, with a note.
      on_error: ``"raise"``: an exception of a step ends the run; ``"record"``: the step is left
        out, the run goes on with the other mechanisms and ``record["failures"]`` lists each
        failed step with the error and the file and line where it was raised (if every step
        fails, the first error is raised).

    Returns:
      A :class:`StudyResult`.

    Raises:
      dpjax.interrupt.Interrupted: the run was stopped by a signal (in ``dpjax study``); its
        ``result`` attribute holds the :class:`StudyResult` of the finished steps.
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    plan = _plan(study, trials=trials, seed=seed, grid=grid, datasets=datasets, replicates=replicates,
                 confidence=confidence, chunk_size=chunk_size)
    store = None if checkpoint is None else StepStore(checkpoint)
    owned = not isinstance(progress, Progress)
    bar = Progress(len(study.mechanisms) * len(plan.static_points) * len(plan.datasets), enabled=progress) \
        if owned else progress
    started, clock = time.time(), time.perf_counter()
    functions = TRIALS  # trial functions, shared by the datasets with the same fixed parameters and
    # kept across calls, so a second run of the same study compiles nothing
    rows, steps, failures, errors = [], [], [], []

    def result():
        import pandas as pd  # here, not at the top: the first step shows without waiting for pandas

        record = run_record(seed=seed, trials=plan.trials, replicates=plan.replicates, confidence=confidence,
                            chunk_size=plan.chunk_size, grid=plan.grid, datasets=plan.datasets,
                            started=started, wall_seconds=time.perf_counter() - clock, steps=steps)
        if failures:
            record["failures"] = failures
        return StudyResult(study, pd.DataFrame(rows), record)

    try:
        for cell in _cells(plan):
            interrupt.check()
            identity, made = (None, None) if store is None else _step_identity(plan, cell)
            saved = None if store is None else store.load(identity, made)
            if store is not None and store.unreadable:
                bar.write(f"dpjax: checkpoint file {store.unreadable.pop()} is unreadable or not this "
                          f"step's: computing {study.name}: {cell.label} again")
            label = f"{study.name}: {cell.label}" + (" (from the checkpoint)" if saved else "")
            bar.start(label)
            try:
                sink = lambda text, at=label: bar.status(at, text)  # noqa: E731 - this step's status line
                step, step_rows = saved or _step(plan, cell, functions, sink)
            except Exception as err:
                if on_error == "raise":
                    raise
                errors.append(err)
                failures.append({"mechanism": cell.mechanism.name, "dataset": cell.dataset, **cell.static,
                                 "error": f"{type(err).__name__}: {err}",
                                 "where": error_location(err, cell.mechanism.fn)})
                continue
            finally:
                bar.done(label)
            if saved:
                step = {**step, "from_checkpoint": True}
            elif store is not None:
                store.save(identity, made, step, step_rows)
            steps.append(step)
            rows += step_rows
    except interrupt.Interrupted as err:
        err.result = result()
        raise
    finally:
        if owned:
            bar.close()
    if errors and not rows:
        raise errors[0]
    return result()


def error_location(err: BaseException, fn: Callable | None = None) -> str:
    """``file:line`` where ``err`` was raised in the code of ``fn`` (the deepest such frame), else in
    the deepest frame outside dpjax, JAX and the installed packages, else the deepest frame."""
    import inspect
    import traceback

    if isinstance(err, SyntaxError) and err.filename:  # raised where the file was read, about the file
        return f"{err.filename}:{err.lineno}"
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "unknown"
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    library = (str(Path(__file__).resolve().parents[1]), "site-packages", "dist-packages", "/lib/python")
    mine = [f for f in frames if code is not None and f.filename == code.co_filename]
    theirs = [f for f in frames if not any(part in str(Path(f.filename).resolve()) for part in library)]
    frame = (mine or theirs or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"


def _step_identity(plan: _Plan, cell: _Cell) -> tuple[dict, dict]:
    """The checkpoint identity of a step (which step it is) and its fingerprint (what made it)."""
    identity = {"study": plan.study.name, "mechanism": cell.mechanism.name, "dataset": cell.dataset,
                "static": cell.static, "labels": list(cell.mechanism.labels)}
    fixed = {k: repr(v) for k, v in sorted(cell.mechanism.params.items())}
    settings = {"trials": plan.trials, "replicates": plan.replicates, "confidence": plan.confidence,
                "points": cell.points, "fixed": fixed}
    data = (cell.data.host, dict(cell.data.params))
    made = fingerprint(settings=settings, mechanism=cell.mechanism.fn, truth=plan.study.truth,
                       metrics=plan.study.metrics, data=data, seed=plan.seed)
    return identity, made


def _trial_key(seed: int, *names: str):
    """The key of a step: ``fold_in`` of the seed's key by each of ``names`` (study, mechanism, dataset)
    in turn, each by the first 64 bits of its own sha256 (two 32-bit words): names are never joined
    into one string, so two steps share keys only if one of their names shares a 64-bit digest."""
    import hashlib

    key = jax.random.key(seed)
    for name in names:
        digest = hashlib.sha256(name.encode()).digest()
        for word in (digest[:4], digest[4:8]):
            key = jax.random.fold_in(key, int.from_bytes(word, "big"))
    return key


def _step(plan: _Plan, cell: _Cell, functions, sink) -> tuple[dict, list[dict]]:
    """One mechanism on one dataset at one static point: its record and its table rows."""
    key = _trial_key(plan.seed, plan.study.name, cell.mechanism.name, cell.dataset)
    clock = time.perf_counter()
    with CompileCounter() as compiles:
        values, path, chunks = _run_step(plan, cell, functions, key, sink)
    step = {"mechanism": cell.mechanism.name, "dataset": cell.dataset, **cell.static, "path": path,
            "chunks": chunks, "compiles": compiles.count, "cache_hits": compiles.cache_hits,
            "compile_seconds": round(compiles.seconds, 3),
            "seconds": round(time.perf_counter() - clock, 3)}
    return step, _rows(plan, cell, values)


@dataclasses.dataclass
class _Trials:
    """The trial functions of one mechanism at one set of fixed parameters, shared by the datasets
    that have those parameters (so datasets of the same shapes share the compiled code)."""

    traced: Callable | None
    points: list[Callable]
    refusal: str | None = None


def _run_step(plan: _Plan, cell: _Cell, functions, key, sink):
    """Per-trial metric values (or summaries) ``{(label, metric): [trials x replicates, G]}``, how they
    were computed, and the record of each compiled chunk (compiled now, or from the cache)."""
    study, mechanism, fixed = plan.study, cell.mechanism, cell.fixed
    cache_key = (mechanism.fn, mechanism.labels, study.metrics, study.truth, content_key(fixed),
                 content_key(cell.points))
    if cache_key not in functions:
        traced = _trial_function(mechanism, study.metrics, study.truth, fixed, None) if cell.grid else None
        points = [_trial_function(mechanism, study.metrics, study.truth, fixed, p) for p in cell.points]
        functions[cache_key] = _Trials(traced, points)
    trials = functions[cache_key]
    if trials.traced is not None and trials.refusal is None:
        try:
            out, chunks = _sampled(trials.traced, key, plan, (cell.data.device, cell.grid),
                                   _per_chunk(len(cell.points), plan.chunk_size), sink, len(cell.points))
            return out, "one compiled call over the grid", [chunks]
        except _TRACED_REFUSALS as err:
            trials.refusal = str(err).splitlines()[0]
    runs = [_sampled(f, key, plan, (cell.data.device,), _per_chunk(1, plan.chunk_size), sink, 1)
            for f in trials.points]
    out = jax.tree.map(lambda *leaves: streaming.stack(leaves), *[o for o, _ in runs])
    chunks = [c for _, c in runs]
    if trials.refusal is not None:
        return out, f"one compile per grid point (refuses a traced grid: {trials.refusal})", chunks
    return out, "one compiled call", chunks


def _sampled(f, key, plan, args, chunk_size, sink, per_trial):
    """:func:`~dpjax.studies.runner.monte_carlo`'s outputs (or ``_streaming`` summaries) and chunk record."""
    status = ChunkStatus(sink, total := plan.trials * plan.replicates, per_trial)
    try:
        return run(f, key, total, args, chunk_size, None, status,
                    streaming.fold(plan.trials, plan.replicates, per_trial, len(plan.grid_points)))
    finally:
        status.close()


def _rows(plan: _Plan, cell: _Cell, values: dict) -> list[dict]:
    """The table rows of one step: every (label, metric) x statistic x grid point [x replicate]."""
    study, fixed, replicates, trials = plan.study, cell.fixed, plan.replicates, plan.trials
    rows = []
    for (label, metric_name), trial_values in values.items():
        metric = next(m for m in study.metrics if m.name == metric_name)
        theory_fn = cell.mechanism.theory.get((label, metric_name), cell.mechanism.theory.get(metric_name))
        laws = [None if theory_fn is None else theory_fn(cell.data.host, **fixed, **point)
                for point in cell.points]
        for statistic in metric.statistics:
            s = streaming.summarize(trial_values, trials, replicates, statistic, plan.confidence, metric.rate)
            theory = [theory_value(law, statistic) for law in laws]
            for r, g in itertools.product(range(replicates), range(len(cell.points))):
                row = {"study": study.name, "mechanism": label, "dataset": cell.dataset,
                       **cell.static, **cell.points[g]}
                row.update(metric=metric_name, statistic=statistic, estimate=s["estimate"][r, g],
                           se=s["se"][r, g], ci_low=s["ci_low"][r, g], ci_high=s["ci_high"][r, g],
                           theory=theory[g] if math.isfinite(theory[g]) else None, unit=metric.unit,
                           trials=trials, failure_rate=1 - s["n"][r, g] / trials,
                           ci_method=str(s["method"][r, g]))
                if replicates > 1:
                    row["replicate"] = r
                rows.append(row)
    order = ["study", "mechanism", "dataset", *study.grid, *study.derived, "metric", "statistic", "estimate",
             "se", "ci_low", "ci_high", "theory", "unit", "trials", "failure_rate", "ci_method", "replicate"]
    return [{k: row[k] for k in order if k in row} for row in rows]
