"""Budgeting family: PIE-NI range counting (Liang and Yi, Algorithm 4) over 10^6 users, c = 64.

Synthetic users at 20 Gaussian hotspots (sd 3 km) in a 100 km square; the query counts the users in
a 2 km x 2 km square on a hotspot, in distance mode (each user releases a noisy signed distance);
rho = 1e-4 / m^2 per user, beta0 = 0.025, even split. Floor: one Gaussian per active user per round
(the sum of the active counts, read from the release). Peer: Algorithm 4 in NumPy with index
compaction (:func:`numpy_pie_ni`). The Monte Carlo batch is ``vmap`` over keys of the whole query;
its compaction becomes a select under ``vmap``, so it is not the fast path here (the row says so).
"""

from __future__ import annotations

import math

import numpy as np

from dpjax._src.budgeting.bounds import tail_radius
from dpjax._src.budgeting.pie import pie_ni
from dpjax._src.budgeting.splits import split_schedule
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled
from dpjax._src.tools.papers import hotspots

__all__ = [
    "BETA0",
    "HALF",
    "RHO",
    "ROUNDS",
    "box_distance",
    "cases",
    "numpy_pie_ni",
]

RHO, BETA0, HALF, ROUNDS = 1e-4, 0.025, 1000.0, 64


def box_distance(p: np.ndarray, center: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Signed distance of points ``p`` (n, 2) to the box ``center +- half`` (negative inside)."""
    q = np.abs(p - center) - half
    outside = np.sqrt(np.sum(np.maximum(q, 0) ** 2, axis=-1))
    return np.where(np.any(q > 0, axis=-1), outside, np.max(q, axis=-1))


def numpy_pie_ni(rng, x, rho, c, beta0, box, point):
    """Algorithm 4 in NumPy (float64) with active-set compaction; returns (count, rounds per user).

    ``point``: users release noisy 2-D points and the analyst scores the running mean against
    ``box``; otherwise ``x`` holds each user's signed distance and users release noisy distances.
    """
    frac, cum = split_schedule(c)
    center, half = box
    data = x if point else box_distance(x, center, half)[:, None]
    n = data.shape[0]
    active = np.arange(n)
    mean = np.zeros(data.shape, np.float64)
    rounds = np.zeros(n, np.int16)
    inside = 0
    for j in range(c):
        if active.size == 0:
            break
        lam = float(tail_radius(data.shape[1], beta0 / (c * active.size)))
        v = data[active] + rng.standard_normal(data[active].shape) / math.sqrt(2 * rho * frac[j])
        mean[active] += frac[j] / cum[j + 1] * (v - mean[active])
        rounds[active] = j + 1
        est = box_distance(mean[active], center, half) if point else mean[active, 0]
        h = lam / math.sqrt(2 * rho * cum[j + 1])
        to1, to0 = est < -h, est > h
        inside += int(to1.sum())
        active = active[~(to1 | to0)]
    est = box_distance(mean[active], center, half) if point else mean[active, 0]
    return inside + int((est < 0).sum()), rounds


def cases(scale: float) -> list[Case]:
    n = scaled(10**6, scale, 2_048)
    x, centres = hotspots(n)
    box = (centres[0], np.full(2, HALF, np.float32))
    phi = box_distance(x, *box).astype(np.float32)

    def numpy_peer():
        rng = np.random.default_rng(1)
        return lambda: numpy_pie_ni(rng, x, RHO, ROUNDS, BETA0, box, point=False)

    return [
        Case(
            family="budgeting",
            mechanism="budgeting.pie_ni",
            setting=f"{power_label(n)} users, distance mode, c={ROUNDS}, rho={RHO:g}/m^2, beta0={BETA0:g}",
            release=lambda key, scores: pie_ni(
                key, scores, rho=RHO, c=ROUNDS, beta0=BETA0, nu_low=0.0, nu_high=0.0
            ),
            args=(phi,),
            releases=scaled(4, scale, 2),
            bytes_per_release=128 * n,
            noise="gaussian",
            variates=lambda result: float(np.asarray(result.active_counts, np.float64).sum(-1).mean()),
            variates_note="one Gaussian per active user per round",
            peers=(Peer("NumPy loop (Algorithm 4, compaction)", "numpy", numpy_peer, note="float64"),),
        )
    ]
