"""Noise family: dpjax's tail-exact samplers (``mode="high"``) against the plain ``jax.random`` floor.

``dpjax.noise`` spends two 32-bit words and two logarithms per variate so that the tails are exact
to about 44 scale units; the ratio to the floor is the price of those tails, paid by every
mechanism that draws its noise from ``dpjax.noise``. Peer: NumPy's ``Generator`` (PCG64) samplers.

The exact integer samplers (``noise.discrete_laplace``, ``noise.discrete_gaussian``; CKS 2020) are
timed against the float floor of the same law's continuous cousin and against OpenDP's exact
samplers (``make_laplace`` / ``make_gaussian`` on an int64 vector, the ``bench`` extra), one vector
per release; ``additive.discrete_laplace_mechanism`` on a histogram is the vmapped Monte Carlo row.
"""

from __future__ import annotations

import importlib

import jax.numpy as jnp
import numpy as np

from dpjax._src import additive, noise
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled

__all__ = [
    "cases",
]

_NUMPY = {
    "laplace": "laplace",
    "gumbel": "gumbel",
    "exponential": "exponential",
    "gaussian": "standard_normal",
}


def _numpy_peer(kind: str, n: int) -> Peer:
    def single():
        draw = getattr(np.random.default_rng(0), _NUMPY[kind])
        return lambda: draw(size=n).astype(np.float32)

    return Peer(f"NumPy Generator.{_NUMPY[kind]}", "numpy", single, note="PCG64, float64 cast to float32")


def _opendp_exact_peer(kind: str, n: int, parameter: float) -> Peer:
    """OpenDP's exact integer sampler on an int64 vector of zeros (``make_laplace`` /
    ``make_gaussian`` over ``atom_domain(T="i64")``: discrete Laplace / discrete Gaussian)."""
    zeros = np.zeros(n, np.int64)

    def single():
        dp = importlib.import_module("opendp.prelude")
        dp.enable_features("contrib")
        domain = dp.vector_domain(dp.atom_domain(T="i64"))
        if kind == "laplace":
            meas = dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=parameter)
        else:
            meas = dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=parameter)
        return lambda: meas(zeros)

    name = f"OpenDP make_{kind} (int64: exact discrete)"
    return Peer(name, "opendp", single, note="int64 ndarray of zeros")


def _exact_path(values: int) -> str:
    """The exact samplers' path for ``values`` per key: the fast pass above 512 values, the state
    machine otherwise (:mod:`dpjax.exact_noise`, its module docstring)."""
    return "fast pass" if values > 512 else "state machine"


def _exact_cases(scale: float) -> list[Case]:
    n = scaled(10**5, scale, 256)
    bins, releases = scaled(1000, scale, 200), scaled(1000, scale, 10)
    histogram = jnp.asarray(np.random.default_rng(0).poisson(50, bins), jnp.int32)
    rows = [
        Case(
            family="noise",
            mechanism=f"noise.discrete_{kind}",
            setting=f"{power_label(n)} int32 variates, {label} 10 (exact, CKS 2020)",
            release=lambda key, sampler=sampler: sampler(key, 10, (n,)),
            releases=0,
            methods=(_exact_path(n), ""),
            noise=kind,
            variates=float(n),
            variates_note="the variates drawn",
            peers=(_opendp_exact_peer(kind, n, 10.0),),
        )
        for kind, label, sampler in (
            ("laplace", "scale", noise.discrete_laplace),
            ("gaussian", "sigma", noise.discrete_gaussian),
        )
    ]
    rows.append(
        Case(
            family="noise",
            mechanism="additive.discrete_laplace_mechanism",
            setting=f"histogram of {power_label(bins)} int32 counts, epsilon 1 (exact), vmapped over keys",
            release=lambda key, counts: additive.discrete_laplace_mechanism(key, counts, 1),
            args=(histogram,),
            releases=releases,
            methods=(_exact_path(bins), _exact_path(bins)),
            bytes_per_release=bins * 64,
            noise="laplace",
            variates=float(bins),
            variates_note="one variate per count",
        )
    )
    return rows


def cases(scale: float) -> list[Case]:
    n = scaled(10**6, scale, 10_000)
    return _exact_cases(scale) + [
        Case(
            family="noise",
            mechanism=f"noise.{kind}",
            setting=f"{power_label(n)} float32 variates, mode='high'",
            release=lambda key, kind=kind: noise.sample(kind, key, (n,), 1.0, jnp.float32),
            releases=0,
            method="mode='high'",
            methods=("mode='high'", ""),
            noise=kind,
            variates=float(n),
            variates_note="the variates drawn",
            peers=(_numpy_peer(kind, n),),
        )
        for kind in ("laplace", "gumbel", "exponential", "gaussian")
    ]
