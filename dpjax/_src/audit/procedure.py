"""The audit: run a mechanism many times on two neighbors and bound its privacy loss from below.

Procedure (after StatDP, Ding et al. CCS 2018, and dp_auditorium's event-based testers):

1. Run ``mechanism(key_i, x)`` and ``mechanism(key_i', x_prime)`` ``trials`` times each, ``vmap``-ed
   under ``jit`` in chunks (trial ``i`` uses ``fold_in(key_side, i)``, as :mod:`dpjax.studies` does).
2. *Selection* (first half of each sample): build the candidate events (:mod:`dpjax._src.audit.events`,
   or the user's ``events``), in both directions, and score each by an approximate lower bound on
   its privacy loss; keep the ``candidates`` best.
3. *Test* (second half, untouched by step 2): for each kept event ``E`` compute the Clopper–Pearson
   lower bound on ``P(E)`` and upper bound on ``Q(E)`` at level ``alpha / (2 m)`` each (``m`` = number
   of kept events: Bonferroni), and ``log((P_low - delta) / Q_high)``.
4. ``epsilon_lower_bound`` is the largest of these (at least 0); ``passed`` is
   ``epsilon_lower_bound <= epsilon``.

**False-alarm rate.** If the mechanism is (epsilon, delta)-DP on these neighbors, then for every
fixed event ``P(E) <= e^epsilon Q(E) + delta``; the events tested in step 3 are fixed given the
selection half, and by the union bound all 2m Clopper–Pearson bounds hold at once with
probability >= 1 - alpha. So a correct mechanism fails an audit with probability at most ``alpha``
(default 1e-3), whatever the number of trials or of candidate events; the Clopper–Pearson bounds
being conservative, the realized rate is lower (measured in ``tests/audit/test_audit.py``). When the user
gives at most ``candidates`` events, there is no selection step: all of them are tested, in both
directions, on all samples, with the Bonferroni factor ``2 * len(events)``.

An audit can only *refute* a claim: passing means no violation was found for these neighbors,
events and sample size. Its power depends on the neighbors: use the worst-case pairs of
:mod:`dpjax._src.audit.neighbors`.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.audit.binomial import loss_statistics
from dpjax._src.audit.events import Event, candidate_events, features
from dpjax._src.host_checks import check_epsilon, check_int, check_probability

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_TRIALS",
    "AuditResult",
    "TestedEvent",
    "audit",
]

DEFAULT_TRIALS = 500_000
DEFAULT_ALPHA = 1e-3


@dataclass(frozen=True)
class TestedEvent:
    """One event tested on the test sample, in one direction.

    ``direction`` is ``"x"`` when the inequality tested is ``P_x(E) <= e^eps P_x'(E) + delta`` and
    ``"x_prime"`` for the reverse. ``counts`` are ``(runs on the first input in E, runs on the second in
    E)`` in that direction, out of ``n`` runs each.
    """

    event: Event
    direction: str
    counts: tuple[int, int]
    n: int
    epsilon_lower_bound: float
    p_value: float


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes:
      epsilon_lower_bound: a lower confidence bound (level ``1 - alpha``) on the privacy loss of the
        mechanism at ``delta`` on these neighbors; 0 when no event shows any loss.
      event: the event achieving it (``None`` if no event was tested).
      passed: ``epsilon_lower_bound <= epsilon``.
      epsilon, delta, alpha, trials: the claim and the audit's parameters.
      direction, counts, n: see :class:`TestedEvent` (for ``event``).
      p_value: Bonferroni-corrected p-value of "the mechanism is (epsilon, delta)-DP", min over the
        tested events (small means a violation).
      tested: every tested event with its bound and p-value.
      seconds: wall-clock time of the audit; ``sampling_seconds`` the part spent running the
        mechanism (the rest is event search and bounds).
    """

    epsilon_lower_bound: float
    event: Event | None
    passed: bool
    epsilon: float
    delta: float
    alpha: float
    trials: int
    direction: str
    counts: tuple[int, int]
    n: int
    p_value: float
    tested: tuple[TestedEvent, ...]
    seconds: float
    sampling_seconds: float

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"audit {verdict}: epsilon >= {self.epsilon_lower_bound:.4f} (claimed {self.epsilon:g}, "
            f"delta {self.delta:g}) at level {1 - self.alpha:g}; event [{self.event}] "
            f"(direction {self.direction}, counts {self.counts} of {self.n}, p = {self.p_value:.3g})"
        )


def _approximate_bound(k_p, k_q, n, level, delta):
    """Cheap Wilson-score version of the loss bound, used only to rank candidate events."""
    import scipy.special  # here, not at import: loading scipy is slow

    z = math.sqrt(2.0) * float(scipy.special.erfcinv(2.0 * level))

    def wilson(k, sign):
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return np.clip(centre + sign * half, 0.0, 1.0)

    p_low, q_high = wilson(k_p, -1.0), wilson(k_q, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_low > delta, np.log(np.maximum(p_low - delta, 1e-300)) - np.log(q_high), -np.inf)


def _select(selection_x, selection_xp, events, candidates, level, delta):
    """Indices and directions of the ``candidates`` best-scoring events on the selection half."""
    if events is None:
        family = candidate_events(features(selection_x), features(selection_xp))
        count_x, count_xp, make = family.count_x, family.count_x_prime, family.event
    else:
        count_x = np.array([e(selection_x).sum() for e in events], np.float64)
        count_xp = np.array([e(selection_xp).sum() for e in events], np.float64)
        make = events.__getitem__
    n = jax.tree.leaves(selection_x)[0].shape[0]
    scores = np.concatenate(
        [
            _approximate_bound(count_x, count_xp, n, level, delta),
            _approximate_bound(count_xp, count_x, n, level, delta),
        ]
    )
    best = np.argsort(-scores, kind="stable")[:candidates]
    best = best[np.isfinite(scores[best])] if np.isfinite(scores[best]).any() else best[:1]
    size = count_x.size
    return [(make(int(i % size)), "x" if i < size else "x_prime") for i in best]


_COMPILED: OrderedDict = OrderedDict()
_CACHE_SIZE = 16


def _batched(mechanism, chunk_size):
    """``jit(vmap(mechanism))`` over ``chunk_size`` trial keys; the last few are kept (re-audits)."""
    cache_key = (mechanism, chunk_size)
    if cache_key in _COMPILED:
        _COMPILED.move_to_end(cache_key)
    else:

        @jax.jit
        def batched(side_key, begin, data):
            steps = begin + jnp.arange(chunk_size, dtype=jnp.uint32)
            keys = jax.vmap(lambda i: jax.random.fold_in(side_key, i))(steps)
            return jax.vmap(mechanism, in_axes=(0, None))(keys, data)

        _COMPILED[cache_key] = batched
        if len(_COMPILED) > _CACHE_SIZE:
            _COMPILED.popitem(last=False)
    return _COMPILED[cache_key]


def _sample(batched, data, key, trials, chunk_size):
    """``trials`` runs of ``mechanism(key_i, data)`` with ``key_i = fold_in(key, i)``, stacked as NumPy.

    ``data`` is an argument of the compiled function (not a closed-over constant), so the kernel's
    data work is done once per chunk and the mechanism's value checks on it are skipped (as under
    any ``jit``); its static checks (epsilon, shapes, dtypes) run when it is traced.
    """
    pieces = []
    for begin in range(0, trials, chunk_size):
        out = batched(key, jnp.uint32(begin), data)
        keep = min(chunk_size, trials - begin)
        pieces.append(jax.tree.map(lambda a, keep=keep: np.asarray(a[:keep]), out))
    return jax.tree.map(lambda *leaves: np.concatenate(leaves, axis=0), *pieces)


def audit(
    mechanism: Callable,
    x: Any,
    x_prime: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    events: Sequence[Event | Callable] | None = None,
    trials: int = DEFAULT_TRIALS,
    key: jax.Array | None = None,
    alpha: float = DEFAULT_ALPHA,
    candidates: int = 8,
    chunk_size: int = 16384,
) -> AuditResult:
    """Audits a claimed (epsilon, delta)-DP guarantee of ``mechanism`` on the neighbors x, x_prime.

    See the module docstring for the procedure and its false-alarm guarantee (at most ``alpha``).

    Args:
      mechanism: ``mechanism(key, data) -> pytree of arrays`` (fixed shapes, the same on both
        inputs), jit- and vmap-able in ``key``. Close over every parameter, e.g.
        ``lambda k, v: laplace_mechanism(k, v, 1.0)``. The automatic events cost time linear in the
        output's size: for outputs with hundreds of coordinates, reduce them in the wrapper or pass
        ``events``.
      x, x_prime: neighboring inputs under the mechanism's relation (any pytrees; they may differ
        in shape, e.g. for add/remove).
      epsilon: the claimed epsilon, >= 0.
      delta: the claimed delta, in [0, 1).
      events: optional events (each an :class:`Event` or a callable ``outputs -> bool[trials]``);
        by default the automatic families of :mod:`dpjax._src.audit.events`.
      trials: runs per input (half for selection, half for the test), >= 200.
      key: a ``jax.random`` key (default ``jax.random.key(0)``, so audits are reproducible).
      alpha: false-alarm probability bound, in (0, 1).
      candidates: number of events tested on the test half (the Bonferroni factor).
      chunk_size: runs per compiled ``vmap`` call (memory bound).

    Returns:
      An :class:`AuditResult`.

    Example:
      >>> from dpjax.additive import laplace_mechanism
      >>> result = audit(lambda k, v: laplace_mechanism(k, v, 1.0), 0.0, 1.0, epsilon=1.0)
      >>> result.passed
      True
    """
    start = time.perf_counter()
    epsilon = check_epsilon(epsilon, allow_zero=True)
    delta = check_probability(delta, "delta", open_high=True)
    trials = check_int(trials, "trials", minimum=200)
    alpha = check_probability(alpha, "alpha", open_low=True, open_high=True)
    candidates = check_int(candidates, "candidates", minimum=1)
    if not callable(mechanism):
        raise TypeError("mechanism must be callable as mechanism(key, data).")
    events = _as_events(events)
    key = jax.random.key(0) if key is None else key
    runs = _draw(mechanism, x, x_prime, key, trials, chunk_size)
    sampling_seconds = time.perf_counter() - start
    split = _split_runs(runs, events, candidates, alpha, delta)
    tested = _test_events(split, alpha, epsilon, delta)
    best = max(range(len(tested)), key=lambda i: tested[i].epsilon_lower_bound)
    lower_bound = max(0.0, tested[best].epsilon_lower_bound)
    return AuditResult(
        epsilon_lower_bound=lower_bound,
        event=tested[best].event,
        passed=lower_bound <= epsilon,
        epsilon=epsilon,
        delta=delta,
        alpha=alpha,
        trials=trials,
        direction=tested[best].direction,
        counts=tested[best].counts,
        n=tested[best].n,
        p_value=min(t.p_value for t in tested),
        tested=tested,
        seconds=time.perf_counter() - start,
        sampling_seconds=sampling_seconds,
    )


class _Runs(NamedTuple):
    """The mechanism's stacked outputs on the two neighbors (pytrees of NumPy arrays, trials first)."""

    on_x: object
    on_x_prime: object


class _Split(NamedTuple):
    """The test half of the runs and the (event, direction) pairs chosen on the selection half."""

    test_x: object
    test_x_prime: object
    chosen: list


def _as_events(events):
    """``None`` (automatic families) or a non-empty list of :class:`Event`."""
    if events is None:
        return None
    events = [e if isinstance(e, Event) else Event(getattr(e, "__name__", repr(e)), e) for e in events]
    if not events:
        raise ValueError("events must be None or a non-empty sequence.")
    return events


def _draw(mechanism, x, x_prime, key, trials, chunk_size) -> _Runs:
    """``trials`` runs on each neighbor (keys ``fold_in(key, 0)`` and ``fold_in(key, 1)``)."""
    batched = _batched(mechanism, min(chunk_size, trials))
    runs = _Runs(
        _sample(batched, x, jax.random.fold_in(key, 0), trials, chunk_size),
        _sample(batched, x_prime, jax.random.fold_in(key, 1), trials, chunk_size),
    )
    shapes = [jax.tree.map(lambda a: a.shape[1:], out) for out in runs]
    on_x, on_x_prime = jax.tree.structure(runs.on_x), jax.tree.structure(runs.on_x_prime)
    if on_x != on_x_prime or shapes[0] != shapes[1]:  # type: ignore[operator]  # jaxlib: no PyTreeDef stub
        raise ValueError(
            "the mechanism's outputs on x and x_prime must have the same structure and shapes, got "
            f"{shapes[0]} and {shapes[1]}."
        )
    return runs


def _split_runs(runs: _Runs, events, candidates, alpha, delta) -> _Split:
    """Given events that fit the budget are all tested on every run; otherwise the first half of the
    runs selects ``candidates`` (event, direction) pairs and the second half tests them."""
    if events is not None and len(events) <= candidates:
        return _Split(runs.on_x, runs.on_x_prime, [(e, d) for e in events for d in ("x", "x_prime")])
    half = jax.tree.leaves(runs.on_x)[0].shape[0] // 2

    def head(tree):
        return jax.tree.map(lambda a: a[:half], tree)

    def tail(tree):
        return jax.tree.map(lambda a: a[half:], tree)

    level = alpha / (2 * candidates)
    chosen = _select(head(runs.on_x), head(runs.on_x_prime), events, candidates, level, delta)
    return _Split(tail(runs.on_x), tail(runs.on_x_prime), chosen)


def _test_events(split: _Split, alpha, epsilon, delta) -> tuple[TestedEvent, ...]:
    """Clopper-Pearson loss bounds and Bonferroni-corrected p-values of the chosen events."""
    n = jax.tree.leaves(split.test_x)[0].shape[0]
    level = alpha / (2 * len(split.chosen))
    flat_x, flat_xp = features(split.test_x), features(split.test_x_prime)
    counts = []
    for event, direction in split.chosen:
        in_x = int(event.evaluate(split.test_x, flat_x).sum())
        in_xp = int(event.evaluate(split.test_x_prime, flat_xp).sum())
        counts.append((in_x, in_xp) if direction == "x" else (in_xp, in_x))
    k_p = np.array([c[0] for c in counts], np.float64)
    k_q = np.array([c[1] for c in counts], np.float64)
    bounds, p_values = loss_statistics(k_p, n, k_q, n, level, epsilon, delta)
    p_values = np.minimum(1.0, len(split.chosen) * p_values)
    return tuple(
        TestedEvent(e, d, c, n, float(b), float(p))
        for (e, d), c, b, p in zip(split.chosen, counts, bounds, p_values, strict=True)
    )
