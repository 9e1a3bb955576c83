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
import math
import shutil
import sys
import textwrap
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax._src.datasets import training as data_lib
from dpjax._src.host_checks import check_epsilon, check_int, check_positive, check_probability
from dpjax._src.optax import accounting, sampling
from dpjax._src.optax import clip as clip_lib
from dpjax._src.optax.grads import per_example_grads
from dpjax._src.optax.transform import dp_aggregate
from dpjax._src.studies.progress import heartbeat
from dpjax._src.tools.data.catalog import cache_dir
from dpjax._src.tools.outdir import OutputError, RunDir
from dpjax._src.tools.train.models import Model, accuracy, example_loss, model_for
from dpjax._src.tools.train.outputs import OUT_FILES, write_outputs
from dpjax._src.tools.train.settings import DEFAULT_EPOCHS, DEFAULT_MODEL, UsageError

__all__ = [
    "TRUNCATION_SHARE",
    "Carry",
    "Plan",
    "calibrate",
    "epoch_ends",
    "init_carry",
    "load",
    "main",
    "optimizer",
    "plan",
    "run_steps",
    "spent_epsilon",
    "strategy_from_args",
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
    """The checked ``--out`` (a :class:`~dpjax._src.tools.outdir.RunDir`, like the other commands':
    refused when it holds files, unless ``--overwrite`` and a ``dpjax train`` run wrote them), or
    ``None``."""
    if args.out is None:
        return None
    out = RunDir(args.out, overwrite=getattr(args, "overwrite", False), own_files=OUT_FILES,
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
        with heartbeat("calibrating the noise", stream=sys.stdout):
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


def _compiled(args, plan_, strategy, sigma, model, dataset):
    """The initial carry, the data on the device, the compiled training steps and the compiled
    evaluation (one per data shape)."""
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
    steps_fn = steps_fn.lower(carry, x, y, jnp.int32(1)).compile()
    evaluate = {a.shape: evaluate.lower(carry.params, a, b).compile() for a, b in ((x, y), (x_test, y_test))}
    return carry, (x, y, x_test, y_test), steps_fn, evaluate


def _run(args) -> int:
    out, dataset, epochs, plan_, strategy, sigma, model = _prepare(args)
    n = dataset.x_train.shape[0]
    _say(
        f"  {dataset.name}: n = {n}, {epochs:g} epochs = {plan_.steps} steps at sampling rate "
        f"{plan_.sampling_rate:.5f} (padded batch {plan_.padded_size}), noise multiplier {sigma:.4f}"
    )
    print("  compiling the training step and the evaluation ...", flush=True)
    start = time.perf_counter()
    with heartbeat("compiling", stream=sys.stdout):  # the model's initialisation is compiled too
        carry, data, steps_fn, evaluate = _compiled(args, plan_, strategy, sigma, model, dataset)
    x, y, x_test, y_test = data
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
        with heartbeat(f"epoch {epoch}: steps {done + 1}-{end}", stream=sys.stdout):
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
        out.commit(complete=True, files=OUT_FILES)
    return 0


def spent_epsilon(state, delta, *, sampling_rate) -> float:
    """Epsilon spent so far (:func:`dpjax.optax.spent_epsilon`; 0 before the first step)."""
    return accounting.spent_epsilon(state, delta, sampling_rate=sampling_rate) if int(state.step) else 0.0
