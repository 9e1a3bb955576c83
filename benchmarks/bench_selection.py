"""Selection kernels beyond the headline rows, at the headline size (d = 10^6, float32, epsilon = 1).

``dpjax bench selection`` times the headline rows (``gumbel_top_k`` and ``exponential_mechanism``,
their fast samplers ``method="tree"`` and ``method="inverse_cdf"``, with their peers). This script
times the other selection kernels the same way (one harness: ``dpjax.tools.bench``), on the same Zipf(1.3)
scores: report-noisy-max with Exponential and Laplace noise, and noisy top-k with gap (Laplace noise,
``lax.top_k(k + 1)`` with values).

Run from the repository root: ``python -m benchmarks.bench_selection [--size 1] [--out DIR]``
"""

from __future__ import annotations

from dpjax import selection
from dpjax._src.tools.bench.case import Case, power_label, scaled
from dpjax._src.tools.bench.cases.selection import zipf_scores
from dpjax._src.tools.bench.cli import script

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
