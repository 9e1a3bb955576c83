"""Privacy accounting of a DP-SGD run with :func:`dpjax.optax.dp_aggregate`, through ``dp_accounting``.

What is claimed. Neighbouring datasets differ by adding or removing one example. Each step Poisson-
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
  hence ``mu``-GDP with ``mu = 2 Phi^-1(e^eps/(1 + e^eps))`` (:func:`pure_dp_to_gdp`), and the step is
  dominated by the Gaussian with ``sigma_t = (sigma^-2 + mu^2)^-1/2`` (GDP composition); other steps
  have ``sigma_t = sigma``.

A Poisson-subsampled mechanism whose add and remove neighbours are dominated by a Gaussian pair is
dominated by the subsampled Gaussian pair (Zhu, Dong, Wang 2022, Thm. 10), and dominating pairs
compose adaptively, so the run is accounted as the composition of
``PoissonSampledDpEvent(sampling_rate, GaussianDpEvent(sigma_t))`` over the steps: with
dp_accounting's PLD accountant (default) or its RDP accountant (a cross-check; RDP is looser). Both
are upper bounds on the epsilon of the run at the given delta.

Not claimed: anything about batches drawn other than by Poisson sampling (e.g. shuffling into
fixed-size batches), or about a run whose padded batch was truncated (see ``dpjax.optax.train``).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from dpjax.optax.clip import as_strategy
from dpjax.validation import check_choice, check_epsilon, check_int, check_positive, check_probability

ACCOUNTANTS = ("pld", "rdp")
PLD_DISCRETIZATION = 1e-4  # dp_accounting's default value_discretization_interval
CALIBRATION_DISCRETIZATION = 1e-3


def pure_dp_to_gdp(epsilon: float) -> float:
    """The smallest mu such that every epsilon-DP mechanism is mu-GDP: ``2 Phi^-1(e^eps/(1+e^eps))``.

    An epsilon-DP mechanism's trade-off curve is at least ``f_eps(a) = max(0, 1 - e^eps a,
    e^-eps (1 - a))`` (Kairouz, Oh, Viswanath 2015; Dong, Roth, Su 2022, §2.3). The Gaussian curve
    ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)`` is convex, so it lies below ``f_eps``'s two chords once it
    passes through their common point ``a = 1/(1 + e^eps)``, which fixes mu as above. Host-side.

    Example:
      >>> round(pure_dp_to_gdp(1.0), 4)
      1.232
    """
    epsilon = check_epsilon(epsilon)
    return -2.0 * NormalDist().inv_cdf(1.0 / (1.0 + math.exp(epsilon)))


def _validated(steps, sampling_rate, noise_multiplier):
    steps = check_int(steps, "steps", minimum=0)
    sampling_rate = check_probability(sampling_rate, "sampling_rate", open_low=True)
    noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
    return steps, sampling_rate, noise_multiplier


def dp_event(*, steps: int, sampling_rate: float, noise_multiplier: float, clip):
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


def _accountant(name: str, discretization: float):
    import dp_accounting

    check_choice(name, "accountant", ACCOUNTANTS)
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
    clip,
    accountant: str = "pld",
    pld_discretization: float = PLD_DISCRETIZATION,
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

    Returns:
      epsilon (a float, 0.0 for zero steps).

    Example:
      >>> eps = training_epsilon(1e-5, steps=1000, sampling_rate=0.01, noise_multiplier=1.1, clip=1.0)
    """
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    event = dp_event(steps=steps, sampling_rate=sampling_rate, noise_multiplier=noise_multiplier, clip=clip)
    acc = _accountant(accountant, check_positive(pld_discretization, "pld_discretization"))
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def noise_multiplier_for_epsilon(
    epsilon: float, delta: float, *, steps: int, sampling_rate: float, clip, accountant: str = "pld"
) -> float:
    """The smallest noise multiplier sigma whose run has ``training_epsilon <= epsilon`` at ``delta``.

    Calibrated with ``dp_accounting.calibrate_dp_mechanism`` (root finding on sigma to about 1e-5
    relative) on a PLD grid of 1e-3, then confirmed within budget by :func:`training_epsilon` with
    the default grid. Raises ``ValueError`` when the clip strategy alone (sigma -> infinity) already
    spends more than ``epsilon``.

    Example:
      >>> sigma = noise_multiplier_for_epsilon(3.0, 1e-5, steps=1000, sampling_rate=0.01, clip=1.0)
    """
    import dp_accounting

    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    steps = check_int(steps, "steps", minimum=1)
    sampling_rate = check_probability(sampling_rate, "sampling_rate", open_low=True)
    strategy = as_strategy(clip)

    def eps_at(sigma, discretization=CALIBRATION_DISCRETIZATION):
        return training_epsilon(
            delta,
            steps=steps,
            sampling_rate=sampling_rate,
            noise_multiplier=sigma,
            clip=strategy,
            accountant=accountant,
            pld_discretization=discretization,
        )

    ceiling = 1e6
    if eps_at(ceiling) >= epsilon:
        raise ValueError(
            f"the clip strategy alone spends epsilon >= {eps_at(ceiling):.4g} at delta {delta:g} over "
            f"{steps} steps, more than the target {epsilon:g}: lower its own privacy cost."
        )
    # An explicit bracket [hi/2, hi] (epsilon decreases in sigma), so no sigma far below the answer
    # (whose PLD would be huge) is ever evaluated.
    hi = 1.0
    while eps_at(hi) > epsilon:
        hi *= 2
    while hi > 1e-3 and eps_at(hi / 2) <= epsilon:
        hi /= 2
    sigma = dp_accounting.calibrate_dp_mechanism(
        lambda: _accountant(accountant, CALIBRATION_DISCRETIZATION),
        lambda sigma: dp_event(
            steps=steps, sampling_rate=sampling_rate, noise_multiplier=sigma, clip=strategy
        ),
        epsilon,
        delta,
        dp_accounting.ExplicitBracketInterval(hi / 2, hi),
        tol=1e-5 * hi,
    )
    # Calibrated on a coarse PLD grid (fast); confirm on the default grid.
    while eps_at(sigma, PLD_DISCRETIZATION) > epsilon:
        sigma *= 1 + 1e-4
    return float(sigma)


def spent_epsilon(state, delta: float, *, sampling_rate: float, accountant: str = "pld") -> float:
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
