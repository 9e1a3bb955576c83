"""DP-SGD training example (``dpjax train``): a pure-JAX MLP on UCI Adult (shipped) or MNIST.

Each step Poisson-samples the training set (every example with probability ``batch_size / n``),
pads the sample to a fixed size, computes per-example gradients, and applies
``optax.chain(dp_aggregate(sigma, clip, key, expected_batch_size=batch_size), optax.adam(lr))``.
sigma is calibrated so that the whole run is (epsilon, delta)-DP (:func:`training_epsilon`).

Padding and truncation: the padded size s is the smallest with ``steps * P(Binomial(n, rate) > s)
<= eta`` (Chernoff bound), ``eta = delta / (100 (1 + e^epsilon))``; a sample larger than s would be
truncated. The truncated run differs from the Poisson one with probability at most eta, so it is
``(epsilon, delta_acc + eta (1 + e^epsilon))``-DP when the Poisson run is ``(epsilon, delta_acc)``-DP;
sigma is calibrated at ``delta_acc = 0.99 delta``, which makes the total at most delta.

Everything per step, and a whole chunk of steps, runs in one ``jit``-compiled ``lax.scan``; the
functions here also ``vmap`` over seeds and clip strategies (the benchmark does).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpjax.optax import accounting
from dpjax.optax import clip as clip_lib
from dpjax.optax import data as data_lib
from dpjax.optax.grads import per_example_grads
from dpjax.optax.transform import dp_aggregate
from dpjax.validation import check_epsilon, check_int, check_probability

TRUNCATION_SHARE = 0.01  # share of delta set aside for the truncation of oversized samples


class Plan(NamedTuple):
    """The public schedule of a run (what the accountant needs)."""

    steps: int
    sampling_rate: float
    expected_batch_size: float
    padded_size: int
    delta_accounted: float


def padded_size(n: int, rate: float, steps: int, eta: float) -> int:
    """Smallest s with ``steps * P(Binomial(n, rate) > s) <= eta``, by the Chernoff bound
    ``P(X >= a n) <= exp(-n KL(a || rate))`` for ``a > rate``."""
    s = math.ceil(n * rate)
    while s < n:
        a = (s + 1) / n
        kl = a * math.log(a / rate) + ((1 - a) * math.log((1 - a) / (1 - rate)) if a < 1 else 0.0)
        if steps * math.exp(-n * kl) <= eta:
            return s
        s += 1
    return n


def plan(n: int, *, epochs: float, batch_size: int, epsilon: float, delta: float) -> Plan:
    """Steps, sampling rate and padded size of ``epochs`` epochs at expected batch ``batch_size``."""
    n = check_int(n, "n", minimum=2)
    batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=n)
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    rate = batch_size / n
    steps = max(1, round(epochs * n / batch_size))
    eta = TRUNCATION_SHARE * delta / (1 + math.exp(epsilon))
    return Plan(
        steps, rate, float(batch_size), padded_size(n, rate, steps, eta), (1 - TRUNCATION_SHARE) * delta
    )


def poisson_batch(key, n: int, rate, size: int):
    """Poisson sample of ``range(n)`` (each index with probability ``rate``) in ``size`` slots.

    The gaps between selected indices are i.i.d. Geometric(rate), so ``size + 1`` geometric draws
    give the first ``size`` selected indices exactly. Returns ``(indices int32[size], mask
    bool[size], truncated bool)``; ``truncated`` says a selected index did not fit.
    """
    positions = jnp.cumsum(jax.random.geometric(key, rate, (size + 1,))) - 1
    mask = positions[:size] < n
    return jnp.where(mask, positions[:size], 0).astype(jnp.int32), mask, positions[size] < n


def mlp_init(key, sizes) -> list[tuple[jax.Array, jax.Array]]:
    """Glorot-uniform weights and zero biases of an MLP with layer widths ``sizes``."""
    params = []
    for k, (fan_in, fan_out) in zip(
        jax.random.split(key, len(sizes) - 1), itertools.pairwise(sizes), strict=True
    ):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        params.append(
            (jax.random.uniform(k, (fan_in, fan_out), minval=-limit, maxval=limit), jnp.zeros(fan_out))
        )
    return params


def mlp_logits(params, x):
    """tanh hidden layers, linear output."""
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def example_loss(params, x, y):
    """Softmax cross-entropy of one example (``x`` without a batch axis, integer label ``y``)."""
    return optax.softmax_cross_entropy_with_integer_labels(mlp_logits(params, x), y)


def accuracy(params, x, y):
    """Fraction of correct argmax predictions."""
    return jnp.mean(jnp.argmax(mlp_logits(params, x), axis=-1) == y)


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


def init_carry(key, strategy, noise_multiplier, *, sizes, expected_batch_size, learning_rate) -> Carry:
    """Initial parameters, optimizer state and sampling key of one run."""
    init_key, dp_key, sample_key = jax.random.split(key, 3)
    params = mlp_init(init_key, sizes)
    tx = optimizer(
        noise_multiplier,
        strategy,
        dp_key,
        expected_batch_size=expected_batch_size,
        learning_rate=learning_rate,
    )
    return Carry(params, tx.init(params), sample_key)


def run_steps(
    carry: Carry, x, y, count, *, rate, size, expected_batch_size, learning_rate, microbatch_size=None
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
    grads_fn = per_example_grads(example_loss, microbatch_size=microbatch_size)

    def step(_, loop):
        carry, truncated = loop
        key, batch_key = jax.random.split(carry.key)
        idx, mask, cut = poisson_batch(batch_key, x.shape[0], rate, size)
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
    if path is None:
        raise SystemExit("dpjax train: error: --data PATH is required for --dataset mnist")
    return data_lib.load_mnist(path)


def add_parser(commands) -> argparse.ArgumentParser:
    """Adds ``dpjax train`` to the CLI's subcommands."""
    from dpjax.cli import positive_float, positive_int

    p = commands.add_parser(
        "train",
        help="DP-SGD on UCI Adult or MNIST with a fixed, quantile or geometric clip norm",
        description="Trains a small MLP with dpjax.optax.dp_aggregate and Adam, calibrating the noise "
        "so the whole run is (epsilon, delta)-DP (add/remove one example, Poisson sampling).",
    )
    p.add_argument("--dataset", choices=("adult", "mnist"), default="adult")
    p.add_argument("--data", metavar="PATH", help="MNIST CSV (e.g. mnist_5k.csv.gz); Adult ships with dpjax")
    p.add_argument("--clip", choices=("fixed", "quantile", "geometric"), default="quantile")
    p.add_argument(
        "--clip-norm", type=positive_float, default=1.0, help="fixed or initial clip norm (default 1)"
    )
    p.add_argument("--quantile", type=float, default=0.5, help="target unclipped fraction (default 0.5)")
    p.add_argument(
        "--clip-epsilon", type=positive_float, default=0.1, help="quantile clip: epsilon per estimate"
    )
    p.add_argument("--every", type=positive_int, default=10, help="quantile clip: estimate every N steps")
    p.add_argument(
        "--count-noise-multiplier", type=positive_float, help="geometric clip (default 0.1 * batch size)"
    )
    p.add_argument("--epsilon", type=positive_float, default=3.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--epochs", type=positive_float, default=5.0)
    p.add_argument("--batch-size", type=positive_int, default=256, help="expected batch size (default 256)")
    p.add_argument("--hidden", type=positive_int, default=64)
    p.add_argument("--learning-rate", type=positive_float, default=2e-3)
    p.add_argument("--microbatch-size", type=positive_int, help="per-example gradients this many at a time")
    p.add_argument("--seed", type=int, default=0)
    return p


def run(args: argparse.Namespace) -> int:
    """``dpjax train``: prints the calibrated noise, progress per chunk and the test accuracy."""
    from tqdm.auto import tqdm

    dataset = load(args.dataset, args.data)
    n = dataset.x_train.shape[0]
    plan_ = plan(n, epochs=args.epochs, batch_size=args.batch_size, epsilon=args.epsilon, delta=args.delta)
    strategy = strategy_from_args(args, plan_.expected_batch_size)
    sigma = calibrate(strategy, plan_, args.epsilon)
    print(
        f"dpjax train: {dataset.name}, n = {n}, {plan_.steps} steps at sampling rate "
        f"{plan_.sampling_rate:.5f} "
        f"(padded batch {plan_.padded_size}), clip {args.clip}, noise multiplier {sigma:.4f} for "
        f"epsilon {args.epsilon:g} at delta {args.delta:g}",
        flush=True,
    )
    config = dict(expected_batch_size=plan_.expected_batch_size, learning_rate=args.learning_rate)
    sizes = (dataset.x_train.shape[1], args.hidden, dataset.classes)
    carry = init_carry(jax.random.key(args.seed), strategy, sigma, sizes=sizes, **config)
    x, y = jnp.asarray(dataset.x_train), jnp.asarray(dataset.y_train)
    chunk = max(1, math.ceil(plan_.steps / 20))
    steps_fn = jax.jit(
        lambda carry, x, y, count: run_steps(
            carry,
            x,
            y,
            count,
            rate=plan_.sampling_rate,
            size=plan_.padded_size,
            microbatch_size=args.microbatch_size,
            **config,
        )
    )
    truncated = False
    start = time.perf_counter()
    with tqdm(total=plan_.steps, unit="step") as bar:
        done = 0
        while done < plan_.steps:
            count = min(chunk, plan_.steps - done)
            carry, cut = steps_fn(carry, x, y, count)
            truncated |= bool(cut)
            done += count
            bar.set_postfix(clip=f"{float(carry.opt_state[0].clip_norm):.3g}")
            bar.update(count)
    seconds = time.perf_counter() - start
    acc = float(accuracy(carry.params, jnp.asarray(dataset.x_test), jnp.asarray(dataset.y_test)))
    spent = accounting.spent_epsilon(
        carry.opt_state[0], plan_.delta_accounted, sampling_rate=plan_.sampling_rate
    )
    print(
        f"test accuracy {acc:.4f}; final clip norm {float(carry.opt_state[0].clip_norm):.4g}; epsilon spent "
        f"{spent:.4f} at delta {plan_.delta_accounted:.3g} (+ truncation share); {seconds:.1f} s"
    )
    if truncated:
        print("note: a Poisson sample exceeded the padded batch and was truncated (accounted in delta)")
    return 0
