"""Selection kernels beyond the headline rows, at the headline size (d = 10^6, float32, epsilon = 1).

``dpjax bench selection`` times the headline rows (``gumbel_top_k`` and ``exponential_mechanism``
with their peers). This script times the other selection kernels the same way (one harness:
``dpjax.bench``), on the same Zipf(1.3) scores: report-noisy-max with Exponential and Laplace noise,
noisy top-k with gap (Laplace noise, ``lax.top_k(k + 1)`` with values), and the exponential
mechanism's inverse-CDF sampler (``method="inverse_cdf"``, O(log d) per release under ``vmap``), and
one-shot Gumbel top-k by the top-down Gumbel process (``method="tree"``, O(k log d) per release under
``vmap``, 10^4 releases per batch).

Run from the repository root: ``python -m benchmarks.bench_selection [--size 1] [--out DIR]``
"""

from __future__ import annotations

from dpjax import selection
from dpjax.bench.case import Case, power_label, scaled
from dpjax.bench.cases.selection import zipf_scores
from dpjax.bench.cli import script

K, EPSILON = 10, 1.0


def cases(scale: float) -> list[Case]:
    d = scaled(10**6, scale, 1_000)
    counts = zipf_scores(d)
    setting = f"d={power_label(d)} Zipf(1.3) counts, float32, epsilon={EPSILON:g}, monotonic"
    common = dict(
        family="selection", args=(counts,), releases=scaled(100, scale, 8), bytes_per_release=16 * d
    )
    return [
        Case(
            mechanism=f"selection.report_noisy_max (noise='{noise}')",
            setting=setting,
            release=lambda key, c, noise=noise: selection.report_noisy_max(
                key, c, epsilon=EPSILON, noise=noise, monotonic=True
            ),
            noise=noise,
            variates=float(d),
            variates_note="one variate per candidate",
            **common,
        )
        for noise in ("exponential", "laplace")
    ] + [
        Case(
            mechanism="selection.exponential_mechanism (method='inverse_cdf')",
            setting=setting,
            release=lambda key, c: selection.exponential_mechanism(
                key, c, epsilon=EPSILON, monotonic=True, method="inverse_cdf"
            ),
            noise="gumbel",
            variates=float(d),
            variates_note="floor: one Gumbel per candidate (the literal kernel's draw)",
            **common,
        ),
        Case(
            mechanism="selection.gumbel_top_k (method='tree')",
            setting=f"{setting}, k={K}",
            release=lambda key, c: selection.gumbel_top_k(
                key, c, k=K, epsilon=EPSILON, monotonic=True, method="tree"
            ),
            family="selection",
            args=(counts,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=4096,
            noise="gumbel",
            variates=float(d),
            variates_note="floor: one Gumbel per candidate (the literal kernel's draw)",
        ),
        Case(
            mechanism="selection.noisy_top_k_with_gap",
            setting=f"{setting}, k={K}",
            release=lambda key, c: selection.noisy_top_k_with_gap(
                key, c, k=K, epsilon=EPSILON, monotonic=True
            ),
            noise="laplace",
            variates=float(d),
            variates_note="one Laplace per candidate",
            **common,
        ),
    ]


def main(argv=None) -> None:
    script("benchmarks.bench_selection", cases, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
