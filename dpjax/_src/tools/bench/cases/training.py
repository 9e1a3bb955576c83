"""Training family: the DP-SGD aggregation of :func:`dpjax.optax.dp_aggregate` (Abadi et al. 2016)
on given per-example gradients, against ``optax.contrib.differentially_private_aggregate``.

The same work on both sides: clip each example's gradient to global L2 norm 1, sum, add Gaussian
noise of standard deviation ``sigma * 1`` to every coordinate (sigma = 1.1), one release per call,
jitted, with the gradients given (their computation is not timed). Two batches of 256 examples at
scale 1: the per-example gradients of a 128-256-10 MLP (35,594 parameters) and of the small MNIST
CNN of :func:`dpjax._src.tools.train.models.cnn` (9,098). dpjax also drops non-finite rows, moves the
clip norm (fixed here) and draws tail-exact noise; optax returns NaN for a non-finite row. Floor: one
Gaussian per parameter.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax._src.optax.transform import dp_aggregate
from dpjax._src.tools.bench import peers
from dpjax._src.tools.bench.case import Case, scaled

__all__ = [
    "BATCH",
    "CLIP",
    "SHAPES",
    "SIGMA",
    "cases",
    "gradients",
    "release",
]

SIGMA, CLIP, BATCH = 1.1, 1.0, 256
SHAPES = {
    "MLP 128-256-10": ((128, 256), (256,), (256, 10), (10,)),
    "CNN 8-16 (MNIST)": ((3, 3, 1, 8), (8,), (3, 3, 8, 16), (16,), (784, 10), (10,)),
}


def gradients(shapes, batch: int, seed: int = 0):
    """Per-example gradients with the given parameter shapes: Gaussian, scaled so that the median
    example's global norm is about 2 (about half the examples are clipped at norm 1)."""
    rng = np.random.default_rng(seed)
    size = sum(int(np.prod(s)) for s in shapes)
    scale = 2.0 / np.sqrt(size)
    return [jnp.asarray(rng.normal(size=(batch, *s)) * scale, jnp.float32) for s in shapes]


def release(key, grads):
    """One dp_aggregate release (fixed clip) on the given per-example gradients."""
    tx = dp_aggregate(SIGMA, CLIP, key, expected_batch_size=grads[0].shape[0])
    return tx.update(grads, tx.init(None))[0]


def cases(scale: float) -> list[Case]:
    batch = scaled(BATCH, scale, 8)
    rows = []
    for name, shapes in SHAPES.items():
        grads = gradients(shapes, batch)
        parameters = sum(int(np.prod(s)) for s in shapes)
        rows.append(
            Case(
                family="training",
                mechanism="optax.dp_aggregate",
                setting=f"{batch} examples of a {name} ({parameters:,} parameters), clip {CLIP:g}, "
                f"sigma {SIGMA:g}",
                release=release,
                args=(grads,),
                model=name,
                noise="gaussian",
                variates=float(parameters),
                variates_note="one Gaussian per parameter",
                peers=(peers.optax_contrib_aggregate(grads, CLIP, SIGMA),),
            )
        )
    return rows
