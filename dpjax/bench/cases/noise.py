"""Noise family: dpjax's tail-exact samplers (``mode="high"``) against the plain ``jax.random`` floor.

``dpjax.noise`` spends two 32-bit words and two logarithms per variate so that the tails are exact
to about 44 scale units; the ratio to the floor is the price of those tails, paid by every
mechanism that draws its noise from ``dpjax.noise``. Peer: NumPy's ``Generator`` (PCG64) samplers.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax import noise
from dpjax.bench.case import Case, Peer, power_label, scaled

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


def cases(scale: float) -> list[Case]:
    n = scaled(10**6, scale, 10_000)
    return [
        Case(
            family="noise",
            mechanism=f"noise.{kind}",
            setting=f"{power_label(n)} float32 variates, mode='high'",
            release=lambda key, kind=kind: noise.sample(kind, key, (n,), 1.0, jnp.float32),
            releases=0,
            noise=kind,
            variates=float(n),
            variates_note="the variates drawn",
            peers=(_numpy_peer(kind, n),),
        )
        for kind in ("laplace", "gumbel", "exponential", "gaussian")
    ]
