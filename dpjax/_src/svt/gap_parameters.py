"""The parameters of Sparse-Vector-with-Gap and its adaptive version (Ding, Wang, Zhang and Kifer
2019, Algorithms 1 and 2): their checks, the default ``theta`` and the split of epsilon between the
threshold and the query noises (see :mod:`dpjax._src.svt.gap`)."""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_epsilon, check_int, float_dtype, is_traced
from dpjax._src.validation import Checks

__all__ = [
    "CheckedGapParameters",
    "GapBudget",
    "GapParameters",
    "check_parameters",
    "default_theta",
    "gap_budget",
    "working_budget",
]


class GapBudget(NamedTuple):
    """The budget split of Algorithm 2, line 2, and the noise scales it implies.

    Python floats for concrete parameters; scalars of the parameters' dtype when any is traced.
    """

    epsilon: float | jax.Array
    c: int
    eps0: float | jax.Array
    eps1: float | jax.Array
    eps2: float | jax.Array
    threshold_scale: float | jax.Array
    middle_scale: float | jax.Array
    top_scale: float | jax.Array
    sigma: float | jax.Array


class GapParameters(NamedTuple):
    """Algorithm 2's privacy parameters as given (``c`` and ``monotonic``, static, travel apart):
    checked by :func:`check_parameters` into :class:`CheckedGapParameters`, then split by
    :func:`_split` into a :class:`GapBudget`.

    Attributes:
      epsilon: the total budget (> 0 once checked).
      theta: the threshold share in (0, 1), or ``None`` for :func:`default_theta`.
      sigma: the top-branch margin, >= 0 or ``math.inf``; ``None`` for the default,
        ``4 sqrt(2) / eps2`` times the sensitivity (:func:`sparse_vector_with_gap`, which has no top
        branch, passes ``None`` and never reads it).
      sensitivity: the per-query sensitivity (> 0 once checked).

    Any of them may be traced.
    """

    epsilon: ArrayLike
    theta: ArrayLike | None
    sigma: ArrayLike | None
    sensitivity: ArrayLike


class CheckedGapParameters(NamedTuple):
    """:class:`GapParameters` after :func:`check_parameters`: valid when concrete (traced ones are
    recorded in the ``Checks``), ``theta`` filled in. Python numbers when concrete, else scalars."""

    epsilon: float | jax.Array
    theta: float | jax.Array
    sigma: float | jax.Array | None
    sensitivity: float | jax.Array


def default_theta(c: int, *, monotonic: bool) -> float:
    """The threshold share of Lyu, Su and Li (2017): ``1/(1 + (2c)^(2/3))``, or ``1/(1 + c^(2/3))``
    for monotonic queries (Ding, Wang, Zhang, Kifer 2019, Sec. 6.1; it minimizes the variance of the gap)."""
    c = check_int(c, "c", minimum=1)
    return 1.0 / (1.0 + float(c if monotonic else 2 * c) ** (2.0 / 3.0))


def _check_sigma(checks: Checks, sigma):
    """``sigma`` of Algorithm 2: ``None`` (the default), a real >= 0, or +inf (no top branch)."""
    if sigma is None:
        return None
    if is_traced(sigma):
        sigma = jnp.asarray(sigma)
        if sigma.ndim != 0:
            raise ValueError(f"sigma must be a scalar, got shape {sigma.shape}.")
        if not jnp.issubdtype(sigma.dtype, jnp.floating):
            sigma = sigma.astype(float_dtype())
        checks.record(sigma >= 0, "sigma must be >= 0 (math.inf disables the top branch).")
        return sigma
    # numbers.Real: typeshed's stub has none of the protocols NumPy's stubs take
    scalar = isinstance(sigma, numbers.Real | np.ndarray | jax.Array) and (
        np.shape(sigma) == ()  # type: ignore[arg-type]
    )
    if scalar and sigma == math.inf:
        return math.inf
    return check_epsilon(sigma, "sigma", allow_zero=True)


def check_parameters(
    checks: Checks, params: GapParameters, c: int, monotonic: bool
) -> tuple[CheckedGapParameters, int]:
    """Validates Algorithm 2's parameters (eagerly when concrete, in ``checks`` when traced) and
    ``c``; fills in the default ``theta``."""
    epsilon = checks.epsilon(params.epsilon)
    c = check_int(c, "c", minimum=1)
    theta = default_theta(c, monotonic=monotonic) if params.theta is None else params.theta
    theta = checks.probability(theta, "theta", open_low=True, open_high=True)
    sensitivity = checks.positive(params.sensitivity, "sensitivity")
    return CheckedGapParameters(epsilon, theta, _check_sigma(checks, params.sigma), sensitivity), c


def _split(params: CheckedGapParameters, c: int, monotonic: bool) -> GapBudget:
    """Algorithm 2, line 2, in the arithmetic of the checked parameters (Python floats, or jnp
    scalars of one dtype): the one formula behind :func:`gap_budget` and the kernels."""
    epsilon, theta, sigma, sensitivity = params
    eps0 = theta * epsilon
    eps1 = (1.0 - theta) * epsilon / c
    eps2 = eps1 / 2.0
    if sigma is None:
        sigma = 4.0 * math.sqrt(2.0) / eps2 * sensitivity
    width = (1.0 if monotonic else 2.0) * sensitivity
    return GapBudget(epsilon, c, eps0, eps1, eps2, sensitivity / eps0, width / eps1, width / eps2, sigma)


def working_budget(dtype, params: CheckedGapParameters, c: int, monotonic: bool) -> GapBudget:
    """The budget of the checked ``params`` in the kernel's dtype."""
    working = CheckedGapParameters._make(None if v is None else jnp.asarray(v, dtype) for v in params)
    return _split(working, c, monotonic)


def gap_budget(
    epsilon: ArrayLike,
    c: int,
    *,
    theta: ArrayLike | None = None,
    monotonic: bool = False,
    sigma: ArrayLike | None = None,
    sensitivity: ArrayLike = 1.0,
) -> GapBudget:
    """Validates the parameters of Algorithm 2 and returns its budgets, noise scales and ``sigma``.

    ``sigma`` defaults to ``4*sqrt(2)/eps2`` times the sensitivity (two standard deviations of
    ``Lap(2/eps2)``, footnote 5, kept for the monotonic variant as in the paper); ``math.inf``
    disables the top branch.

    ``epsilon``, ``theta``, ``sigma`` and ``sensitivity`` may be traced: the budget is then computed
    with jnp in their dtype by the same formula (in float64 the same numbers to 1 ulp), and its
    float fields are NaN where a traced value is invalid. With concrete values it is computed in
    Python floats (float64), as the accountant wants; ``c`` and ``monotonic`` are static.
    """
    checks = Checks()
    params, c = check_parameters(checks, GapParameters(epsilon, theta, sigma, sensitivity), c, monotonic)
    budget = _split(params, c, monotonic)
    if not checks.traced:
        return budget._replace(sigma=float(budget.sigma))
    # c (static) out of the guard's reach: None only inside this expression
    return checks.guard(budget._replace(c=None))._replace(c=c)  # type: ignore[arg-type]
