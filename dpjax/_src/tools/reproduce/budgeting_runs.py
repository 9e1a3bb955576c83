"""The experiments of ``dpjax reproduce budgeting`` (Liang and Yi, "Adaptive Privacy Budgeting", §7):
range counting, Gaussian KDE, kNN and multiple range counts, each PIE kernel against its one-shot
baseline, batched over keys (see :mod:`dpjax._src.tools.reproduce.budgeting`)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.accounting.per_user import PerUserLedger
from dpjax._src.budgeting.kde import kde, kde_baseline
from dpjax._src.budgeting.knn import knn, knn_baseline
from dpjax._src.budgeting.multi_query import run_multi_query
from dpjax._src.budgeting.range_count import range_count, range_count_baseline
from dpjax._src.budgeting.splits import split_schedule
from dpjax._src.tools.reproduce.result import subkey

__all__ = [
    "BANDWIDTH",
    "BETA0",
    "HALF",
    "MODES",
    "RHOS",
    "kde_experiment",
    "knn_experiment",
    "label",
    "multi_query_experiment",
    "range_experiment",
]


BETA0, HALF, BANDWIDTH = 0.025, 1000.0, 500.0


RHOS = (1e-6, 1e-5, 1e-4, 1e-3)
MODES = {"point": "0", "distance": "1"}


def label(prefix, mode, c):
    return prefix + MODES[mode] + ("" if c is None else f"-c{c}")


def _saving(res, c):
    return 1 - jnp.mean(res.rounds) / c


def _batched(private, baseline, c, query: str, **fixed):
    """``jit(vmap over keys)`` of ``(keys, x, rho (n,), q) -> (release, savings)``: the PIE kernel
    ``private`` with ``c`` rounds, or for ``c=None`` the one-shot ``baseline`` (no savings); ``q`` is
    passed as the keyword ``query``."""

    def one(key, x, rho, q):
        kwargs = {query: q, **fixed}
        if c is None:
            return baseline(key, x, rho=rho, **kwargs), jnp.float32(0)
        release, res = private(key, x, rho=rho, c=c, beta0=BETA0, **kwargs)
        return release, _saving(res, c)

    return jax.jit(jax.vmap(one, in_axes=(0, None, None, None)))


@functools.cache
def _range_fn(mode, c):
    half = np.full(2, HALF, np.float32)
    return _batched(range_count, range_count_baseline, c, "center", half_widths=half, mode=mode)


@functools.cache
def _kde_fn(mode, c):
    return _batched(kde, kde_baseline, c, "p", bandwidth=BANDWIDTH, mode=mode)


@functools.cache
def _knn_fn(mode, c, k):
    return _batched(knn, knn_baseline, c, "p", k=k, mode=mode)


def _single_query(fn, keys, x, rhos, queries, error):
    """{rho: (errors, savings)} over keys x queries (the same keys for every method: paired)."""
    out = {}
    for rho in rhos:
        rvec = np.full(x.shape[0], rho, np.float32)
        errs, savs = [], []
        for query in queries:
            value, saving = (np.asarray(a) for a in fn(keys, x, rvec, query))
            errs.append(error(value, query))
            savs.append(np.broadcast_to(saving, (keys.shape[0],)))
        out[rho] = (np.concatenate(errs), np.concatenate(savs))
    return out


def range_experiment(key, x, centres, reps, cs):
    truth = {tuple(c): int(np.sum(np.all(np.abs(x - c) < HALF, axis=1))) for c in centres}
    centres = [c for c in centres if truth[tuple(c)] > 0]

    def error(count, centre):
        return np.abs(count - truth[tuple(centre)]) / truth[tuple(centre)]

    keys = jax.random.split(key, reps)
    return {
        (mode, c): _single_query(_range_fn(mode, c), keys, x, RHOS, centres, error)
        for mode in MODES
        for c in (None, *cs)
    }


def kde_experiment(key, x, points, reps, c):
    def truth(p):
        return float(np.mean(np.exp(-np.sum((x - p) ** 2, axis=1) / (2 * BANDWIDTH**2))))

    truths = {tuple(p): truth(p) for p in points}
    keys = jax.random.split(key, reps)
    return {
        (mode, cc): _single_query(
            _kde_fn(mode, cc), keys, x, RHOS, points, lambda v, p: np.abs(v - truths[tuple(p)])
        )
        for mode in MODES
        for cc in (None, c)
    }


def knn_experiment(key, points, reps, rhos, ks, cs, queries):
    rng = np.random.default_rng(0)
    chosen = rng.choice(points.shape[0], queries, replace=False)
    candidates = np.delete(points, chosen, axis=0)
    query_points = points[chosen]

    def error(indices, p, k):
        dist = np.linalg.norm(candidates - p, axis=1)
        best = np.sort(dist)[:k].sum()
        return (dist[indices].sum(axis=1) - best) / best

    keys = jax.random.split(key, reps)
    # Both baselines; iterative elimination with distance privatization only (the paper's trends for
    # kNN compare BM1 with BM0 and PM1 with BM1; PM0 in 784 dimensions is by far the costliest).
    cells = [(mode, None, k) for k in ks for mode in MODES] + [("distance", c, k) for k in ks for c in cs]
    return {
        (mode, c, k): _single_query(
            _knn_fn(mode, c, k), keys, candidates, rhos, query_points, lambda i, p, k=k: error(i, p, k)
        )
        for mode, c, k in cells
    }


@functools.cache
def _multi_fn(c):
    half = np.full(2, HALF, np.float32)

    def one(key, x, r, centre):
        count, res = range_count(
            key, x, rho=r, center=centre, half_widths=half, c=c, beta0=BETA0, mode="distance"
        )
        return count, res.rounds

    return jax.jit(one)


def multi_query_experiment(key, x, centres, reps, ms, budget, c, min_queries=0):
    """{m: (Algorithm 3 errors, uniform B/m errors)} over ``max(reps, min_queries // m)`` repetitions."""
    _, cumfrac = split_schedule(c)
    rng = np.random.default_rng(5)
    out = {}
    for m in ms:
        steps = [x]
        for _ in range(m - 1):
            steps.append((steps[-1] + rng.normal(0, 500, x.shape)).astype(np.float32))
        which = rng.integers(0, len(centres), m)
        truths = [int(np.sum(np.all(np.abs(steps[i] - centres[which[i]]) < HALF, axis=1))) for i in range(m)]
        errors = {}
        for adaptive in (True, False):
            per_rep = []
            for rep in range(max(reps, min_queries // m)):

                def psa(key, query, r, steps=steps, which=which):
                    count, rounds = _multi_fn(c)(key, steps[query - 1], r, centres[which[query - 1]])
                    return int(count), rounds, cumfrac

                ledger = PerUserLedger(budget, n=x.shape[0])
                answers, _ = run_multi_query(subkey(key, m, rep), psa, ledger, m, adaptive=adaptive)
                per_rep.append(
                    np.mean([abs(a - t) / t for a, t in zip(answers, truths, strict=True) if t > 0])
                )
            errors[adaptive] = np.asarray(per_rep)
        out[m] = (errors[True], errors[False])
    return out
