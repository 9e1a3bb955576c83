"""Defaults of :func:`dpjax.optax.quantile_clip` and ``dpjax train`` (no imports: the command line
reads them before JAX is loaded), chosen from the headline study of ``benchmarks/README.md``
("DP-SGD headline"): within 1 point of the best fixed clip of a sweep on Adult and MNIST-5k."""

__all__ = [
    "CLIP_EPSILON",
    "EVERY",
    "QUANTILE",
]

QUANTILE = 0.75
CLIP_EPSILON = 0.1
EVERY = 10
