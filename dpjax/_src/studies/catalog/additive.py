"""Studies of the additive mechanisms: a clipped mean with Laplace or Gaussian noise.

The mean of ``n`` values clipped to the dataset's bounds ``[lower, upper]`` moves by at most
``(upper - lower) / n`` when one value is swapped, so the Laplace mechanism of that scale over
epsilon is epsilon-DP, and Gaussian noise of ``sigma = (upper - lower) / (n epsilon)`` is
``epsilon^2/2``-zCDP (Bun and Steinke 2016, Prop. 1.6), the zCDP that epsilon-DP implies. Their
absolute errors have closed laws: exponential (mean = scale) and half-normal (mean = sigma sqrt(2/pi)).
"""

from __future__ import annotations

import jax.numpy as jnp

from dpjax._src.additive import gaussian_mechanism, laplace_mechanism
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register
from dpjax._src.studies.theory import Exponential, HalfNormal

__all__: list[str] = []

_BOUNDS = {"lower": -100.0, "upper": 100.0}  # the bounds of the built-in normal and uniform data


def _sensitivity(x, lower, upper):
    return (upper - lower) / x.size


def _clipped_mean(x, lower, upper, **_):
    return jnp.clip(x, lower, upper).mean()


def _laplace(key, x, epsilon, lower, upper):
    return laplace_mechanism(key, _clipped_mean(x, lower, upper), epsilon,
                             sensitivity=_sensitivity(x, lower, upper))


def _gaussian(key, x, epsilon, lower, upper):
    sensitivity = _sensitivity(x, lower, upper)
    return gaussian_mechanism(key, _clipped_mean(x, lower, upper), sensitivity / epsilon,
                              sensitivity=sensitivity)


register(Study(
    "clipped_mean",
    family="additive",
    description="mean of 10,000 values clipped to [-100, 100]: Laplace (ε-DP) vs Gaussian (ε²/2-zCDP)",
    mechanisms=[
        Mechanism("Laplace (ε-DP)", _laplace, theory={
            "abs_error": lambda x, epsilon, lower, upper: Exponential(_sensitivity(x, lower, upper) / epsilon)
        }),
        Mechanism("Gaussian (ε²/2-zCDP)", _gaussian, theory={
            "abs_error": lambda x, epsilon, lower, upper: HalfNormal(_sensitivity(x, lower, upper) / epsilon)
        }),
    ],
    datasets={"normal": ("normal", _BOUNDS), "uniform": ("uniform", _BOUNDS)},
    grid={"epsilon": EPSILONS},
    truth=_clipped_mean,
    metrics=[metrics.abs_error(("mean", "q95"), description="absolute error of the released mean")],
))
