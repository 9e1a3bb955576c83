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
:func:`~dpjax.studies.monte_carlo` to bound memory. Trial ``i`` of every cell uses
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

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from dpjax._src import interrupt
from dpjax._src.studies.checkpoint import StepStore
from dpjax._src.studies.definition import Study
from dpjax._src.studies.errors import error_location
from dpjax._src.studies.plan import cells, make_plan
from dpjax._src.studies.progress import Progress
from dpjax._src.studies.record import run_record
from dpjax._src.studies.result import StudyResult
from dpjax._src.studies.steps import compute_step, step_identity
from dpjax._src.studies.trial_cache import TRIALS

__all__ = ["run_study"]


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
        :class:`~dpjax.studies.CheckpointMismatch` naming what differs, and a file that
        cannot be trusted (corrupt, truncated, another step's) is computed again, with a note.
      on_error: ``"raise"``: an exception of a step ends the run; ``"record"``: the step is left
        out, the run goes on with the other mechanisms and ``record["failures"]`` lists each
        failed step with the error and the file and line where it was raised (if every step
        fails, the first error is raised).

    Returns:
      A :class:`StudyResult`.

    Raises:
      dpjax._src.interrupt.Interrupted: the run was stopped by a signal (in ``dpjax study``); its
        ``result`` attribute holds the :class:`StudyResult` of the finished steps.
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}.")
    plan = make_plan(study, trials=trials, seed=seed, grid=grid, datasets=datasets, replicates=replicates,
                 confidence=confidence, chunk_size=chunk_size)
    store = None if checkpoint is None else StepStore(checkpoint)
    owned = not isinstance(progress, Progress)
    bar = progress if isinstance(progress, Progress) else \
        Progress(len(study.mechanisms) * len(plan.static_points) * len(plan.datasets), enabled=progress)
    started, clock = time.time(), time.perf_counter()
    functions = TRIALS  # trial functions, shared by the datasets with the same fixed parameters and
    # kept across calls, so a second run of the same study compiles nothing
    rows: list[dict] = []
    steps: list[dict] = []
    failures: list[dict] = []
    errors: list[Exception] = []

    def result():
        import pandas as pd  # here, not at the top: the first step shows without waiting for pandas

        record = run_record(seed=seed, trials=plan.trials, replicates=plan.replicates, confidence=confidence,
                            chunk_size=plan.chunk_size, grid=plan.grid, datasets=plan.datasets,
                            started=started, wall_seconds=time.perf_counter() - clock, steps=steps)
        if failures:
            record["failures"] = failures
        return StudyResult(study, pd.DataFrame(rows), record)

    try:
        for cell in cells(plan):
            interrupt.check()
            saved = None
            if store is not None:
                identity, made = step_identity(plan, cell)
                saved = store.load(identity, made)
            if store is not None and store.unreadable:
                bar.write(f"dpjax: checkpoint file {store.unreadable.pop()} is unreadable or not this "
                          f"step's: computing {study.name}: {cell.label} again")
            label = f"{study.name}: {cell.label}" + (" (from the checkpoint)" if saved else "")
            bar.start(label)
            try:
                sink = lambda text, at=label: bar.status(at, text)  # noqa: E731 - this step's status line
                step, step_rows = saved or compute_step(plan, cell, functions, sink)
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

