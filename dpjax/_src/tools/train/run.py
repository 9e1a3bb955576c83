"""DP-SGD training example (``dpjax train``): a pure-JAX MLP on UCI Adult (shipped) or a small CNN on
MNIST (a CSV given by path), with per-epoch metrics (and, with ``--out``, CSV, JSON and a figure).

Each step Poisson-samples the training set (every example with probability ``batch_size / n``),
pads the sample to a fixed size, computes per-example gradients, and applies
``optax.chain(dp_aggregate(sigma, clip, key, expected_batch_size=batch_size), optax.adam(lr))``.
sigma is calibrated so that the whole run is (epsilon, delta)-DP (:func:`training_epsilon`).

Padding and truncation (:mod:`dpjax._src.optax.sampling`): the sample is drawn by
:func:`dpjax.optax.poisson_sample` into the smallest padded size whose truncation costs at most 1% of
delta (:func:`dpjax.optax.padded_batch_size`); sigma is calibrated at ``delta_acc = delta - eta (1 +
e^epsilon)`` (:func:`dpjax.optax.truncation_delta`), which makes the truncated run (epsilon, delta)-DP.

Everything per step, and a whole epoch of steps, runs in one ``jit``-compiled ``lax.fori_loop``;
the functions here also ``vmap`` over seeds and clip strategies (the benchmarks do). The command
line (parser, defaults, first line) is :mod:`dpjax._src.tools.train.cli`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax._src.datasets import training as data_lib
from dpjax._src.numerics import ceil_div
from dpjax._src.optax import accounting, sampling
from dpjax._src.optax import clip as clip_lib
from dpjax._src.optax.grads import per_example_grads
from dpjax._src.optax.transform import dp_aggregate
from dpjax._src.outdir import OutputError, RunDir, atomic_path
from dpjax._src.tools.data.catalog import cache_dir
from dpjax._src.tools.train.settings import DEFAULT_EPOCHS, DEFAULT_MODEL, UsageError
from dpjax._src.validation import check_epsilon, check_int, check_positive, check_probability

__all__ = [
    "CNN_CHANNELS",
    "COLUMNS",
    "TRUNCATION_SHARE",
    "Carry",
    "Model",
    "Plan",
    "accuracy",
    "calibrate",
    "cnn",
    "epoch_ends",
    "example_loss",
    "init_carry",
    "load",
    "main",
    "mlp",
    "model_for",
    "optimizer",
    "plan",
    "plot",
    "run_steps",
    "spent_epsilon",
    "strategy_from_args",
    "write_outputs",
]

TRUNCATION_SHARE = 0.01  # share of delta set aside for the truncation of oversized samples


class Plan(NamedTuple):
    """The public schedule of a run (what the accountant needs)."""

    steps: int
    sampling_rate: float
    expected_batch_size: float
    padded_size: int
    delta_accounted: float


def plan(n: int, *, epochs: float, batch_size: int, epsilon: float, delta: float) -> Plan:
    """Steps, sampling rate and padded size of ``epochs`` epochs at expected batch ``batch_size``."""
    n = check_int(n, "n", minimum=2)
    batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=n)
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    epochs = check_positive(epochs, "epochs")
    rate = batch_size / n
    steps = max(1, round(epochs * n / batch_size))
    size = sampling.padded_batch_size(
        n, sampling_rate=rate, steps=steps, epsilon=epsilon, delta=delta, share=TRUNCATION_SHARE
    )
    charge = sampling.truncation_delta(n, sampling_rate=rate, steps=steps, padded_size=size, epsilon=epsilon)
    return Plan(steps, rate, float(batch_size), size, delta - charge)


class Model(NamedTuple):
    """A classifier: ``init(key) -> params`` (jitted: one compilation, not one per eager op) and
    ``logits(params, x)`` for one example ``x`` (a flat feature vector) or a batch of them."""

    init: Callable
    logits: Callable


def mlp(sizes) -> Model:
    """An MLP with layer widths ``sizes`` (tanh hidden layers, linear output), Glorot-uniform weights
    and zero biases."""
    sizes = tuple(sizes)

    def init(key):
        params = []
        for k, (fan_in, fan_out) in zip(
            jax.random.split(key, len(sizes) - 1), itertools.pairwise(sizes), strict=True
        ):
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            params.append(
                (jax.random.uniform(k, (fan_in, fan_out), minval=-limit, maxval=limit), jnp.zeros(fan_out))
            )
        return params

    def logits(params, x):
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    return Model(jax.jit(init), logits)


CNN_CHANNELS = (8, 16)  # two 3x3 convolutions of stride 2: 28x28 -> 14x14x8 -> 7x7x16 -> classes


def cnn(classes: int, side: int = 28, channels=CNN_CHANNELS) -> Model:
    """A small CNN for ``side x side`` grey images given as flat vectors: 3x3 convolutions of stride 2
    ('SAME' padding, tanh) with ``channels`` output channels, then a linear layer to ``classes``
    (9,098 parameters for 10 classes at the defaults). He-uniform convolution weights,
    Glorot-uniform output weights, zero biases."""
    channels = tuple(channels)
    out_side = side
    for _ in channels:
        out_side = ceil_div(out_side, 2)
    flat = out_side * out_side * channels[-1]

    def init(key):
        keys = jax.random.split(key, len(channels) + 1)
        params, fan_in = [], 1
        for k, c in zip(keys[:-1], channels, strict=True):
            limit = math.sqrt(6.0 / (9 * fan_in))
            params.append(
                (jax.random.uniform(k, (3, 3, fan_in, c), minval=-limit, maxval=limit), jnp.zeros(c))
            )
            fan_in = c
        limit = math.sqrt(6.0 / (flat + classes))
        params.append(
            (jax.random.uniform(keys[-1], (flat, classes), minval=-limit, maxval=limit), jnp.zeros(classes))
        )
        return params

    def logits(params, x):
        batch_shape = x.shape[:-1]
        h = x.reshape((-1, side, side, 1))
        for w, b in params[:-1]:
            h = jax.lax.conv_general_dilated(h, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jnp.tanh(h + b)
        w, b = params[-1]
        return (h.reshape(h.shape[0], -1) @ w + b).reshape(*batch_shape, classes)

    return Model(jax.jit(init), logits)


def model_for(name: str, dataset: data_lib.Dataset, hidden: int) -> Model:
    """``"mlp"`` (one hidden layer of ``hidden`` units) or ``"cnn"`` (:func:`cnn`, 28x28 images)."""
    if name == "cnn":
        if dataset.x_train.shape[1] != 28 * 28:
            raise ValueError(
                f"--model cnn needs 28x28 images, {dataset.name} has {dataset.x_train.shape[1]} features"
            )
        return cnn(dataset.classes)
    return mlp((dataset.x_train.shape[1], hidden, dataset.classes))


def example_loss(model: Model):
    """Softmax cross-entropy of one example (``x`` without a batch axis, integer label ``y``)."""

    def loss(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model.logits(params, x), y)

    return loss


def accuracy(model: Model, params, x, y):
    """Fraction of correct argmax predictions."""
    return jnp.mean(jnp.argmax(model.logits(params, x), axis=-1) == y)


def optimizer(noise_multiplier, strategy, key, *, expected_batch_size, learning_rate):
    """The DP-SGD optimizer of the example: dp_aggregate then Adam."""
    return optax.chain(
        dp_aggregate(noise_multiplier, strategy, key, expected_batch_size=expected_batch_size),
        optax.adam(learning_rate),
    )


class Carry(NamedTuple):
    params: list
    opt_state: tuple
    key: jax.Array


def init_carry(key, strategy, noise_multiplier, *, model: Model, expected_batch_size, learning_rate) -> Carry:
    """Initial parameters, optimizer state and sampling key of one run."""
    init_key, dp_key, sample_key = jax.random.split(key, 3)
    params = model.init(init_key)
    tx = optimizer(
        noise_multiplier,
        strategy,
        dp_key,
        expected_batch_size=expected_batch_size,
        learning_rate=learning_rate,
    )
    return Carry(params, tx.init(params), sample_key)


def run_steps(
    carry: Carry,
    x,
    y,
    count,
    *,
    model: Model,
    rate,
    size,
    expected_batch_size,
    learning_rate,
    microbatch_size=None,
):
    """``count`` DP-SGD steps (``count`` may be traced: one compilation serves every chunk length).

    Returns the carry and whether any Poisson sample was truncated.
    """
    state = carry.opt_state[0]
    tx = optimizer(
        state.noise_multiplier,
        state.clip,
        state.key,
        expected_batch_size=expected_batch_size,
        learning_rate=learning_rate,
    )
    grads_fn = per_example_grads(example_loss(model), microbatch_size=microbatch_size)

    def step(_, loop):
        carry, truncated = loop
        key, batch_key = jax.random.split(carry.key)
        idx, mask, cut = sampling.poisson_sample(batch_key, x.shape[0], rate, size)
        grads = grads_fn(carry.params, x[idx], y[idx])
        updates, opt_state = tx.update(grads, carry.opt_state, carry.params, example_mask=mask)
        return Carry(optax.apply_updates(carry.params, updates), opt_state, key), truncated | cut

    return jax.lax.fori_loop(0, count, step, (carry, jnp.asarray(False)))


def calibrate(strategy, plan_: Plan, epsilon: float) -> float:
    """The noise multiplier of the run for ``(epsilon, delta)`` (see the module docstring)."""
    return accounting.noise_multiplier_for_epsilon(
        epsilon, plan_.delta_accounted, steps=plan_.steps, sampling_rate=plan_.sampling_rate, clip=strategy
    )


def strategy_from_args(args, expected_batch_size: float):
    """The clip strategy the command line asks for."""
    if args.clip == "fixed":
        return clip_lib.fixed_clip(args.clip_norm)
    if args.clip == "quantile":
        return clip_lib.quantile_clip(
            args.clip_norm, quantile=args.quantile, epsilon=args.clip_epsilon, every=args.every
        )
    z_b = args.count_noise_multiplier or 0.1 * expected_batch_size
    return clip_lib.geometric_clip(args.clip_norm, quantile=args.quantile, count_noise_multiplier=z_b)


def load(name: str, path) -> data_lib.Dataset:
    """The named dataset (``path`` is required for MNIST)."""
    if name == "adult":
        return data_lib.load_adult()
    if path is None:  # the `dpjax data fetch` cache
        path = cache_dir() / "mnist_5k.csv.gz"
        if not path.is_file():
            raise UsageError(f"no {path}: run `dpjax data fetch mnist`, or pass --data PATH (a MNIST CSV)")
    try:
        return data_lib.load_mnist(path)
    except (OSError, ValueError) as error:
        raise UsageError(f"--data {path}: {error}") from None


def main(args) -> int:
    """The body of ``dpjax train`` (after :func:`dpjax._src.tools.train.cli.run` printed its first line):
    ``UsageError`` becomes one ``error:`` line and status 2."""
    try:
        return _run(args)
    except UsageError as error:
        print(f"dpjax train: error: {error}", file=sys.stderr)
        return 2


def _out_dir(args):
    """The checked ``--out`` (a :class:`~dpjax._src.outdir.RunDir`, like the other commands': refused when it
    holds files, unless ``--overwrite`` and a ``dpjax train`` run wrote them), or ``None``."""
    if args.out is None:
        return None
    out = RunDir(args.out, overwrite=getattr(args, "overwrite", False), own_files=_OUT_FILES,
                 command="dpjax train")
    try:
        out.check()
    except OutputError as error:
        raise UsageError(str(error)) from None
    return out


def _prepare(args):
    """Dataset, plan, strategy, noise multiplier and model of the run (each phase announced)."""
    out = _out_dir(args)
    print("  loading data ...", flush=True)
    dataset = load(args.dataset, args.data)
    n = dataset.x_train.shape[0]
    epochs = args.epochs or DEFAULT_EPOCHS[args.dataset]
    if args.batch_size > n:
        raise UsageError(f"--batch-size {args.batch_size} exceeds the {n} training examples")
    plan_ = plan(n, epochs=epochs, batch_size=args.batch_size, epsilon=args.epsilon, delta=args.delta)
    try:
        model = model_for(
            DEFAULT_MODEL[args.dataset] if args.model == "auto" else args.model, dataset, args.hidden
        )
        strategy = strategy_from_args(args, plan_.expected_batch_size)
        print(f"  calibrating the noise for {plan_.steps} steps ...", flush=True)
        sigma = calibrate(strategy, plan_, args.epsilon)
    except (ValueError, OverflowError) as error:
        raise UsageError(str(error)) from None
    return out, dataset, epochs, plan_, strategy, sigma, model


def epoch_ends(steps: int, n: int, batch_size: int) -> list[int]:
    """The step counts at which each (expected) epoch ends; the last is ``steps``."""
    per_epoch = n / batch_size
    ends = [min(steps, round(e * per_epoch)) for e in range(1, math.ceil(steps / per_epoch - 1e-9) + 1)]
    return sorted(set(ends) | {steps})


def _say(line: str) -> None:
    """Prints ``line`` wrapped to the screen (``$COLUMNS``, else the terminal's, else 100)."""
    width = shutil.get_terminal_size((100, 24)).columns
    print(textwrap.fill(line, width, subsequent_indent="    "), flush=True)


def _run(args) -> int:
    out, dataset, epochs, plan_, strategy, sigma, model = _prepare(args)
    n = dataset.x_train.shape[0]
    _say(
        f"  {dataset.name}: n = {n}, {epochs:g} epochs = {plan_.steps} steps at sampling rate "
        f"{plan_.sampling_rate:.5f} (padded batch {plan_.padded_size}), noise multiplier {sigma:.4f}"
    )
    config = dict(expected_batch_size=plan_.expected_batch_size, learning_rate=args.learning_rate)
    carry = init_carry(jax.random.key(args.seed), strategy, sigma, model=model, **config)
    x, y = jnp.asarray(dataset.x_train), jnp.asarray(dataset.y_train)
    x_test, y_test = jnp.asarray(dataset.x_test), jnp.asarray(dataset.y_test)
    steps_fn = jax.jit(
        functools.partial(
            run_steps,
            model=model,
            rate=plan_.sampling_rate,
            size=plan_.padded_size,
            microbatch_size=args.microbatch_size,
            **config,
        )
    )
    evaluate = jax.jit(lambda params, x, y: accuracy(model, params, x, y))
    print("  compiling the training step and the evaluation ...", flush=True)
    start = time.perf_counter()
    steps_fn = steps_fn.lower(carry, x, y, jnp.int32(1)).compile()
    evaluate = {a.shape: evaluate.lower(carry.params, a, b).compile() for a, b in ((x, y), (x_test, y_test))}
    print(f"  compiled in {time.perf_counter() - start:.1f} s; training", flush=True)

    def metrics(epoch, carry, seconds):
        state = carry.opt_state[0]
        row = dict(
            epoch=epoch,
            step=int(state.step),
            train_accuracy=float(evaluate[x.shape](carry.params, x, y)),
            test_accuracy=float(evaluate[x_test.shape](carry.params, x_test, y_test)),
            clip_norm=float(state.clip_norm),
            epsilon_spent=spent_epsilon(state, plan_.delta_accounted, sampling_rate=plan_.sampling_rate),
            seconds=seconds,
        )
        print(
            f"  epoch {epoch}: step {row['step']}/{plan_.steps}, test accuracy {row['test_accuracy']:.4f}, "
            f"clip norm {row['clip_norm']:.4g}, epsilon spent {row['epsilon_spent']:.4f} "
            f"({seconds:.1f} s)",
            flush=True,
        )
        return row

    rows, truncated, done, start = [metrics(0, carry, 0.0)], False, 0, time.perf_counter()
    for epoch, end in enumerate(epoch_ends(plan_.steps, n, args.batch_size), 1):
        carry, cut = steps_fn(carry, x, y, jnp.int32(end - done))
        truncated |= bool(cut)
        done = end
        rows.append(metrics(epoch, carry, time.perf_counter() - start))
    last = rows[-1]
    _say(
        f"test accuracy {last['test_accuracy']:.4f}; final clip norm {last['clip_norm']:.4g}; epsilon spent "
        f"{last['epsilon_spent']:.4f} at delta {plan_.delta_accounted:.3g} (+ truncation share); "
        f"{last['seconds']:.1f} s"
    )
    if truncated:
        print("note: a Poisson sample exceeded the padded batch and was truncated (accounted in delta)")
    if out is not None:
        summary = dict(
            dataset=dataset.name,
            n=n,
            steps=plan_.steps,
            sampling_rate=plan_.sampling_rate,
            padded_batch=plan_.padded_size,
            noise_multiplier=sigma,
            delta_accounted=plan_.delta_accounted,
            truncated=truncated,
        )
        out.prepare()
        arguments = dict(vars(args), epochs=epochs, run=None)
        write_outputs(out.staging, rows, arguments, summary, shown=args.out)
        out.commit(complete=True, files=_OUT_FILES)
    return 0


def spent_epsilon(state, delta, *, sampling_rate) -> float:
    """Epsilon spent so far (:func:`dpjax.optax.spent_epsilon`; 0 before the first step)."""
    return accounting.spent_epsilon(state, delta, sampling_rate=sampling_rate) if int(state.step) else 0.0


_OUT_FILES = ("metrics.csv", "metrics.json", "metrics.png")
COLUMNS = ("epoch", "step", "train_accuracy", "test_accuracy", "clip_norm", "epsilon_spent", "seconds")


def write_outputs(out: Path, rows, args: dict, summary: dict, *, shown=None) -> None:
    """``metrics.csv`` (one row per epoch, epoch 0 before training: ``COLUMNS``), ``metrics.json``
    (the arguments, the run's plan and noise, and the same rows) and ``metrics.png`` (test accuracy,
    clip norm and epsilon spent per epoch) in ``out`` (named ``shown`` on the screen), each written to
    a temporary file and renamed."""
    import csv

    print(f"  writing {shown or out}/metrics.csv, metrics.json, metrics.png ...", flush=True)

    def write_csv(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    record = dict(arguments={k: v for k, v in args.items() if k != "run"}, run=summary, epochs=rows)
    for name, write in (("metrics.csv", write_csv),
                        ("metrics.json", lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n")),
                        ("metrics.png", lambda tmp: plot(rows, summary, tmp))):
        with atomic_path(out / name) as tmp:
            write(tmp)


def plot(rows, summary: dict, path) -> None:
    """Three panels against the epoch (0: before training): test (and train) accuracy, the clip norm
    the next step uses, epsilon spent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    axes[0].plot(epochs, [r["test_accuracy"] for r in rows], "o-", label="test")
    axes[0].plot(epochs, [r["train_accuracy"] for r in rows], "s--", label="train")
    axes[0].set(ylabel="accuracy", title="accuracy")
    axes[0].legend()
    axes[1].plot(epochs, [r["clip_norm"] for r in rows], "o-")
    axes[1].set(ylabel="clip norm", yscale="log", title="clip norm (after the epoch)")
    axes[2].plot(epochs, [r["epsilon_spent"] for r in rows], "o-")
    axes[2].set(ylabel="epsilon", title=f"epsilon spent (delta {summary['delta_accounted']:.3g})")
    for ax in axes:
        ax.set_xlabel("epoch")
    fig.suptitle(f"dpjax train: {summary['dataset']}, noise multiplier {summary['noise_multiplier']:.3f}")
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
