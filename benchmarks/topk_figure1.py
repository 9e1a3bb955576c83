"""Figure 1 of Durfee and Rogers (2019), from dpjax's accountant: the ratio of the optimal
composition bound for k epsilon-DP mechanisms (Kairouz, Oh and Viswanath, Lemma A.1) to the bound for
k epsilon-range-bounded mechanisms (Lemma 4.4, ``epsilon_star``), against k. A ratio above 1 means
the range-bounded bound is smaller.

Protocol (paper, Appendix A): at each k, take the index i whose ``(k - 2i) epsilon`` is smallest with
``delta_i <= delta``, and compare with ``epsilon_star(k, epsilon, delta_i)`` at that same
``delta_i``. The paper's (epsilon, delta) grid exists only in its image; this grid is ours
(spec ``seed-003`` §7): epsilon in {0.01, 0.05, 0.1, 0.5}, delta in {1e-6, 1e-9}, k = 1..1000.

Run from the repo root: ``python -m benchmarks.topk_figure1 [--out benchmarks/topk_figure1.png]``
"""

from __future__ import annotations

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from dpjax.accounting.pay_what_you_get import epsilon_star, optimal_composition
from dpjax.bench.report import print_machine, print_table

EPSILONS = (0.01, 0.05, 0.1, 0.5)
DELTAS = (1e-6, 1e-9)
REPORTED_K = (10, 50, 100, 250, 500, 1000)


def ratio_curve(epsilon, delta, ks):
    out = []
    for k in ks:
        kov, delta_i = optimal_composition(k, epsilon, delta)
        out.append(kov / epsilon_star(k, epsilon, delta_i))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="benchmarks/topk_figure1.png")
    parser.add_argument("--max-k", type=int, default=1000)
    args = parser.parse_args(argv)
    print_machine()
    ks = list(range(1, args.max_k + 1))
    start = time.perf_counter()
    curves = {(e, d): ratio_curve(e, d, ks) for d in DELTAS for e in EPSILONS}
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, len(DELTAS), figsize=(11, 4), sharey=True)
    for ax, delta in zip(axes, DELTAS, strict=True):
        for eps in EPSILONS:
            ax.plot(ks, curves[(eps, delta)], lw=1, label=f"ε = {eps}")
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_title(f"δ = {delta:g}")
        ax.set_xlabel("number of compositions k")
    axes[0].set_ylabel("optimal DP bound / range-bounded bound")
    axes[0].legend()
    fig.suptitle("Durfee & Rogers (2019), Figure 1 (our grid): ratio of composition bounds")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)

    rows = []
    for (eps, delta), curve in curves.items():
        row = {"eps": eps, "delta": delta}
        row.update({f"k={k}": curve[k - 1] for k in REPORTED_K if k <= args.max_k})
        row["min"] = min(curve)
        row["max"] = max(curve)
        rows.append(row)
    print_table("Ratio eps_KOV(k, eps, delta) / eps_RB(k, eps, delta_i)", rows)
    print(f"\n{len(ks) * len(curves)} points in {seconds:.2f} s; figure written to {args.out}")


if __name__ == "__main__":
    main()
