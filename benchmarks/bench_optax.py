"""DP-SGD with dpjax.optax: accuracy at equal privacy of fixed, geometric and quantile clipping, and
the cost of the clip estimate per step.

Run from the repository root:
``python -m benchmarks.bench_optax --mnist /work/shared/data/mnist_5k.csv.gz`` (``--part speed`` or
``--part accuracy`` for one half; ``--seeds``, ``--epsilon`` to shrink it).

Accuracy (``--part accuracy``), kept small so that it runs in minutes on 2 CPU cores: a
one-hidden-layer tanh MLP (Adam, learning rate 2e-3, expected batch 256, Poisson sampling) on UCI
Adult (shipped with dpjax; 64 hidden units, 2 epochs = 254 steps) and, with ``--mnist``, on MNIST-5k
(4,000 train / 1,000 test; 16 hidden units, 5 epochs = 78 steps), at epsilon in {1, 3, 8} and
delta = 1e-5 for the whole run. The noise multiplier of each strategy is calibrated by
``dpjax.optax.noise_multiplier_for_epsilon`` so that every row has the same (epsilon, delta):

* fixed clips over a grid, and the best of them *in hindsight* (chosen on the test accuracy: not
  private tuning, an upper reference);
* geometric clipping (Andrew et al. 2021) with TF Privacy's defaults: initial 0.1, learning rate 0.2,
  clipped-count stddev 0.05 * batch (count_noise_multiplier 0.1 * batch);
* quantile clipping (UQE, Durfee 2023): initial 0.1, epsilon 0.1 per estimate every 10 steps, which
  costs the same per step as the geometric count (mu^2 / 10 = 0.00157 vs 1 / 25.6^2 = 0.00153 in
  Gaussian-DP units);
* both adaptive strategies at target quantiles 0.5 (Andrew et al.'s default) and 0.9, the same for
  both datasets and every epsilon (no tuning per cell).

Runs of a strategy (seeds x clip grid or targets) are one compiled program (``lax.map`` over
``vmap``-ed groups of runs). Mean and standard deviation over seeds of the test accuracy, and the
median final clip norm.

Speed (``--part speed``): one jitted training step (per-example gradients, aggregation, Adam) at batch
256 on the Adult and MNIST MLPs, timed by the harness of ``dpjax bench`` (``time_jitted``):
``optax.contrib.differentially_private_aggregate`` (fixed clip, no accounting) and dpjax with a fixed,
a geometric and the benchmark's quantile clip, timed both on a step that runs the UQE estimate and on
one that does not (``lax.cond`` skips it); the amortized cost over ``every`` steps follows. The clip
estimates are also timed alone (UQE on the batch's 256 norms; the geometric noisy count) and given as
a share of dpjax's fixed-clip step: end-to-end differences of a few percent are below the timing noise
of a shared machine.
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import optax as dpo
from dpjax._src.datasets import training as data_lib
from dpjax._src.tools.bench.harness import time_jitted
from dpjax._src.tools.bench.report import print_machine, print_table
from dpjax._src.tools.train import models
from dpjax._src.tools.train import run as train

EPSILONS = (1.0, 3.0, 8.0)
DELTA = 1e-5
BATCH = 256
LEARNING_RATE = 2e-3
FIXED_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
TARGETS = (0.5, 0.9)  # target quantiles of the adaptive strategies (Andrew et al.'s default, and a high one)
MODEL = {"adult": dict(hidden=64, epochs=2.0), "mnist": dict(hidden=16, epochs=5.0)}
RUNS_AT_ONCE = 8  # runs vmapped together (memory bound), lax.map over the rest


def geometric_default(quantile=0.5):
    return dpo.geometric_clip(0.1, quantile=quantile, learning_rate=0.2, count_noise_multiplier=0.1 * BATCH)


def quantile_default(quantile=0.5):
    return dpo.quantile_clip(0.1, quantile=quantile, epsilon=0.1, every=10)


def mlp_model(dataset: data_lib.Dataset) -> models.Model:
    return models.mlp((dataset.x_train.shape[1], MODEL[dataset.name]["hidden"], dataset.classes))


def stack(trees):
    return jax.tree.map(lambda *leaves: jnp.stack([jnp.asarray(leaf) for leaf in leaves]), *trees)


def runner(dataset: data_lib.Dataset, plan: train.Plan, *, model=None, learning_rate=LEARNING_RATE,
           runs_at_once=RUNS_AT_ONCE):
    """``jit`` of: runs (keys, strategies, sigmas stacked on a leading axis) -> (accuracy, final clip);
    the MLP of this script unless ``model`` is given."""
    model = mlp_model(dataset) if model is None else model
    config = dict(expected_batch_size=plan.expected_batch_size, learning_rate=learning_rate)

    def one(run, x, y, x_test, y_test):
        key, strategy, sigma = run
        carry = train.init_carry(key, strategy, sigma, model=model, **config)
        carry, truncated = train.run_steps(
            carry, x, y, plan.steps, model=model, rate=plan.sampling_rate, size=plan.padded_size, **config
        )
        return models.accuracy(model, carry.params, x_test, y_test), carry.opt_state[0].clip_norm, truncated

    @jax.jit
    def run_all(runs, x, y, x_test, y_test):
        return jax.lax.map(lambda r: one(r, x, y, x_test, y_test), runs, batch_size=runs_at_once)

    return run_all


def accuracy_part(datasets, seeds: int, epsilons=EPSILONS):
    rows = []
    for dataset in datasets:
        n = dataset.x_train.shape[0]
        epochs = MODEL[dataset.name]["epochs"]
        plan = train.plan(n, epochs=epochs, batch_size=BATCH, epsilon=max(EPSILONS), delta=DELTA)
        print(
            f"\n{dataset.name}: n = {n}, {plan.steps} steps, sampling rate {plan.sampling_rate:.5f}, "
            f"padded batch {plan.padded_size}, {seeds} seeds",
            flush=True,
        )
        run_all = runner(dataset, plan)
        arrays = [jnp.asarray(a) for a in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test)]
        for epsilon in epsilons:
            groups = {
                "fixed": [dpo.fixed_clip(c) for c in FIXED_GRID],
                "geometric": [geometric_default(q) for q in TARGETS],
                "quantile": [quantile_default(q) for q in TARGETS],
            }
            for name, strategies in groups.items():
                start = time.perf_counter()
                sigma = train.calibrate(strategies[0], plan, epsilon)
                calibration = time.perf_counter() - start
                runs = [(s, seed) for s in strategies for seed in range(seeds)]
                keys = jnp.stack([jax.random.key(seed) for _, seed in runs])
                batch = (keys, stack([s for s, _ in runs]), jnp.full(len(runs), sigma, jnp.float32))
                start = time.perf_counter()
                acc, clip_norm, truncated = jax.block_until_ready(run_all(batch, *arrays))
                seconds = time.perf_counter() - start
                acc, clip_norm = np.asarray(acc).reshape(len(strategies), seeds), np.asarray(clip_norm)
                clip_norm = clip_norm.reshape(len(strategies), seeds)
                if np.any(truncated):
                    print(f"  note: a Poisson sample was truncated in {name} (accounted in delta)")
                for i, strategy in enumerate(strategies):
                    label = (
                        f"fixed {strategy.initial_norm:g}"
                        if name == "fixed"
                        else f"{name} q={strategy.quantile:g}"
                    )
                    rows.append(
                        dict(
                            dataset=dataset.name,
                            epsilon=epsilon,
                            clip=label,
                            sigma=sigma,
                            acc_mean=float(acc[i].mean()),
                            acc_std=float(acc[i].std(ddof=1)) if seeds > 1 else 0.0,
                            final_clip=float(np.median(clip_norm[i])),
                        )
                    )
                print(
                    f"  epsilon {epsilon:g} {name:9s}: sigma {sigma:.4f} (calibrated in "
                    f"{calibration:.1f} s), "
                    f"{len(runs)} runs in {seconds:.1f} s, accuracy "
                    + ", ".join(f"{a:.4f}" for a in acc.mean(axis=1)),
                    flush=True,
                )
    print_table("accuracy at equal privacy (mean and std over seeds)", rows)
    summary = []
    for dataset in sorted({r["dataset"] for r in rows}):
        for epsilon in epsilons:
            cell = [r for r in rows if r["dataset"] == dataset and r["epsilon"] == epsilon]
            best = max((r for r in cell if r["clip"].startswith("fixed")), key=lambda r: r["acc_mean"])
            entry = dict(dataset=dataset, epsilon=epsilon, best_fixed=best["clip"])
            entry["best_fixed_acc"] = f"{best['acc_mean']:.4f} ± {best['acc_std']:.4f}"
            for r in cell:
                if r["clip"].startswith(("geometric", "quantile")):
                    within = r["acc_mean"] >= best["acc_mean"] - max(best["acc_std"], r["acc_std"])
                    entry[r["clip"]] = f"{r['acc_mean']:.4f} ± {r['acc_std']:.4f}" + (" *" if within else "")
            summary.append(entry)
    title = "summary: best fixed clip in hindsight vs adaptive clipping (* = within the spread or better)"
    print_table(title, summary)


def step_functions(dataset: data_lib.Dataset):
    """Jitted training steps at batch BATCH (all examples real) for each aggregation."""
    model = mlp_model(dataset)
    params = model.init(jax.random.key(0))
    grads_fn = dpo.per_example_grads(models.example_loss(model))
    key = jax.random.key(1)
    txs = {
        "optax.contrib (fixed)": optax.chain(
            optax.contrib.differentially_private_aggregate(1.0, 1.0, key), optax.adam(LEARNING_RATE)
        ),
        "dpjax fixed": train.optimizer(
            1.0, dpo.fixed_clip(1.0), key, expected_batch_size=BATCH, learning_rate=LEARNING_RATE
        ),
        "dpjax geometric": train.optimizer(
            1.0, geometric_default(), key, expected_batch_size=BATCH, learning_rate=LEARNING_RATE
        ),
        "dpjax quantile, estimating step": train.optimizer(
            1.0, quantile_default(), key, expected_batch_size=BATCH, learning_rate=LEARNING_RATE
        ),
        "dpjax quantile, other step": train.optimizer(
            1.0, quantile_default(), key, expected_batch_size=BATCH, learning_rate=LEARNING_RATE
        ),
    }
    out = {}
    for name, tx in txs.items():

        @jax.jit
        def step(params, state, x, y, tx=tx):
            grads = grads_fn(params, x, y)
            updates, state = tx.update(grads, state, params)
            return optax.apply_updates(params, updates), state

        state = tx.init(params)
        if name == "dpjax quantile, other step":  # step 1: no estimate (every = 10)
            state = (state[0]._replace(step=jnp.ones((), jnp.int32)), *state[1:])
        out[name] = (step, params, state)
    return out


def _row(dataset, aggregation, timing, reference, vs_reference):
    return dict(
        dataset=dataset.name,
        aggregation=aggregation,
        ms_min=1e3 * timing.low,
        ms_median=1e3 * timing.median,
        examples_per_s=BATCH / timing.low if vs_reference.endswith("%") else float("nan"),
        vs_dpjax_fixed=vs_reference,
    )


def speed_part(datasets, repeats: int):
    """Every aggregation's step timed by the harness (``dpjax._src.tools.bench.harness.time_jitted``: compile
    excluded, ``repeats`` calls or more); the minimum is the least disturbed figure on a shared machine."""
    rows = []
    for dataset in datasets:
        x = jnp.asarray(dataset.x_train[:BATCH])
        y = jnp.asarray(dataset.y_train[:BATCH])
        steps = step_functions(dataset)
        times = {
            name: time_jitted(step, params, state, x, y, repeats=repeats)[0]
            for name, (step, params, state) in steps.items()
        }
        reference = times["dpjax fixed"].low
        rows += [
            _row(dataset, name, t, reference, f"{100 * (t.low / reference - 1):+.1f}%")
            for name, t in times.items()
        ]
        # the clip estimates alone, on the step's 256 norms
        grads_fn = dpo.per_example_grads(models.example_loss(mlp_model(dataset)))
        norms = dpo.example_norms(grads_fn(steps["dpjax fixed"][1], x, y))
        estimates = {
            "UQE estimate alone": quantile_default(),
            "geometric count alone": geometric_default(),
        }

        def estimate(strategy, key, norms):
            return strategy.next_norm(
                key,
                jnp.float32(1.0),
                norms,
                jnp.ones(BATCH, bool),
                expected_batch_size=float(BATCH),
                step=jnp.int32(0),
            )

        for name, strategy in estimates.items():
            t = time_jitted(estimate, strategy, jax.random.key(0), norms, repeats=repeats)[0]
            rows.append(_row(dataset, name, t, reference, f"{100 * t.low / reference:.1f}% of it"))
        every = quantile_default().every
        amortized = (
            times["dpjax quantile, estimating step"].low
            + (every - 1) * times["dpjax quantile, other step"].low
        ) / every
        rows.append(
            dict(
                dataset=dataset.name,
                aggregation=f"dpjax quantile, every {every} (amortized)",
                ms_min=1e3 * amortized,
                ms_median=float("nan"),
                examples_per_s=BATCH / amortized,
                vs_dpjax_fixed=f"{100 * (amortized / reference - 1):+.1f}%",
            )
        )
    print_table(f"one training step at batch {BATCH} ({repeats}+ timed calls each, compile excluded)", rows)


def aggregation_part(repeats: int):
    """The aggregation alone (clip, sum, noise of given per-example gradients: the ``training`` family
    of ``dpjax bench``), dpjax's ``dp_aggregate`` and ``optax.contrib.differentially_private_aggregate``
    called alternately (interleaved, so both see the same machine load), ``repeats`` calls each."""
    from dpjax._src.tools.bench.cases import training as cases

    rows = []
    for name, shapes in cases.SHAPES.items():
        grads = cases.gradients(shapes, cases.BATCH)
        ours = jax.jit(cases.release)
        theirs = optax.contrib.differentially_private_aggregate(cases.CLIP, cases.SIGMA, 0)
        state = theirs.init(None)
        update = jax.jit(theirs.update)
        calls = {
            "dpjax": functools.partial(ours, jax.random.key(0), grads),
            "optax": functools.partial(update, grads, state),
        }
        times = {k: [] for k in calls}
        for call in calls.values():
            jax.block_until_ready(call())
        for _ in range(repeats):
            for k, call in calls.items():
                start = time.perf_counter()
                jax.block_until_ready(call())
                times[k].append(time.perf_counter() - start)
        med = {k: float(np.median(v)) for k, v in times.items()}
        rows.append(
            dict(
                batch=f"{cases.BATCH} x {name}",
                dpjax_ms_median=1e3 * med["dpjax"],
                optax_ms_median=1e3 * med["optax"],
                ratio_of_medians=med["dpjax"] / med["optax"],
                ratio_of_minima=min(times["dpjax"]) / min(times["optax"]),
            )
        )
    print_table(f"aggregation alone, {repeats} interleaved calls each (ratio < 1: dpjax faster)", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist", metavar="PATH", help="MNIST CSV, e.g. /work/shared/data/mnist_5k.csv.gz")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon", type=float, nargs="+", default=list(EPSILONS))
    parser.add_argument("--part", choices=("accuracy", "speed", "aggregation", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per aggregation (speed)")
    args = parser.parse_args()
    print_machine()
    datasets = [data_lib.load_adult()]
    if args.mnist:
        datasets.append(data_lib.load_mnist(args.mnist))
    start = time.perf_counter()
    if args.part in ("aggregation", "all"):
        aggregation_part(args.repeats)
    if args.part in ("speed", "all"):
        speed_part(datasets, args.repeats)
    if args.part in ("accuracy", "all"):
        accuracy_part(datasets, args.seeds, tuple(args.epsilon))
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
