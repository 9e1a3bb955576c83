"""The DP-SGD headline study (issue 27 item 5, issue 43 item 5): private clipping against a sweep of
fixed clips; the source of the README's training figures (``tests/meta/test_headline_figures.py``).

Run from the repository root (about 20 minutes on 2 loaded CPU cores, one run at a time):
``nice python -m benchmarks.bench_optax_headline --mnist /work/shared/data/mnist_5k.csv.gz``
(``--seeds``, ``--cells``, ``--fixed``, ``--targets`` to shrink it; ``--out`` for another folder). It
writes ``benchmarks/results/optax_headline.json`` (every run, the command, the load average) and
``optax_headline.md`` (the table) after each cell, so an interrupted run keeps what finished.

Setting: exactly what ``dpjax train`` runs (its model, optimizer, batch, epochs and Poisson sampling;
see :mod:`dpjax.tools.train.run`): each row's run at seed s is ``dpjax train --seed s`` with that clip,
un-vmapped, so it gives the accuracy and final clip norm the command prints. Cells: UCI Adult at
epsilon 3 (MLP) and MNIST-5k (4,000 train / 1,000 test; the small CNN of
:func:`dpjax.tools.train.run.cnn`) at epsilon 1 and 3; delta = 1e-5 for the whole run, the noise
multiplier of each strategy calibrated so every row has the same (epsilon, delta).

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
import functools
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import optax as dpo
from dpjax._src.datasets import training as data_lib
from dpjax._src.tools.bench.report import print_machine
from dpjax._src.tools.train import models, settings
from dpjax._src.tools.train import run as train

DELTA = 1e-5
FIXED_GRID = (0.3, 1.0, 3.0, 10.0, 30.0)
TARGETS = (0.5, 0.75, 0.9)
CELLS = (("adult", 3.0), ("mnist", 3.0), ("mnist", 1.0))
OUT = Path("benchmarks/results")


def train_steps(dataset: data_lib.Dataset, plan: train.Plan, args):
    """``dpjax train``'s jitted steps and evaluation for the dataset (its model, optimizer, Poisson
    sampling and padded size): ``run(seed, strategy, sigma) -> (accuracy, final clip, truncated)``.

    Each run is one un-vmapped ``dpjax train --seed seed`` run (same key, same samplers, same steps), so
    its accuracy is what the command prints; the compiled step is shared by the runs of a strategy type.
    """
    model = models.model_for(settings.DEFAULT_MODEL[dataset.name], dataset, args.hidden)
    config = dict(expected_batch_size=plan.expected_batch_size, learning_rate=args.learning_rate)
    steps_fn = jax.jit(
        functools.partial(
            train.run_steps, model=model, rate=plan.sampling_rate, size=plan.padded_size, **config
        )
    )
    evaluate = jax.jit(lambda params, x, y: models.accuracy(model, params, x, y))
    x, y, x_test, y_test = (
        jnp.asarray(a) for a in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test)
    )

    def run(seed, strategy, sigma):
        carry = train.init_carry(jax.random.key(seed), strategy, sigma, model=model, **config)
        carry, truncated = steps_fn(carry, x, y, jnp.int32(plan.steps))
        return (float(evaluate(carry.params, x_test, y_test)), float(carry.opt_state[0].clip_norm),
                bool(truncated))

    return run


def strategies(args):
    quantile = [
        dpo.quantile_clip(args.clip_norm, quantile=q, epsilon=args.clip_epsilon, every=args.every)
        for q in args.targets
    ]
    return {"fixed": [dpo.fixed_clip(c) for c in args.fixed], "quantile": quantile}


def label(name, strategy):
    return (
        f"fixed {float(strategy.initial_norm):g}"
        if name == "fixed"
        else f"quantile q={float(strategy.quantile):g}"
    )


def run_cell(dataset, epsilon, args, rows):
    """Every strategy at every seed, one run after the other (modest CPU on a shared machine)."""
    n = dataset.x_train.shape[0]
    plan = train.plan(
        n, epochs=args.epochs[dataset.name], batch_size=args.batch_size, epsilon=epsilon, delta=DELTA
    )
    print(
        f"\n{dataset.name} at epsilon {epsilon:g}: {plan.steps} steps, padded batch {plan.padded_size}",
        flush=True,
    )
    run = train_steps(dataset, plan, args)
    for name, group in strategies(args).items():
        for strategy in group:
            sigma = train.calibrate(strategy, plan, epsilon)
            start, accs = time.perf_counter(), []
            for seed in range(args.seeds):
                acc, clip, truncated = run(seed, strategy, sigma)
                accs.append(acc)
                rows.append(
                    dict(
                        dataset=dataset.name,
                        epsilon=epsilon,
                        clip=label(name, strategy),
                        seed=seed,
                        sigma=sigma,
                        accuracy=acc,
                        final_clip=clip,
                        truncated=truncated,
                        steps=plan.steps,
                    )
                )
            print(
                f"  {label(name, strategy)}: {args.seeds} runs in {time.perf_counter() - start:.0f} s; "
                f"mean accuracy {np.mean(accs):.4f}",
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
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = dict(
        command="python -m benchmarks.bench_optax_headline " + " ".join(args.argv),
        seconds=seconds,
        load_average=[*args.load, os.getloadavg()[0]],
        fixed_grid=list(args.fixed),
        targets=list(args.targets),
        clip_epsilon=args.clip_epsilon,
        every=args.every,
        runs=rows,
        summary=stats,
    )
    for name, text in (("optax_headline.json", json.dumps(record, indent=1)), ("optax_headline.md", table)):
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out / name)
    print(table, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist", metavar="PATH", help="MNIST CSV, e.g. /work/shared/data/mnist_5k.csv.gz")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--cells", nargs="+", default=[f"{d}:{e:g}" for d, e in CELLS], help="dataset:epsilon"
    )
    parser.add_argument("--out", default=str(OUT), help="folder of optax_headline.json and .md")
    parser.add_argument("--fixed", type=float, nargs="+", default=FIXED_GRID, help="fixed clip norms")
    parser.add_argument("--targets", type=float, nargs="+", default=TARGETS, help="quantile_clip targets")
    parser.add_argument("--clip-norm", type=float, default=settings.DEFAULTS["clip_norm"])
    parser.add_argument("--clip-epsilon", type=float, default=settings.DEFAULTS["clip_epsilon"])
    parser.add_argument("--every", type=int, default=settings.DEFAULTS["every"])
    parser.add_argument("--hidden", type=int, default=settings.DEFAULTS["hidden"])
    parser.add_argument("--learning-rate", type=float, default=settings.DEFAULTS["learning_rate"])
    parser.add_argument("--batch-size", type=int, default=settings.DEFAULTS["batch_size"])
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else __import__("sys").argv[1:]
    args.epochs = dict(settings.DEFAULT_EPOCHS)
    args.load = [os.getloadavg()[0]]  # 1-minute load average at the start (and at each write)
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
