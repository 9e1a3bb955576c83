"""Gillenwater, Joseph, Kulesza (ICML 2021), "Differentially Private Quantiles": error vs the number of
quantiles m (Fig. 3) and the runtime of JointExp (§5.3).

Fig. 3 protocol (paper §5.3): per trial a fresh n = 1000 sample (synthetic) or
1000 points without replacement (Goodreads), bounds [-100, 100], epsilon = 1, swap neighbors,
``q_j = j/(m+1)``; error = mean over the m quantiles of the number of data points between the release
and the true quantile (numpy ``method="lower"``). Methods: JointExp, IndExp, AppIndExp, CSmooth and
AggTree (dpjax's, b = 8, h = 3: the paper's tuned values are unpublished). The paper prints no curve
values, only claims: at m = 1 JointExp matches AppIndExp and is "roughly an order of magnitude"
better than CSmooth and AggTree; as m grows it is "roughly 2-3 times" better than the closest
competitor "until the gap closes around m = 30".

Runtime (§5.3): "For estimating m = 30 quantiles, JointExp takes roughly 1 ms for n = 1,000 points
and slightly under 1 minute for n = 1 million points", on a machine with two CPU cores. Ours: one
release of :func:`dpjax.quantiles.joint_exp` under ``jit`` on Gaussian data, compilation excluded,
``block_until_ready``, median of repeats (``time.perf_counter``).
"""

from __future__ import annotations

import math
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.quantiles.agg_tree import agg_tree
from dpjax._src.quantiles.app_ind_exp import app_ind_exp
from dpjax._src.quantiles.exp_mech import ind_exp
from dpjax._src.quantiles.joint_exp import joint_exp
from dpjax._src.quantiles.smooth import csmooth
from dpjax._src.tools import papers as data
from dpjax._src.tools.reproduce.result import (
    Reproduction,
    Row,
    bootstrap_interval,
    pick,
    ratio_of_means_se,
    subkey,
)

__all__ = [
    "AGGTREE",
    "BOUNDS",
    "CLAIM_MS",
    "CSMOOTH",
    "EPSILON",
    "METHODS",
    "RUNTIMES",
    "TITLE",
    "N",
    "explain",
    "run",
]

TITLE = 'Gillenwater, Joseph, Kulesza (ICML 2021), "Differentially Private Quantiles"'
METHODS = {
    "JointExp": joint_exp,
    "IndExp": ind_exp,
    "AppIndExp": app_ind_exp,
    # CSmooth takes zCDP rho: rho = epsilon^2/2, the zCDP that epsilon-DP implies (the paper's comparison).
    "CSmooth": lambda key, x, qs, epsilon, **kw: csmooth(key, x, qs, epsilon**2 / 2, **kw),
    "AggTree": agg_tree,
}
N, BOUNDS, EPSILON = 1000, (-100.0, 100.0), 1.0
# (n, m, the paper's seconds, its words)
RUNTIMES = ((1_000, 30, 1e-3, "roughly 1 ms"), (1_000_000, 30, 60.0, "slightly under 1 minute"))
# The m at which "2-3 times smaller than the closest competitor" is judged (where the run has them; the
# curves themselves are computed at every m of the run).
CLAIM_MS = (3, 5, 10, 15, 20, 25)


def _samplers(data_dir, seed):
    columns, sources = data.real_columns(data_dir, seed)
    out = {
        "N(0,5)": lambda rng: rng.normal(0.0, 5.0, N),
        "U(-5,5)": lambda rng: rng.uniform(-5.0, 5.0, N),
    }
    for name, column, scale in (("ratings", columns["ratings"], 1.0), ("pages/100", columns["pages"], 100.0)):
        label = name if sources[name.split("/")[0]] != "stand-in" else f"{name} (stand-in)"
        out[f"goodreads {label}"] = lambda rng, column=column / scale: rng.choice(column, N, replace=False)
    return out, sources


def _missed_points(x, release, truth):
    """Mean over quantiles of the number of sorted points ``x`` between the release and the truth."""
    return np.abs(np.searchsorted(x, release) - np.searchsorted(x, truth)).mean()


def _releasers(qs):
    """Each method as ``f(keys, xs) -> releases`` for the levels ``qs``, compiled once per m."""

    def bind(fn):
        return lambda k, x: fn(k, x, qs=qs, epsilon=EPSILON, bounds=BOUNDS)

    def per_trial(one):  # CSmooth tunes its smoothing parameter on the host: one call per trial
        return lambda keys, xs: jnp.stack([one(k, x) for k, x in zip(keys, xs, strict=True)])

    return {
        name: per_trial(bind(fn)) if name == "CSmooth" else jax.jit(jax.vmap(bind(fn)))
        for name, fn in METHODS.items()
    }


def _errors(key, releasers, sample, qs, trials, rng):
    """[trials] missed points per quantile for each method (fresh samples, one key per trial)."""
    xs = np.sort(np.stack([sample(rng) for _ in range(trials)]), axis=1)
    truth = np.quantile(xs, qs, axis=1, method="lower").T
    keys = jax.random.split(key, trials)
    errors = {}
    for name, release in releasers.items():
        releases = np.asarray(release(keys, jnp.asarray(xs, jnp.float32)))
        errors[name] = np.array(
            [_missed_points(x, r, t) for x, r, t in zip(xs, releases, truth, strict=True)]
        )
    return errors


def _time_release(n, m, repeats, rng):
    x = jnp.asarray(rng.normal(0.0, 5.0, n), jnp.float32)
    qs = np.arange(1, m + 1) / (m + 1)
    release = jax.jit(lambda k, x: joint_exp(k, x, qs=qs, epsilon=EPSILON, bounds=BOUNDS))
    key = jax.random.key(n)
    jax.block_until_ready(release(key, x))  # compile and warm up
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(release(jax.random.fold_in(key, i), x))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _closest(errs, among):
    """The competitor among ``among`` with the lowest mean error."""
    return min(among, key=lambda name: errs[name].mean())


def _comparison_rows(curves, ms):
    """The paper's claims about Fig. 3 (§5.3), each a ratio of mean errors over the trials (the delta-
    method SE of a ratio of paired means; the gap-closing row a bootstrap over each m's trials)."""
    rows = []
    mid = [m for m in ms if m in CLAIM_MS] or [m for m in ms if 1 < m < max(ms)] or [m for m in ms if m > 1]
    competitors = [name for name in METHODS if name != "JointExp"]
    for dataset, by_m in curves.items():
        if 1 in by_m:
            errs = by_m[1]
            ratio, se = ratio_of_means_se(errs["AppIndExp"], errs["JointExp"])
            rows.append(
                Row(
                    "Fig. 3",
                    f"{dataset}, m=1",
                    "AppIndExp error / JointExp error",
                    1.0,
                    ratio,
                    se,
                    "JointExp matches AppIndExp",
                    (2 / 3, 3 / 2),
                    nonnegative=True,
                )
            )
            other = _closest(errs, ("CSmooth", "AggTree"))
            second = "AggTree" if other == "CSmooth" else "CSmooth"
            ratio, se = ratio_of_means_se(errs[other], errs["JointExp"])
            second_ratio = ratio_of_means_se(errs[second], errs["JointExp"])[0]
            rows.append(
                Row(
                    "Fig. 3",
                    f"{dataset}, m=1",
                    f"min(CSmooth, AggTree) error / JointExp error ({other}; {second}: {second_ratio:.3g})",
                    10.0,
                    ratio,
                    se,
                    "roughly an order of magnitude",
                    (3.0, math.inf),
                    nonnegative=True,
                )
            )
        closest = {m: _closest(by_m[m], competitors) for m in by_m}
        for m in mid:
            other = closest[m]
            ratio, se = ratio_of_means_se(by_m[m][other], by_m[m]["JointExp"])
            label = other
            if other == "AggTree":  # ours is stronger than the paper's (see the notes): the next one too
                runner_up = _closest(by_m[m], [name for name in competitors if name != "AggTree"])
                runner_ratio = ratio_of_means_se(by_m[m][runner_up], by_m[m]["JointExp"])[0]
                label = f"AggTree; without it {runner_up}: {runner_ratio:.3g}"
            rows.append(
                Row(
                    "Fig. 3",
                    f"{dataset}, m={m}",
                    f"closest competitor's error / JointExp's ({label})",
                    2.5,
                    ratio,
                    se,
                    "roughly 2-3x",
                    (1.5, math.inf),
                    nonnegative=True,
                )
            )
        last = max(by_m)
        if last >= 25 and mid:
            rows.append(_gap_closes_row(dataset, by_m, closest, mid, last))
    return rows


def _gap_closes_row(dataset, by_m, closest, mid, last):
    """"The gap closes around m = 30": the closest competitor's ratio at the largest m over its peak at
    the smaller m (below 1 when the gap has closed), resampling each m's trials on their own."""
    ms = [*mid, last]
    groups = [(by_m[m][closest[m]], by_m[m]["JointExp"]) for m in ms]

    def over_peak(*pairs):
        ratios = [ratio_of_means_se(a, b)[0] for a, b in pairs]
        return ratios[-1] / max(ratios[:-1])

    ratio = ratio_of_means_se(*groups[-1])[0]
    return Row(
        "Fig. 3",
        f"{dataset}, m={last}",
        f"closest competitor's error / JointExp's ({closest[last]}: {ratio:.3g}) over its peak at smaller m",
        None,
        over_peak(*groups),
        claim="the gap closes around m = 30",
        accept=(-math.inf, 1.0),
        ci=bootstrap_interval(over_peak, *groups),
    )


def _plot(curves, ms, timings, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves) + 1, figsize=(3.3 * (len(curves) + 1), 3.6))
    for ax, (dataset, by_m) in zip(axes, curves.items(), strict=False):
        for name in METHODS:
            ax.plot(ms, [by_m[m][name].mean() for m in ms], marker=".", label=name)
        ax.set(yscale="log", xlabel="number of quantiles m", title=dataset)
    axes[0].set_ylabel("missed points per quantile")
    axes[0].legend()
    ax = axes[-1]
    labels = [f"n={n:,}" for n, *_ in timings]
    positions = np.arange(len(timings))
    ax.bar(positions - 0.2, [t[2] for t in timings], 0.4, label="paper")
    ax.bar(positions + 0.2, [t[3] for t in timings], 0.4, label="dpjax (ours)")
    ax.set_xticks(positions, labels)
    ax.set(yscale="log", ylabel="seconds per release", title="JointExp runtime, m = 30")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run(key, mode: str, data_dir=None) -> Reproduction:
    ms = pick(mode, smoke=[1], quick=[1, 3, 10, 20, 29], full=list(range(1, 30)))
    trials = pick(mode, smoke=2, quick=10, full=50)
    repeats = pick(mode, smoke=1, quick=3, full=10)
    sizes = pick(mode, smoke=RUNTIMES[:1], quick=RUNTIMES, full=RUNTIMES)
    samplers, sources = _samplers(data_dir, 0)
    curves: dict[str, dict[int, dict[str, np.ndarray]]] = {dataset: {} for dataset in samplers}
    for m in ms:
        qs = np.arange(1, m + 1) / (m + 1)
        releasers = _releasers(qs)
        for dataset, sample in samplers.items():
            rng = np.random.default_rng([m, list(samplers).index(dataset)])
            curves[dataset][m] = _errors(subkey(key, "fig3", m, dataset), releasers, sample, qs, trials, rng)
    rows = _comparison_rows(curves, ms)
    timings = []
    for n, m, paper, words in sizes:
        seconds = _time_release(n, m, repeats, np.random.default_rng(n))
        timings.append((n, m, paper, seconds))
        rows.append(
            Row(
                "§5.3 runtime",
                f"n={n:,}, m={m}, N(0,5)",
                "seconds per JointExp release",
                paper,
                seconds,
                claim=f"paper: {words}",
            )
        )
    stand_ins = sorted({n for n, s in sources.items() if s == "stand-in"} & {"ratings", "pages"})
    notes = [
        "The paper prints no curve values: the rows check its stated claims; the paper's number is the "
        'claim\'s centre (1 for "matches", 10 for "an order of magnitude", 2.5 for "2-3 times").',
        "Our AggTree (b = 8, h = 3, tuned on N(0, 1) as the paper did, with a correct Honaker "
        "aggregation) is stronger than the paper's and flat in m, so it catches up earlier than in the "
        "paper (benchmarks/README.md, issue 6).",
        "Runtime: the paper's figures are for its NumPy code on a 2-core machine; ours are one jitted "
        f"release on this machine, compilation excluded, median of {repeats} (float32, scan forward pass).",
    ]
    if len(sizes) < len(RUNTIMES):
        notes.append("`--smoke` skips the n = 10^6 timing.")
    if stand_ins:
        notes.insert(
            0, "**Stand-in data** for Goodreads (no books.csv: `dpjax data fetch goodreads` or `--data-dir`)."
        )
    return Reproduction(
        name="jointexp",
        title=TITLE,
        rows=rows,
        trials=f"m in {ms if len(ms) < 29 else '1..29'}, {trials} trials per (m, dataset) "
        f"(paper: m = 1..29, 20 trials in the text, 50 in the caption); the 2-3x claim judged at m in "
        f"{[m for m in ms if m in CLAIM_MS]}.",
        notes=notes,
        plot=lambda path: _plot(curves, ms, timings, path),
    )


AGGTREE = (
    "our AggTree is a correct Honaker aggregation and stronger than the paper's, which carries dp_multiq's "
    "add_pluses bug (a NumPy rebuild of that tree with the bug reproduces Durfee's Table 1 AT cells, without "
    "it ours: benchmarks/README.md, 'Paper reproductions'); the paper's claim is against the weaker tree"
)

CSMOOTH = (
    "over 1,000 trials per dataset (benchmarks/check_jointexp_m1.py) CSmooth's mean error is 2.5-4.2 "
    "times JointExp's in dpjax and 2.5-4.6 times in an independent NumPy rebuild of CSmooth (Bun and "
    "Steinke §3.1.1, t tuned on N(0, 1) as the paper's code does): about half an order of magnitude on "
    "every dataset, so 'roughly an order of magnitude' is not what CSmooth gives at m = 1 on these data; "
    "the paper reads it off a log-scale plot of means over 20-50 heavy-tailed trials"
)


def explain(row: Row) -> str:
    """Why a Fig. 3 claim does not hold (or is inconclusive) here; empty when there is nothing to add."""
    if row.experiment != "Fig. 3":
        return ""
    if row.quantity.startswith("AppIndExp error"):
        return (
            "at m = 1 JointExp and AppIndExp are the same exponential mechanism (AppIndExp at epsilon "
            "0.99 by Dong et al.'s composition, App. E): over 1,000 trials per dataset their error ratio "
            "is 0.97-1.06 in dpjax and 0.96-1.03 in an independent NumPy rebuild "
            "(benchmarks/check_jointexp_m1.py); the error is heavy-tailed and 50 trials do not decide it"
        )
    if row.quantity.startswith("min(CSmooth, AggTree)"):
        if "(AggTree;" not in row.quantity:
            return CSMOOTH
        found = re.search(r"CSmooth: ([0-9.eE+-]+)", row.quantity)
        assert found is not None and row.accept is not None  # as _comparison_rows writes this claim
        csmooth = float(found.group(1))
        if csmooth >= row.accept[0]:
            return AGGTREE
        return f"{AGGTREE}; CSmooth alone gives {csmooth:g}: {CSMOOTH}"
    if "(AggTree;" in row.quantity:
        return AGGTREE + "; against the closest of the other methods (in the quantity) the ratio is larger"
    if row.setting.endswith("m=3"):
        return (
            "'roughly 2-3 times smaller ... as m grows' (§5.3) starts at m = 1, where JointExp matches "
            "AppIndExp (ratio 1, the same sentence): at m = 3 the curves have only begun to part, and the "
            "paper prints no value there"
        )
    return ""
