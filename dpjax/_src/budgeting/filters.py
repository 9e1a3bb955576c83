"""Per-user privacy filters as arrays (Liang and Yi, Algorithm 1, eqs. 7 and 10, Thms 4.4 and 4.5).

Each user ``i`` carries ``(budget_i, spent_i, halted_i)``. A request ``R_i`` is handled as in
Algorithm 1, run at every user at once:

* halted users release NULL and are charged 0 (once HALT, always HALT);
* ``R_i = 0`` releases NULL and charges 0 (the user stays CONT);
* otherwise CONT iff ``spent_i + R_i <= budget_i`` (eq. 7; the candidate cost is included in the
  check), in which case the user releases and is charged ``R_i``; else the user halts.

With CGP costs (``R = rho`` of a Gaussian release, eq. 9) this gives (B, Lambda)-CGP per user under
any analyst-chosen stopping time (Thm 4.4); with pure-GP costs (eq. 8) (B, 0, Lambda)-GP. The
approximate-GP filter of eq. (10) is the same rule against the capacity ``rho*(B, delta, Lambda)``
(:func:`approx_gp_capacity`), which gives (B, delta, Lambda)-GP (Thm 4.5).

The host-side :class:`dpjax.accounting.PerUserLedger` applies the same rule in float64 to
whole queries; these array versions run inside kernels and simulations, where budgets and requests
may be traced. Invalid traced input never lets a user release more: a traced budget that is not
> 0 (or NaN) and a traced request that is negative or NaN make the state's float fields NaN, and a
NaN budget or spend fails every later check (the user releases nothing more).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src.accounting.per_user import approx_gp_epsilon, approx_gp_rho_star
from dpjax._src.host_checks import TracedParameterError, check_same_shape, float_dtype, is_traced
from dpjax._src.validation import Checks


class FilterState(NamedTuple):
    """Per-user filter state: (n,) ``budget``, (n,) ``spent`` and (n,) bool ``halted``."""

    budget: jax.Array
    spent: jax.Array
    halted: jax.Array


def init_filter(budget: ArrayLike) -> FilterState:
    """A fresh filter state (nothing spent, nobody halted) for per-user ``budget`` > 0.

    ``budget`` may be traced; then a budget that is not > 0 or not finite makes ``budget`` and
    ``spent`` NaN (a concrete one raises ``ValueError``).

    Example:
      >>> state = init_filter(jnp.full(3, 1e-4))
      >>> state.spent.tolist()
      [0.0, 0.0, 0.0]
    """
    checks = Checks()
    budget = checks.array(budget, "budget", ndim=1)
    if is_traced(budget):
        checks.record(budget > 0, "budget must be > 0 for every user.")
    elif not bool(jnp.all(budget > 0)):
        raise ValueError("budget must be > 0 for every user.")
    budget = budget.astype(float_dtype(budget))
    return checks.guard(FilterState(budget, jnp.zeros_like(budget), jnp.zeros(budget.shape, dtype=bool)))


def filter_step(state: FilterState, request: ArrayLike) -> tuple[jax.Array, FilterState]:
    """One Algorithm 1 step at every user: returns ``(released, new_state)``.

    ``released[i]`` is True iff user ``i`` answers (and is charged ``request[i]``). Pure and
    jit/vmap-friendly; requests must be finite and >= 0: a concrete bad request raises
    ``ValueError``, a traced one releases nothing for that user (NaN and negative requests are
    never > 0) and makes the new state's ``budget`` and ``spent`` NaN, so nobody releases again.
    """
    checks = Checks()
    request = checks.array(request, "request", ndim=1, nonnegative=True).astype(state.spent.dtype)
    check_same_shape(request, "request", state.budget, "budget")
    fits = state.spent + request <= state.budget
    released = ~state.halted & (request > 0) & fits
    halted = state.halted | ((request > 0) & ~fits)
    spent = jnp.where(released, state.spent + request, state.spent)
    return released, checks.guard(FilterState(state.budget, spent, halted))


def approx_gp_capacity(budget_epsilon: ArrayLike, delta: float, lam: float) -> np.ndarray:
    """The CGP capacity ``rho*`` of the eq. (10) filter for approximate-GP budgets (float64, host).

    ``min_{s>1} max(g_delta(s) sqrt(sum r), s Lambda sum r) <= B`` iff ``sum r <= rho*(B)``, because
    the left side is non-decreasing in ``sum r``. Lambda must be finite (with Lambda = infinity use
    the CGP filter, Thm 4.4).

    Example:
      >>> cap = approx_gp_capacity(np.array([1.0]), 1e-6, 1.0)
      >>> bool(approx_gp_epsilon(cap[0], 1e-6, 1.0) <= 1.0)
      True
    """
    return np.asarray(approx_gp_rho_star(np.asarray(budget_epsilon, dtype=np.float64), delta, lam))


def approx_gp_filter_step(
    state: FilterState, request: ArrayLike, delta: float, lam: float
) -> tuple[jax.Array, FilterState]:
    """Algorithm 1 with the eq. (10) filter; ``state.budget`` is in epsilon units, charges in rho.

    Host side for the budget: the capacity ``rho*(B, delta, Lambda)`` is solved in float64 on the
    host, so ``state.budget``, ``delta`` and ``lam`` must be concrete. Inside ``jit`` compute
    :func:`approx_gp_capacity` once outside and run :func:`filter_step` against it (the request
    may then be traced).
    """
    if is_traced(state.budget) or is_traced(delta) or is_traced(lam):
        raise TracedParameterError(
            "approx_gp_filter_step needs a concrete budget, delta and lam: the capacity is solved on "
            "the host; use filter_step with approx_gp_capacity(...) inside jit."
        )
    capacity = jnp.asarray(approx_gp_capacity(np.asarray(state.budget), delta, lam), state.spent.dtype)
    released, inner = filter_step(FilterState(capacity, state.spent, state.halted), request)
    return released, FilterState(state.budget, inner.spent, inner.halted)


__all__ = [
    "FilterState",
    "approx_gp_capacity",
    "approx_gp_epsilon",
    "approx_gp_filter_step",
    "filter_step",
    "init_filter",
]
