"""The DP-SGD headline study (issue 27 item 5): private clipping against a sweep of fixed clips.

Run from the repository root (about 30-40 minutes on 2 loaded CPU cores):
``nice python -m benchmarks.bench_optax_headline --mnist /work/shared/data/mnist_5k.csv.gz``
(``--seeds``, ``--cells`` to shrink it). It writes ``benchmarks/results/optax_headline.json`` (every
run) and ``optax_headline.md`` (the table) after each cell, so an interrupted run keeps what finished.

Setting: exactly what ``dpjax train`` runs (its model, optimizer, batch, epochs and Poisson sampling;
see :mod:`dpjax.tools.train.run`). Cells: UCI Adult at epsilon 3 (MLP) and MNIST-5k (4,000 train / 1,000
test; the small CNN of :func:`dpjax.tools.train.run.cnn`) at epsilon 1 and 3; delta = 1e-5 for the whole
run, the noise multiplier of each strategy calibrated so every row has the same (epsilon, delta).

* fixed clips over ``FIXED_GRID``; "best fixed" is chosen on the test accuracy *in hindsight*: the
  sweep is not private (tuning the clip on the data would itself cost privacy), it is the reference
  a private clip should reach without tuning;
* private quantile clips (``dpjax.optax.quantile_clip``) at the candidate target quantiles
  ``TARGETS``, each at ``dpjax train``'s clip epsilon and period; their privacy cost is in the budget.

Seeds vary the model init, the Poisson samples and the noise; mean and standard deviation (ddof 1)
of the test accuracy over ``--seeds`` seeds (default 5).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import bench_optax
from dpjax import optax as dpo
from dpjax.datasets import training as data_lib
from dpjax.tools.bench.report import print_machine
from dpjax.tools.train import run as train
from dpjax.tools.train import settings

DELTA = 1e-5
FIXED_GRID = (0.3, 1.0, 3.0, 10.0, 30.0)
TARGETS = (0.5, 0.75, 0.9)
CELLS = (("adult", 3.0), ("mnist", 3.0), ("mnist", 1.0))
RUNS_AT_ONCE = 5  # runs vmapped together (memory bound), lax.map over the rest
OUT = Path("benchmarks/results")


def stack(trees):
    return jax.tree.map(lambda *leaves: jnp.stack([jnp.asarray(leaf) for leaf in leaves]), *trees)


def runner(dataset: data_lib.Dataset, plan: train.Plan, args):
    """``jit`` of: runs (keys, strategies, sigmas stacked on a leading axis) -> (accuracy, final clip),
    with ``dpjax train``'s model for the dataset."""
    model = train.model_for(settings.DEFAULT_MODEL[dataset.name], dataset, args.hidden)
    return bench_optax.runner(dataset, plan, model=model, learning_rate=args.learning_rate,
                              runs_at_once=RUNS_AT_ONCE)


def strategies(args):
    quantile = [
        dpo.quantile_clip(args.clip_norm, quantile=q, epsilon=args.clip_epsilon, every=args.every)
        for q in TARGETS
    ]
    return {"fixed": [dpo.fixed_clip(c) for c in FIXED_GRID], "quantile": quantile}


def label(name, strategy):
    return (
        f"fixed {float(strategy.initial_norm):g}"
        if name == "fixed"
        else f"quantile q={float(strategy.quantile):g}"
    )


def run_cell(dataset, epsilon, args, rows):
    n = dataset.x_train.shape[0]
    plan = train.plan(
        n, epochs=args.epochs[dataset.name], batch_size=args.batch_size, epsilon=epsilon, delta=DELTA
    )
    print(
        f"\n{dataset.name} at epsilon {epsilon:g}: {plan.steps} steps, padded batch {plan.padded_size}",
        flush=True,
    )
    run_all = runner(dataset, plan, args)
    arrays = [jnp.asarray(a) for a in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test)]
    for name, group in strategies(args).items():
        calibrated = {}  # strategies with the same accounting share one sigma
        for s in group:
            steps = s.accounting_steps(1.0, plan.steps)
            if steps not in calibrated:
                calibrated[steps] = train.calibrate(s, plan, epsilon)
        sigmas = [calibrated[s.accounting_steps(1.0, plan.steps)] for s in group]
        runs = [(i, seed) for i in range(len(group)) for seed in range(args.seeds)]
        batch = (
            jnp.stack([jax.random.key(seed) for _, seed in runs]),
            stack([group[i] for i, _ in runs]),
            jnp.asarray([sigmas[i] for i, _ in runs], jnp.float32),
        )
        start = time.perf_counter()
        acc, clip, truncated = jax.block_until_ready(run_all(batch, *arrays))
        seconds = time.perf_counter() - start
        acc, clip = np.asarray(acc, np.float64), np.asarray(clip, np.float64)
        for j, (i, seed) in enumerate(runs):
            rows.append(
                dict(
                    dataset=dataset.name,
                    epsilon=epsilon,
                    clip=label(name, group[i]),
                    seed=seed,
                    sigma=sigmas[i],
                    accuracy=float(acc[j]),
                    final_clip=float(clip[j]),
                    truncated=bool(truncated[j]),
                    steps=plan.steps,
                )
            )
        means = acc.reshape(len(group), args.seeds).mean(axis=1)
        print(
            f"  {name}: {len(runs)} runs in {seconds:.0f} s; mean accuracy "
            + ", ".join(f"{m:.4f}" for m in means),
            flush=True,
        )


def summary(rows):
    """Mean and std over seeds per (dataset, epsilon, clip), and the markdown table."""
    cells = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["epsilon"], r["clip"]), []).append(r)
    stats = []
    for (dataset, epsilon, clip), runs in cells.items():
        acc = np.array([r["accuracy"] for r in runs])
        stats.append(
            dict(
                dataset=dataset,
                epsilon=epsilon,
                clip=clip,
                seeds=len(runs),
                mean=float(acc.mean()),
                std=float(acc.std(ddof=1)) if len(runs) > 1 else 0.0,
                sigma=runs[0]["sigma"],
                final_clip_median=float(np.median([r["final_clip"] for r in runs])),
            )
        )
    lines = [
        "| dataset | epsilon | clip | test accuracy (mean ± std) | seeds | sigma | final clip (median) "
        "| vs best fixed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((s["dataset"], s["epsilon"]) for s in stats):
        cell = [s for s in stats if (s["dataset"], s["epsilon"]) == key]
        fixed = [s for s in cell if s["clip"].startswith("fixed")]
        best = max(fixed, key=lambda s: s["mean"]) if fixed else None
        for s in cell:
            gap = f"{100 * (s['mean'] - best['mean']):+.2f} pt" if best else ""
            mark = " (best fixed)" if s is best else ""
            lines.append(
                f"| {s['dataset']} | {s['epsilon']:g} | {s['clip']}{mark} | "
                f"{s['mean']:.4f} ± {s['std']:.4f} | "
                f"{s['seeds']} | {s['sigma']:.4f} | {s['final_clip_median']:.3g} | {gap} |"
            )
    return stats, "\n".join(lines) + "\n"


def write(rows, args, seconds):
    stats, table = summary(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    record = dict(
        command="python -m benchmarks.bench_optax_headline " + " ".join(args.argv),
        seconds=seconds,
        fixed_grid=FIXED_GRID,
        targets=TARGETS,
        clip_epsilon=args.clip_epsilon,
        every=args.every,
        runs=rows,
        summary=stats,
    )
    for name, text in (("optax_headline.json", json.dumps(record, indent=1)), ("optax_headline.md", table)):
        tmp = OUT / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(OUT / name)
    print(table, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist", metavar="PATH", help="MNIST CSV, e.g. /work/shared/data/mnist_5k.csv.gz")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--cells", nargs="+", default=[f"{d}:{e:g}" for d, e in CELLS], help="dataset:epsilon"
    )
    parser.add_argument("--clip-norm", type=float, default=settings.DEFAULTS["clip_norm"])
    parser.add_argument("--clip-epsilon", type=float, default=settings.DEFAULTS["clip_epsilon"])
    parser.add_argument("--every", type=int, default=settings.DEFAULTS["every"])
    parser.add_argument("--hidden", type=int, default=settings.DEFAULTS["hidden"])
    parser.add_argument("--learning-rate", type=float, default=settings.DEFAULTS["learning_rate"])
    parser.add_argument("--batch-size", type=int, default=settings.DEFAULTS["batch_size"])
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else __import__("sys").argv[1:]
    args.epochs = dict(settings.DEFAULT_EPOCHS)
    print_machine()
    datasets = {"adult": data_lib.load_adult}
    if args.mnist:
        datasets["mnist"] = lambda: data_lib.load_mnist(args.mnist)
    loaded, rows, start = {}, [], time.perf_counter()
    for cell in args.cells:
        name, epsilon = cell.split(":")
        if name not in datasets:
            print(f"skipped {cell}: no --mnist path")
            continue
        dataset = loaded.setdefault(name, datasets[name]())
        run_cell(dataset, float(epsilon), args, rows)
        write(rows, args, time.perf_counter() - start)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
