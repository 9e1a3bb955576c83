"""Peer libraries (the ``bench`` extra: OpenDP, diffprivlib, python-dp), imported only when timed.

Each constructor returns a :class:`~dpjax._src.tools.bench.case.Peer` that uses the library's fastest
documented input path: NumPy arrays (OpenDP converts a float64/int64 ndarray without a Python
loop; a list is converted element by element), the domain that matches the data (sized vectors for
quantiles, integer counts for top-k), and, where the library has a reusable mechanism object,
that object for repeated releases. Peers make one release per call (none has a batched path), so
their Monte Carlo cost per release is their repeated-release cost.
"""

from __future__ import annotations

import importlib
import importlib.metadata

import numpy as np

from dpjax._src.tools.bench.case import Peer

__all__ = [
    "DISTRIBUTIONS",
    "diffprivlib_exponential",
    "diffprivlib_quantile",
    "diffprivlib_sum",
    "opendp_noisy_max",
    "opendp_noisy_top_k",
    "opendp_quantile",
    "opendp_sum",
    "optax_contrib_aggregate",
    "pydp_bounded_sum",
    "pydp_percentile",
    "version",
]

DISTRIBUTIONS = {
    "numpy": "numpy",
    "opendp": "opendp",
    "diffprivlib": "diffprivlib",
    "pydp": "python-dp",
    "optax": "optax",
}


def version(library: str) -> str | None:
    """The installed version of a peer library, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTIONS.get(library, library))
    except importlib.metadata.PackageNotFoundError:
        return None


def _opendp():
    dp = importlib.import_module("opendp.prelude")
    dp.enable_features("contrib")
    return dp


# ----------------------------------------------------------------------------------------- selection


def _opendp_gumbel_selection(constructor: str, counts: np.ndarray, **params) -> Peer:
    """OpenDP's ``constructor`` (``make_noisy_top_k`` or ``make_noisy_max``) on int64 ndarray counts
    (monotonic L-inf distance) with a zCDP output measure: Gumbel noise, as dpjax."""
    data = np.asarray(counts, np.int64)

    def single():
        dp = _opendp()
        meas = getattr(dp.m, constructor)(
            dp.vector_domain(dp.atom_domain(T="i64")),
            dp.linf_distance(T="i64", monotonic=True),
            dp.zero_concentrated_divergence(),
            **params,
        )
        return lambda: meas(data)

    return Peer(f"OpenDP {constructor} (zCDP: Gumbel)", "opendp", single, note="int64 ndarray counts")


def opendp_noisy_top_k(counts: np.ndarray, k: int, scale: float) -> Peer:
    """OpenDP ``make_noisy_top_k`` (Gumbel noise: the one-shot top-k of the exponential mechanism)."""
    return _opendp_gumbel_selection("make_noisy_top_k", counts, k=k, scale=scale)


def opendp_noisy_max(counts: np.ndarray, scale: float) -> Peer:
    """OpenDP ``make_noisy_max`` (Gumbel noise: the exponential mechanism)."""
    return _opendp_gumbel_selection("make_noisy_max", counts, scale=scale)


def diffprivlib_exponential(utilities: np.ndarray, epsilon: float) -> Peer:
    """diffprivlib ``mechanisms.Exponential`` (monotonic): built per release, or reused."""
    data = np.asarray(utilities, np.float64).tolist()  # the documented input: a list of utilities

    def build():
        mechanisms = importlib.import_module("diffprivlib.mechanisms")
        return mechanisms.Exponential(epsilon=epsilon, sensitivity=1.0, utility=data, monotonic=True)

    def single():
        return lambda: build().randomise()

    def repeated():
        mech = build()
        return mech.randomise

    return Peer(
        "diffprivlib mechanisms.Exponential",
        "diffprivlib",
        single,
        repeated,
        note="list of utilities; repeated releases reuse the mechanism object",
    )


# ----------------------------------------------------------------------------------------- quantiles


def opendp_quantile(x: np.ndarray, q: float, epsilon: float, candidates: np.ndarray) -> Peer:
    """OpenDP ``make_private_quantile`` on a sized float64 vector (bounded: the candidates' range)."""
    data = np.asarray(x, np.float64)

    def single():
        dp = _opendp()
        meas = dp.m.make_private_quantile(
            dp.vector_domain(dp.atom_domain(T=float, nan=False), size=data.size),
            dp.symmetric_distance(),
            dp.max_divergence(),
            candidates=[float(c) for c in candidates],
            alpha=q,
            scale=2.0 / epsilon,
        )
        return lambda: meas(data)

    return Peer(
        "OpenDP make_private_quantile",
        "opendp",
        single,
        note=f"float64 ndarray, {len(candidates)} candidates on [{candidates[0]:g}, {candidates[-1]:g}]",
    )


def diffprivlib_quantile(x: np.ndarray, q: float, epsilon: float, bounds: tuple[float, float]) -> Peer:
    """diffprivlib ``tools.quantile`` (bounded)."""
    data = np.asarray(x, np.float64)

    def single():
        tools = importlib.import_module("diffprivlib.tools")
        return lambda: tools.quantile(data, q, epsilon=epsilon, bounds=bounds)

    return Peer("diffprivlib tools.quantile", "diffprivlib", single, note=f"float64 ndarray, bounds {bounds}")


def pydp_percentile(x: np.ndarray, q: float, epsilon: float, bounds: tuple[float, float]) -> Peer:
    """python-dp ``Percentile`` (bounded), a fresh algorithm object per release (it is single-use)."""
    data = np.asarray(x, np.float64)

    def single():
        laplacian = importlib.import_module("pydp.algorithms.laplacian")

        def call():
            algorithm = laplacian.Percentile(
                epsilon=epsilon, percentile=q, lower_bound=bounds[0], upper_bound=bounds[1], dtype="float"
            )
            return algorithm.quick_result(data)

        return call

    return Peer("python-dp Percentile", "pydp", single, note=f"float64 ndarray, bounds {bounds}")


# ----------------------------------------------------------------------------------------- aggregates

_GIVEN_BOUND = "bounds given (no private bound): less work than the row's mechanism"


def opendp_sum(x: np.ndarray, bound: float, epsilon: float) -> Peer:
    """OpenDP clamp >> sum >> Laplace on float64 data with a given bound."""
    data = np.asarray(x, np.float64)

    def single():
        dp = _opendp()
        meas = (
            dp.t.make_clamp(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                dp.symmetric_distance(),
                bounds=(0.0, bound),
            )
            >> dp.t.then_sum()
            >> dp.m.then_laplace(scale=bound / epsilon)
        )
        return lambda: meas(data)

    return Peer("OpenDP clamp >> sum >> laplace", "opendp", single, note=f"float64 ndarray; {_GIVEN_BOUND}")


def diffprivlib_sum(x: np.ndarray, bound: float, epsilon: float) -> Peer:
    """diffprivlib ``tools.sum`` with given bounds."""
    data = np.asarray(x, np.float64)

    def single():
        tools = importlib.import_module("diffprivlib.tools")
        return lambda: tools.sum(data, epsilon=epsilon, bounds=(0.0, bound))

    return Peer("diffprivlib tools.sum", "diffprivlib", single, note=f"float64 ndarray; {_GIVEN_BOUND}")


def pydp_bounded_sum(x: np.ndarray, bound: float, epsilon: float) -> Peer:
    """python-dp ``BoundedSum`` with given bounds, a fresh algorithm object per release."""
    data = np.asarray(x, np.float64)

    def single():
        laplacian = importlib.import_module("pydp.algorithms.laplacian")

        def call():
            algorithm = laplacian.BoundedSum(
                epsilon=epsilon, lower_bound=0.0, upper_bound=bound, dtype="float"
            )
            return algorithm.quick_result(data)

        return call

    return Peer("python-dp BoundedSum", "pydp", single, note=f"float64 ndarray; {_GIVEN_BOUND}")


# ----------------------------------------------------------------------------------------- training


def optax_contrib_aggregate(grads, clip: float, noise_multiplier: float) -> Peer:
    """``optax.contrib.differentially_private_aggregate``'s update on the given per-example gradients,
    jitted (compiled at build time), one release per call."""

    def single():
        import jax
        import optax

        tx = optax.contrib.differentially_private_aggregate(clip, noise_multiplier, 0)
        state = tx.init(None)
        update = jax.jit(tx.update)
        return lambda: jax.block_until_ready(update(grads, state))

    return Peer(
        "optax.contrib.differentially_private_aggregate",
        "optax",
        single,
        note="jitted; same clip, noise multiplier and batch; NaN for a non-finite example",
    )
