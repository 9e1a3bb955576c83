"""Privacy accounting of a DP-SGD run with :func:`dpjax.optax.dp_aggregate`, through ``dp_accounting``.

What is claimed. Neighboring datasets differ by adding or removing one example. Each step Poisson-
samples a batch (every example independently with probability ``sampling_rate``), clips every
example's gradient to the current clip norm ``C_t`` and releases the clipped sum plus
``N(0, (sigma C_t)^2)`` per coordinate (L2 sensitivity ``C_t``: the Gaussian of noise multiplier
sigma), and the clip strategy's release on the same batch. Each step, given everything released
before it, is dominated by one Gaussian of noise multiplier ``sigma_t`` (the strategy's
:meth:`accounting_steps`):

* fixed clip: ``sigma_t = sigma``;
* geometric clip (Andrew et al. 2021): the sum and the noised centred count form one Gaussian
  mechanism, ``sigma_t = (sigma^-2 + z_b^-2)^-1/2`` exactly;
* quantile clip: at estimation steps the UQE estimate is ``epsilon``-DP (Durfee 2023, Lemma B.2),
  hence ``mu``-GDP with ``mu = 2 Phi^-1(e^eps/(1 + e^eps))`` (:func:`dpjax.optax.pure_dp_to_gdp`),
  and the step is dominated by the Gaussian with ``sigma_t = (sigma^-2 + mu^2)^-1/2`` (GDP
  composition); other steps have ``sigma_t = sigma``.

A Poisson-subsampled mechanism whose add and remove neighbors are dominated by a Gaussian pair is
dominated by the subsampled Gaussian pair (Zhu, Dong, Wang 2022, Thm. 10), and dominating pairs
compose adaptively, so the run is accounted as the composition of
``PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(sigma_t))`` over the steps: with
dp_accounting's PLD accountant (default) or its RDP accountant (a cross-check; RDP is looser). Both
are upper bounds on the epsilon of the run at the given delta.

Truncated Poisson sampling (a fixed-shape sample of ``padded_size`` slots,
:func:`dpjax.optax.poisson_sample`): given ``padded_size`` and ``dataset_size``,
:func:`training_epsilon` and :func:`noise_multiplier_for_epsilon` charge the truncation probability
``eta`` (:func:`dpjax.optax.truncation_probability`) to delta: the run is ``(epsilon, delta_P + eta (1 +
e^epsilon))``-DP when the Poisson run is ``(epsilon, delta_P)``-DP (:mod:`dpjax._src.optax.sampling`).

Not claimed: anything about batches drawn other than by Poisson sampling (e.g. shuffling into
fixed-size batches), or about a padded run accounted without its ``padded_size``.
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import Literal, TypeAlias, get_args

from jax.typing import ArrayLike

from dpjax._src.accounting.guarantees import ZCDP, DpEvent
from dpjax._src.host_checks import check_choice, check_epsilon, check_int, check_positive, check_probability
from dpjax._src.optax.clip import ClipStrategy, as_strategy
from dpjax._src.optax.sampling import truncation_delta
from dpjax._src.optax.transform import DPAggregateState

__all__ = [
    "AccountantName",
    "calibration_discretization",
    "dp_event",
    "noise_multiplier_for_epsilon",
    "spent_epsilon",
    "training_epsilon",
    "training_guarantee",
]

AccountantName: TypeAlias = Literal["pld", "rdp"]
"""dp_accounting's accountant for DP-SGD: privacy loss distributions (tight) or Renyi DP."""
_ACCOUNTANTS: tuple[AccountantName, ...] = get_args(AccountantName)
_PLD_DISCRETIZATION = 1e-4  # dp_accounting's default value_discretization_interval
_CALIBRATION_RELATIVE_GRID = 1e-4  # the calibration's PLD grid, relative to the target epsilon
_MINIMALITY = 1e-3  # a calibrated sigma lowered by this fraction exceeds the target


def _validated(steps, sampling_rate, noise_multiplier):
    steps = check_int(steps, "steps", minimum=0)
    sampling_rate = check_probability(sampling_rate, "sampling_rate", open_low=True)
    noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
    return steps, sampling_rate, noise_multiplier


def dp_event(
    *, steps: int, sampling_rate: float, noise_multiplier: float, clip: ClipStrategy | ArrayLike
) -> DpEvent:
    """The ``dp_accounting`` event of a run (see the module docstring for what it claims).

    Args:
      steps: number of steps, >= 0.
      sampling_rate: Poisson sampling probability of each example per step, in (0, 1].
      noise_multiplier: sigma of :func:`dpjax.optax.dp_aggregate`, > 0.
      clip: the clip strategy (or a number, for a fixed clip).

    Returns:
      A ``dp_accounting.ComposedDpEvent`` of ``SelfComposedDpEvent(PoissonSampledDpEvent(...))``.
    """
    import dp_accounting

    steps, sampling_rate, noise_multiplier = _validated(steps, sampling_rate, noise_multiplier)
    parts = [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(sigma)), count
        )
        for count, sigma in as_strategy(clip).accounting_steps(noise_multiplier, steps)
        if count > 0
    ]
    return dp_accounting.ComposedDpEvent(parts)


def training_guarantee(
    *, steps: int, sampling_rate: float, noise_multiplier: float, clip: ClipStrategy | ArrayLike
) -> ZCDP:
    """The run as a guarantee for a :class:`~dpjax.accounting.Accountant`, with its event attached.

    ``ZCDP(sum_t 1 / (2 sigma_t^2))``: each step is dominated by a Gaussian of noise multiplier
    ``sigma_t`` (the module docstring), hence ``1/(2 sigma_t^2)``-zCDP (Bun and Steinke 2016,
    Prop. 1.6; Renyi divergences shrink under the post-processing that domination means), and zCDP
    composes (Lemma 2.3); the amplification by sampling is not in this bound. The run's
    :func:`dp_event` (Poisson-subsampled Gaussians) is attached, so an accountant's
    :meth:`~dpjax.accounting.Accountant.epsilon` composes the run exactly with dp_accounting's PLD,
    amplification included, beside the other releases on the same data.

    Example:
      >>> g = training_guarantee(steps=100, sampling_rate=0.01, noise_multiplier=1.0, clip=1.0)
      >>> g.rho
      50.0
    """
    steps, sampling_rate, noise_multiplier = _validated(steps, sampling_rate, noise_multiplier)
    parts = as_strategy(clip).accounting_steps(noise_multiplier, steps)
    rho = sum(count / (2 * sigma**2) for count, sigma in parts)
    event = dp_event(steps=steps, sampling_rate=sampling_rate, noise_multiplier=noise_multiplier, clip=clip)
    return ZCDP(rho, event=event)


def _accountant(name: str, discretization: float):
    import dp_accounting

    check_choice(name, "accountant", _ACCOUNTANTS)
    relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if name == "pld":
        return dp_accounting.pld.PLDAccountant(relation, value_discretization_interval=discretization)
    return dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)


def training_epsilon(
    delta: float,
    *,
    steps: int,
    sampling_rate: float,
    noise_multiplier: float,
    clip: ClipStrategy | ArrayLike,
    accountant: AccountantName = "pld",
    pld_discretization: float = _PLD_DISCRETIZATION,
    padded_size: int | None = None,
    dataset_size: int | None = None,
) -> float:
    """The epsilon at ``delta`` of a whole DP-SGD run with :func:`dpjax.optax.dp_aggregate`.

    Composes the Poisson-subsampled Gaussian sums and the clip strategy's releases (see the module
    docstring) with dp_accounting's PLD accountant (``accountant="pld"``, the default) or its RDP
    accountant (``"rdp"``, a looser cross-check). Host-side: every argument must be concrete.

    Args:
      delta: target delta, in (0, 1).
      steps, sampling_rate, noise_multiplier, clip: as in :func:`dp_event`.
      accountant: "pld" or "rdp".
      pld_discretization: the PLD accountant's ``value_discretization_interval`` (dp_accounting's
        default 1e-4; coarser is faster and still a pessimistic upper bound).
      padded_size, dataset_size: for a truncated Poisson sample (:func:`dpjax.optax.poisson_sample`),
        both or neither: the smallest epsilon with ``delta_P(epsilon) + eta (1 + e^epsilon) <= delta``
        (``delta_P``: the accountant's delta of the Poisson run, ``eta``:
        :func:`dpjax.optax.truncation_probability`), to a relative 1e-6 above it.

    Returns:
      epsilon (a float, 0.0 for zero steps).

    Example:
      >>> eps = training_epsilon(1e-5, steps=1000, sampling_rate=0.01, noise_multiplier=1.1, clip=1.0)
    """
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    truncation = _truncation(steps, sampling_rate, padded_size, dataset_size)
    event = dp_event(steps=steps, sampling_rate=sampling_rate, noise_multiplier=noise_multiplier, clip=clip)
    acc = _accountant(accountant, check_positive(pld_discretization, "pld_discretization"))
    acc.compose(event)
    epsilon = float(acc.get_epsilon(delta))
    if truncation is None or steps == 0:
        return epsilon

    def fits(e):
        return acc.get_delta(e) + truncation(e) <= delta

    hi = max(epsilon, 1e-3)
    while not fits(hi):
        if truncation(hi) >= delta:
            raise ValueError(
                f"truncating the samples at padded_size {padded_size} alone spends delta {delta:g}: pad "
                "more (dpjax.optax.padded_batch_size)."
            )
        epsilon, hi = hi, 2 * hi
    return _geometric_bisection(fits, epsilon, hi, 1 + 1e-6)[1]


def _truncation(steps, sampling_rate, padded_size, dataset_size):
    """``epsilon -> eta (1 + e^epsilon)`` of a truncated Poisson run (:func:`dpjax.optax.truncation_delta`),
    ``None`` without ``padded_size``; both sizes or neither."""
    if (padded_size is None) != (dataset_size is None):
        raise ValueError("give padded_size and dataset_size together (or neither).")
    if padded_size is None:
        return None
    return lambda epsilon: truncation_delta(
        dataset_size, sampling_rate=sampling_rate, steps=steps, padded_size=padded_size, epsilon=epsilon
    )


def calibration_discretization(epsilon: float) -> float:
    """The PLD grid :func:`noise_multiplier_for_epsilon` calibrates on: ``min(1e-4, 1e-4 epsilon)``.

    dp_accounting's PLD is pessimistic by up to about the grid interval per composed loss value; an
    absolute grid overstates a small epsilon (1000s of steps at epsilon 0.2: +0.3% at 1e-4, +28% at
    1e-3), so the grid is scaled to the target, and a calibration to 1e-3 in sigma is meaningful.
    """
    return min(_PLD_DISCRETIZATION, _CALIBRATION_RELATIVE_GRID * check_epsilon(epsilon))


def _geometric_bisection(fits, lo: float, hi: float, ratio: float) -> tuple[float, float]:
    """Narrows ``[lo, hi]`` (``fits(hi)``, not ``fits(lo)``) until ``hi / lo <= ratio``."""
    while hi / lo > ratio:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return lo, hi


def _bracket_near(fits, sigma: float, width: float) -> tuple[float, float]:
    """``[lo, hi]`` with ``fits(hi)`` and not ``fits(lo)``, widened geometrically from ``sigma``."""
    if fits(sigma):
        hi, lo = sigma, sigma * (1 - width)
        while fits(lo):
            hi, width = lo, 2 * width
            lo = hi * (1 - min(width, 0.5))
        return lo, hi
    lo, hi = sigma, sigma * (1 + width)
    while not fits(hi):
        lo, width = hi, 2 * width
        hi = lo * (1 + width)
    return lo, hi


def noise_multiplier_for_epsilon(
    epsilon: float,
    delta: float,
    *,
    steps: int,
    sampling_rate: float,
    clip: ClipStrategy | ArrayLike,
    accountant: AccountantName = "pld",
    pld_discretization: float | None = None,
    padded_size: int | None = None,
    dataset_size: int | None = None,
) -> float:
    """The smallest noise multiplier sigma whose run has ``training_epsilon <= epsilon`` at ``delta``.

    With ``padded_size`` and ``dataset_size`` (a truncated Poisson sample, :mod:`dpjax._src.optax.sampling`)
    the Poisson run is calibrated at ``delta - eta (1 + e^epsilon)``, so the truncated run is
    ``(epsilon, delta)``-DP; ``ValueError`` if the truncation alone spends delta.

    With ``eps(s) = training_epsilon(delta, ..., noise_multiplier=s, pld_discretization=grid)`` on the
    grid ``grid = calibration_discretization(epsilon)`` (or ``pld_discretization``), the result sigma
    satisfies ``eps(sigma) <= epsilon < eps(sigma (1 - 1e-3))``: within budget, and no more than 0.1%
    above the least noise the accountant allows. (Evaluate the run on the same grid: dp_accounting's
    default 1e-4 may overstate a small epsilon by more than that 0.1%.)

    The root is bracketed (from the RDP accountant's sigma) and bisected on a 10x coarser grid
    (fast), refined by one secant step in ``(log sigma, log eps)`` on the calibration grid, raised
    by 1e-4, and both conditions are checked (four evaluations on the fine grid); should a check
    fail, it is bracketed and bisected in log sigma on the calibration grid instead. Raises
    ``ValueError`` when the clip strategy alone (sigma -> infinity) already spends more than
    ``epsilon``.

    Example:
      >>> sigma = noise_multiplier_for_epsilon(3.0, 1e-5, steps=100, sampling_rate=0.01, clip=1.0)
    """
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    steps = check_int(steps, "steps", minimum=1)
    sampling_rate = check_probability(sampling_rate, "sampling_rate", open_low=True)
    truncation = _truncation(steps, sampling_rate, padded_size, dataset_size)
    charge = 0.0 if truncation is None else truncation(epsilon)
    if charge >= delta:
        raise ValueError(
            f"truncating the samples at padded_size {padded_size} spends all of delta {delta:g} at "
            f"epsilon {epsilon:g}: pad more (dpjax.optax.padded_batch_size)."
        )
    delta -= charge
    strategy = as_strategy(clip)
    if pld_discretization is None:
        grid = calibration_discretization(epsilon)
    else:
        grid = check_positive(pld_discretization, "pld_discretization")

    def spent(sigma, discretization=grid, accountant=accountant):
        return training_epsilon(
            delta,
            steps=steps,
            sampling_rate=sampling_rate,
            noise_multiplier=sigma,
            clip=strategy,
            accountant=accountant,
            pld_discretization=discretization,
        )

    def coarse(sigma):
        return spent(sigma, 10 * grid) <= epsilon

    def fine(sigma):
        return spent(sigma) <= epsilon

    ceiling = 1e6
    if not coarse(ceiling) and not fine(ceiling):  # the coarse grid is pessimistic: cheap check first
        raise ValueError(
            f"the clip strategy alone spends more than epsilon = {epsilon:g} at delta {delta:g} over "
            f"{steps} steps: lower its own privacy cost."
        )
    # Start from the RDP accountant's sigma (cheap; usually a little above PLD's) and walk in steps
    # of 20%, so that no sigma far below the answer (whose PLD is huge and slow) is evaluated.
    lo, hi = _bracket_near(coarse, min(_rdp_sigma(spent, epsilon, ceiling), ceiling), 0.2)
    _, rough = _geometric_bisection(coarse, lo, hi, 1 + 1e-3)
    sigma = _secant_root(spent, epsilon, min(rough, ceiling)) * (1 + _MINIMALITY / 10)
    if fine(sigma) and not fine(sigma * (1 - _MINIMALITY)):
        return float(sigma)
    lo, hi = _bracket_near(fine, sigma, 2e-3)  # the secant step missed: bisect (rare)
    while True:
        lo, hi = _geometric_bisection(fine, lo, hi, 1 + _MINIMALITY / 5)
        below = hi * (1 - _MINIMALITY)
        if not fine(below):
            return float(hi)
        hi = below  # the pessimistic estimate is not exactly monotone: keep narrowing below


@contextlib.contextmanager
def _quiet_absl():
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _rdp_sigma(spent, epsilon: float, ceiling: float) -> float:
    """The sigma at which the RDP accountant's epsilon meets ``epsilon``, to 1%: a starting point."""

    def fits(sigma):
        with _quiet_absl():  # dp_accounting's RDP warns about orders it drops at small sigma
            return spent(sigma, accountant="rdp") <= epsilon

    hi = 1.0
    while hi < ceiling and not fits(hi):
        hi *= 2
    while hi > 1e-3 and fits(hi / 2):
        hi /= 2
    return _geometric_bisection(fits, hi / 2, hi, 1.01)[1]


def _secant_root(spent, epsilon: float, sigma: float) -> float:
    """One secant step for ``spent(s) = epsilon`` in ``(log s, log spent)`` from ``sigma`` and a point
    0.2% away (towards the root); ``sigma`` itself if the two values coincide."""
    first = spent(sigma)
    other = sigma * (1 - 2e-3 if first <= epsilon else 1 + 2e-3)
    second = spent(other)
    if not (0 < first < math.inf and 0 < second < math.inf) or first == second:
        return sigma
    slope = (math.log(other) - math.log(sigma)) / (math.log(second) - math.log(first))
    return math.exp(math.log(sigma) + slope * (math.log(epsilon) - math.log(first)))


def spent_epsilon(
    state: DPAggregateState, delta: float, *, sampling_rate: float, accountant: AccountantName = "pld"
) -> float:
    """:func:`training_epsilon` of the steps a :class:`~dpjax.optax.DPAggregateState` has run.

    Reads the state's step count, noise multiplier and clip strategy (concrete values; pass the
    dp_aggregate entry of an ``optax.chain`` state, e.g. ``opt_state[0]``).
    """
    steps = int(state.step)
    return training_epsilon(
        delta,
        steps=steps,
        sampling_rate=sampling_rate,
        noise_multiplier=float(state.noise_multiplier),
        clip=state.clip,
        accountant=accountant,
    )
