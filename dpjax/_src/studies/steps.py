"""One step of a study run (a mechanism on a dataset at a static point): its key, checkpoint identity,
compiled calls and record."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import jax

from dpjax._src.host_checks import TracedParameterError
from dpjax._src.studies import streaming
from dpjax._src.studies.checkpoint import fingerprint
from dpjax._src.studies.compiles import CompileCounter
from dpjax._src.studies.plan import Cell, Plan, per_chunk
from dpjax._src.studies.rows import table_rows
from dpjax._src.studies.runner import run
from dpjax._src.studies.status import ChunkStatus
from dpjax._src.studies.trial_cache import content_key
from dpjax._src.studies.trials import trial_function

__all__ = ["compute_step", "step_identity", "trial_key"]


# A mechanism's refusal of a traced grid parameter: dpjax's own, and JAX's when the mechanism converts
# a tracer to a Python number, a bool or a NumPy array.
_TRACED_REFUSALS = (
    TracedParameterError,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)


def step_identity(plan: Plan, cell: Cell) -> tuple[dict, dict]:
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


def trial_key(seed: int, *names: str):
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


def compute_step(plan: Plan, cell: Cell, functions, sink) -> tuple[dict, list[dict]]:
    """One mechanism on one dataset at one static point: its record and its table rows."""
    key = trial_key(plan.seed, plan.study.name, cell.mechanism.name, cell.dataset)
    clock = time.perf_counter()
    with CompileCounter() as compiles:
        values, path, chunks = _run_step(plan, cell, functions, key, sink)
    step = {"mechanism": cell.mechanism.name, "dataset": cell.dataset, **cell.static, "path": path,
            "chunks": chunks, "compiles": compiles.count, "cache_hits": compiles.cache_hits,
            "compile_seconds": round(compiles.seconds, 3),
            "seconds": round(time.perf_counter() - clock, 3)}
    return step, table_rows(plan, cell, values)


@dataclasses.dataclass
class _Trials:
    """The trial functions of one mechanism at one set of fixed parameters, shared by the datasets
    that have those parameters (so datasets of the same shapes share the compiled code)."""

    traced: Callable | None
    points: list[Callable]
    refusal: str | None = None


def _run_step(plan: Plan, cell: Cell, functions, key, sink):
    """Per-trial metric values (or summaries) ``{(label, metric): [trials x replicates, G]}``, how they
    were computed, and the record of each compiled chunk (compiled now, or from the cache)."""
    study, mechanism, fixed = plan.study, cell.mechanism, cell.fixed
    cache_key = (mechanism.fn, mechanism.labels, study.metrics, study.truth, content_key(fixed),
                 content_key(cell.points))
    if cache_key not in functions:
        traced = trial_function(mechanism, study.metrics, study.truth, fixed, None) if cell.grid else None
        points = [trial_function(mechanism, study.metrics, study.truth, fixed, p) for p in cell.points]
        functions[cache_key] = _Trials(traced, points)
    trials = functions[cache_key]
    if trials.traced is not None and trials.refusal is None:
        try:
            out, chunks = _sampled(trials.traced, key, plan, (cell.data.device, cell.grid),
                                   per_chunk(len(cell.points), plan.chunk_size), sink, len(cell.points))
            return out, "one compiled call over the grid", [chunks]
        except _TRACED_REFUSALS as err:
            trials.refusal = str(err).splitlines()[0]
    runs = [_sampled(f, key, plan, (cell.data.device,), per_chunk(1, plan.chunk_size), sink, 1)
            for f in trials.points]
    out = jax.tree.map(lambda *leaves: streaming.stack(leaves), *[o for o, _ in runs])
    chunks = [c for _, c in runs]
    if trials.refusal is not None:
        return out, f"one compile per grid point (refuses a traced grid: {trials.refusal})", chunks
    return out, "one compiled call", chunks


def _sampled(f, key, plan, args, chunk_size, sink, per_trial):
    """:func:`~dpjax.studies.monte_carlo`'s outputs (or :mod:`dpjax._src.studies.streaming`
    summaries) and chunk record."""
    status = ChunkStatus(sink, total := plan.trials * plan.replicates, per_trial)
    try:
        return run(f, key, total, args, chunk_size, None, status,
                    streaming.fold(plan.trials, plan.replicates, per_trial, len(plan.grid_points)))
    finally:
        status.close()

