"""Selection family: one-shot Gumbel top-k and the exponential mechanism over d = 10^6 candidates.

Data: Zipf(1.3) counts (clipped at 10^6) as float32 scores, monotonic, epsilon = 1. Both draw one
Gumbel per candidate per release (floor: d ``jax.random.gumbel``). Peers: a NumPy loop
(``Generator.gumbel`` + ``argpartition``), OpenDP's noisy top-k / noisy max with Gumbel noise
(zCDP output measure) and diffprivlib's exponential mechanism.

The fast samplers (same laws, data work done once per batch under ``vmap`` over keys) have rows of
their own at 10^4 releases per batch, against the same floor (d Gumbel draws, the literal kernel's):
``gumbel_top_k(method="tree")`` and ``noisy_top_k_with_gap(noise="gumbel", method="tree")`` (the
k + 1 largest values, O(k log d) per release) and ``exponential_mechanism`` with
``method="inverse_cdf"`` and ``method="tree"`` (O(log d)).
"""

from __future__ import annotations

import functools

import numpy as np

from dpjax._src import selection, selection_gap
from dpjax._src.tools.bench import peers
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled

__all__ = [
    "EPSILON",
    "K",
    "cases",
    "zipf_scores",
]

K, EPSILON = 10, 1.0


def _numpy_top_k(counts: np.ndarray, k: int) -> Peer:
    def single():
        rng = np.random.default_rng(1)

        def release():
            noisy = counts + rng.gumbel(scale=1.0 / EPSILON, size=counts.shape)
            top = np.argpartition(noisy, -k)[-k:]
            return top[np.argsort(-noisy[top])]

        return release

    return Peer("NumPy gumbel + argpartition", "numpy", single, note="float64 noise on float32 counts")


def _numpy_argmax(counts: np.ndarray) -> Peer:
    def single():
        rng = np.random.default_rng(1)
        return lambda: np.argmax(counts + rng.gumbel(scale=1.0 / EPSILON, size=counts.shape))

    return Peer("NumPy gumbel + argmax", "numpy", single, note="float64 noise on float32 counts")


def zipf_scores(d: int) -> np.ndarray:
    """The benchmark's scores: d Zipf(1.3) counts clipped at 10^6, as float32 (seed 0)."""
    return np.random.default_rng(0).zipf(1.3, d).clip(max=10**6).astype(np.float32)


def cases(scale: float) -> list[Case]:
    d = scaled(10**6, scale, 1_000)
    counts = zipf_scores(d)
    setting = f"d={power_label(d)} Zipf(1.3) counts, float32, epsilon={EPSILON:g}, monotonic"
    common = functools.partial(  # a Case with the family's shared fields
        Case,
        family="selection",
        args=(counts,),
        releases=scaled(100, scale, 8),
        bytes_per_release=16 * d,
        noise="gumbel",
        variates=float(d),
        variates_note="one Gumbel per candidate",
    )
    fast = functools.partial(
        common,
        releases=scaled(10_000, scale, 100),
        bytes_per_release=4096,
        variates_note="floor: one Gumbel per candidate (the literal kernel's draw)",
    )
    return [
        common(
            mechanism="selection.gumbel_top_k",
            setting=f"{setting}, k={K}",
            method="auto",
            methods=("literal", "tree"),
            release=lambda key, c: selection.gumbel_top_k(key, c, k=K, epsilon=EPSILON, monotonic=True),
            peers=(_numpy_top_k(counts, K), peers.opendp_noisy_top_k(counts, K, 1.0 / EPSILON)),
        ),
        common(
            mechanism="selection.exponential_mechanism",
            setting=setting,
            method="auto",
            methods=("literal", "tree"),
            release=lambda key, c: selection.exponential_mechanism(key, c, epsilon=EPSILON, monotonic=True),
            peers=(
                _numpy_argmax(counts),
                peers.opendp_noisy_max(counts, 1.0 / EPSILON),
                peers.diffprivlib_exponential(counts, EPSILON),
            ),
        ),
        fast(
            mechanism="selection.gumbel_top_k (method='tree')",
            setting=f"{setting}, k={K}",
            method="tree",
            methods=("tree", "tree"),
            release=lambda key, c: selection.gumbel_top_k(
                key, c, k=K, epsilon=EPSILON, monotonic=True, method="tree"
            ),
        ),
        fast(
            mechanism="selection.noisy_top_k_with_gap (noise='gumbel', method='tree')",
            setting=f"{setting}, k={K}",
            method="tree",
            methods=("tree", "tree"),
            release=lambda key, c: selection_gap.noisy_top_k_with_gap(
                key, c, K, EPSILON, noise="gumbel", monotonic=True, method="tree"
            ),
        ),
        *(
            fast(
                mechanism=f"selection.exponential_mechanism (method='{method}')",
                setting=setting,
                method=method,
                methods=(method, method),
                release=lambda key, c, method=method: selection.exponential_mechanism(
                    key, c, epsilon=EPSILON, monotonic=True, method=method
                ),
            )
            for method in ("inverse_cdf", "tree")
        ),
    ]
