"""``method="auto"`` (the default) against ``method="literal"`` for every function that has a fast
sampler, same harness as ``dpjax bench``: "single" is one release (``auto`` runs the literal kernel),
"MC" is ``jit(vmap(release))`` over keys with the data fixed (``auto`` runs the tree or the first
passage, its preparation once). Run from the repository root:

    python -m benchmarks.bench_auto [--size 1] [--out DIR]

Data as in the headline rows: Zipf(1.3) counts over d = 10^6 candidates (epsilon 1, monotonic, k = 10)
for selection; queries ``linspace(0, 100, n)``, n = 10^4, threshold 50, epsilon1 = epsilon2 = 0.5
(gap variants: epsilon 1), c = 10, for the sparse vector family. The floor is the literal kernel's
draw (d Gumbel; n + c Laplace; 2n + 1 for the adaptive variant).
"""

from __future__ import annotations

import numpy as np

from dpjax import selection, svt
from dpjax._src.datasets.zipf import zipf_histogram
from dpjax._src.tools.bench.case import Case, power_label, scaled
from dpjax._src.tools.bench.cli import script

K, C, THRESHOLD = 10, 10, 50.0


def _selection(d: int, scale: float):
    counts = zipf_histogram(np.random.default_rng(0), d, 10 * d, 1.3).astype(np.float32)
    setting = f"d={power_label(d)} Zipf(1.3) counts, float32, epsilon=1, monotonic"
    releases = {"literal": scaled(100, scale, 10), "auto": scaled(10_000, scale, 100)}
    rows = {
        "selection.exponential_mechanism": lambda m: lambda key, c: selection.exponential_mechanism(
            key, c, 1.0, monotonic=True, method=m
        ),
        "selection.gumbel_top_k": lambda m: lambda key, c: selection.gumbel_top_k(
            key, c, K, 1.0, monotonic=True, method=m
        ),
        "selection.noisy_top_k_with_gap (noise='gumbel')": lambda m: lambda key, c: (
            selection.noisy_top_k_with_gap(key, c, K, 1.0, noise="gumbel", monotonic=True, method=m)
        ),
    }
    return [
        Case(
            family="selection",
            mechanism=f"{name} (method='{method}')",
            setting=setting + ("" if "exponential" in name else f", k={K}"),
            release=make(method),
            args=(counts,),
            releases=releases[method],
            bytes_per_release=(12 * d if method == "literal" else 64),
            noise="gumbel",
            variates=float(d),
            variates_note="floor: the literal kernel's d Gumbel draws",
        )
        for name, make in rows.items()
        for method in ("literal", "auto")
    ]


def _svt(n: int, scale: float):
    queries = np.linspace(0.0, 100.0, n).astype(np.float32)
    setting = f"{power_label(n)} queries linspace(0, 100), T={THRESHOLD:g}"
    releases = {"literal": scaled(1_000, scale, 32), "auto": scaled(10_000, scale, 100)}
    rows = {
        "svt.above_threshold": (
            lambda m: lambda key, q: svt.above_threshold(key, q, THRESHOLD, 0.5, 0.5, method=m),
            "eps1=eps2=0.5, Laplace",
            n + 1,
        ),
        "svt.sparse_vector": (
            lambda m: lambda key, q: svt.sparse_vector(key, q, THRESHOLD, 0.5, 0.5, c=C, method=m),
            f"eps1=eps2=0.5, Laplace, c={C}",
            n + C,
        ),
        "svt.sparse_vector_with_gap": (
            lambda m: lambda key, q: svt.sparse_vector_with_gap(key, q, THRESHOLD, 1.0, c=C, method=m),
            f"epsilon=1, c={C}",
            n + 1,
        ),
        "svt.adaptive_sparse_vector_with_gap": (
            lambda m: lambda key, q: svt.adaptive_sparse_vector_with_gap(
                key, q, THRESHOLD, 1.0, c=C, method=m
            ),
            f"epsilon=1, c={C}",
            2 * n + 1,
        ),
    }
    return [
        Case(
            family="svt",
            mechanism=f"{name} (method='{method}')",
            setting=f"{setting}, {detail}",
            release=make(method),
            args=(queries,),
            releases=releases[method],
            bytes_per_release=(16 * n if method == "literal" else 64),
            noise="laplace",
            variates=float(variates),
            variates_note="floor: the literal kernel's draws",
        )
        for name, (make, detail, variates) in rows.items()
        for method in ("literal", "auto")
    ]


def cases(scale: float) -> list[Case]:
    return _selection(scaled(10**6, scale, 1_000), scale) + _svt(scaled(10**4, scale, 1_000), scale)


def main(argv=None):
    script("benchmarks.bench_auto", cases, "method='auto' (the default) against method='literal'", argv)


if __name__ == "__main__":
    main()
