"""DP training steps side by side: what a private step costs against the non-private one, and
dpjax's steps against a hand-written step, optax.contrib's and jax_privacy's.

Run from the repository root: ``python -m benchmarks.bench_training`` (``--models adult cnn embedding``,
``--rounds``, ``--steps`` to change it; ``--mnist PATH`` reads MNIST-5k images for the CNN, otherwise
random images of the same shape: the cost of a step does not depend on the pixel values).

Models (the expected batch 256 of a Poisson sample padded by ``dpjax.optax.padded_batch_size``, 5
epochs at epsilon 3, delta 1e-5; the same padded batch and mask in every step):

* ``adult``: the MLP 107-64-2 of ``dpjax train`` on UCI Adult (n = 32,561);
* ``cnn``: the CNN of ``dpjax train --dataset mnist`` (two 3x3 stride-2 convolutions, 9,098
  parameters) on 28x28 images (n = 4,000);
* ``embedding``: an embedding table (5,000 x 32) over 32 tokens, mean-pooled, then dense 32-32-2
  (n = 25,000 token sequences).

Steps, each one jitted training step (gradient, privatization, Adam update), timed as ``--steps``
steps in one ``lax.fori_loop`` (device time, no Python in between), the variants interleaved in
``--rounds`` rounds in one process (median over rounds):

* ``non-private``: the masked mean of the losses, ``jax.grad``, Adam;
* ``dp_gradients auto`` / ``ghost`` / ``vmap``: :func:`dpjax.optax.dp_gradients` (fixed clip) with
  each ``method`` (``auto``, the default: the per-layer choice of its static cost model);
* ``dp_aggregate``: ``per_example_grads`` then ``optax.chain(dp_aggregate, adam)``;
* ``hand-written``: ``per_example_grads``, then a 10-line clip, weighted sum and
  ``jax.random.normal`` noise (no treatment of non-finite rows), then Adam;
* ``optax.contrib``: ``per_example_grads`` (padding rows zeroed) then
  ``optax.chain(optax.contrib.differentially_private_aggregate, adam)``;
* ``jax_privacy``: ``jax_privacy.clipped_grad`` (padding flagged) and its ``gaussian_privatizer``,
  then Adam (when ``jax_privacy`` is installed: the ``bench`` extra);
* ``aggregation: dp_aggregate`` / ``aggregation: hand-written``: the aggregation alone, on given
  per-example gradients.

Peak memory: the compiled step's temporary buffers (``memory_analysis().temp_size_in_bytes``, XLA's
own accounting, deterministic) plus its arguments and outputs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpjax import optax as dpo
from dpjax._src.tools.train import models

try:
    import jax_privacy
except ImportError:  # the bench extra is not installed
    jax_privacy = None

EXPECTED = 256
SIGMA, CLIP = 1.0, 1.0
LEARNING_RATE = 2e-3


def embedding_model(vocab=5000, tokens=32, dim=32, hidden=32, classes=2) -> models.Model:
    def init(key):
        k = jax.random.split(key, 3)
        return {
            "table": jax.random.normal(k[0], (vocab, dim)) * 0.1,
            "dense": (jax.random.normal(k[1], (dim, hidden)) / np.sqrt(dim), jnp.zeros(hidden)),
            "out": (jax.random.normal(k[2], (hidden, classes)) / np.sqrt(hidden), jnp.zeros(classes)),
        }

    def logits(params, ids):
        h = params["table"][ids].mean(axis=-2)
        h = jnp.tanh(h @ params["dense"][0] + params["dense"][1])
        return h @ params["out"][0] + params["out"][1]

    return models.Model(jax.jit(init), logits)


def problem(name: str, mnist):
    """``(model, n, x, y)``: the model and its data."""
    rng = np.random.default_rng(0)
    if name == "adult":
        from dpjax._src.datasets import training as data_lib

        adult = data_lib.load_adult()
        return models.mlp((107, 64, 2)), adult.x_train.shape[0], adult.x_train, adult.y_train
    if name == "cnn":
        if mnist:
            from dpjax._src.datasets import training as data_lib

            data = data_lib.load_mnist(mnist)
            return models.cnn(10), data.x_train.shape[0], data.x_train, data.y_train
        return models.cnn(10), 4000, rng.random((4000, 784), np.float32), rng.integers(0, 10, 4000)
    n = 25_000
    return embedding_model(), n, rng.integers(0, 5000, (n, 32)).astype(np.int32), rng.integers(0, 2, n)


def hand_written(grads, mask, key):
    """Clip, weighted sum and Gaussian noise, as a user would write it in 10 lines."""
    leaves = jax.tree.leaves(grads)
    norms = jnp.sqrt(sum(jnp.sum(jnp.square(g.reshape(g.shape[0], -1)), axis=1) for g in leaves))
    weights = jnp.where(mask, jnp.minimum(1.0, CLIP / norms), 0.0)
    summed = jax.tree.map(lambda g: jnp.tensordot(weights, g, axes=(0, 0)), grads)
    keys = jax.random.split(key, len(leaves))
    noised = [
        (s + SIGMA * CLIP * jax.random.normal(k, s.shape)) / EXPECTED
        for s, k in zip(jax.tree.leaves(summed), keys, strict=True)
    ]
    return jax.tree.unflatten(jax.tree.structure(summed), noised)


def variants(model: models.Model):
    """``{name: (init(params) -> carry, step(carry, x, y, mask) -> carry)}``; carry = (params, state)."""
    loss = models.example_loss(model)
    per_example = dpo.per_example_grads(loss)
    adam = optax.adam(LEARNING_RATE)
    key = jax.random.key(1)

    def apply(params, opt_state, grads):
        updates, opt_state = adam.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def nonprivate(carry, x, y, mask):
        params, opt_state = carry
        grads = jax.grad(
            lambda p: jnp.sum(jnp.where(mask, jax.vmap(loss, (None, 0, 0))(p, x, y), 0)) / EXPECTED
        )(params)
        return apply(params, opt_state, grads)

    def private(method):
        fn = dpo.dp_gradients(loss, SIGMA, CLIP, key, expected_batch_size=EXPECTED, method=method)

        def step(carry, x, y, mask):
            params, (opt_state, state) = carry
            grads, state = fn(params, state, x, y, example_mask=mask)
            params, opt_state = apply(params, opt_state, grads)
            return params, (opt_state, state)

        return (lambda p: (p, (adam.init(p), fn.init(p)))), step

    def chained(tx, zero_padding=False, mask_arg=True):
        def step(carry, x, y, mask):
            params, opt_state = carry
            grads = per_example(params, x, y)
            if zero_padding:
                grads = jax.tree.map(lambda g: g * mask.reshape((-1,) + (1,) * (g.ndim - 1)), grads)
            extra = dict(example_mask=mask) if mask_arg else {}
            updates, opt_state = tx.update(grads, opt_state, params, **extra)
            return optax.apply_updates(params, updates), opt_state

        return (lambda p: (p, tx.init(p))), step

    def hand(carry, x, y, mask):
        params, (opt_state, k) = carry
        k, step_key = jax.random.split(k)
        params, opt_state = apply(params, opt_state, hand_written(per_example(params, x, y), mask, step_key))
        return params, (opt_state, k)

    out = {
        "non-private": ((lambda p: (p, adam.init(p))), nonprivate),
        "dp_gradients auto": private("auto"),
        "dp_gradients ghost": private("ghost"),
        "dp_gradients vmap": private("vmap"),
        "dp_aggregate": chained(
            optax.chain(dpo.dp_aggregate(SIGMA, CLIP, key, expected_batch_size=EXPECTED), adam)
        ),
        "hand-written": ((lambda p: (p, (adam.init(p), key))), hand),
        "optax.contrib": chained(
            optax.chain(optax.contrib.differentially_private_aggregate(CLIP, SIGMA, 0), adam),
            zero_padding=True,
            mask_arg=False,
        ),
    }
    if jax_privacy is not None:
        clipped = jax_privacy.clipped_grad(
            loss, l2_clip_norm=CLIP, batch_argnums=(1, 2), keep_batch_dim=False, normalize_by=EXPECTED
        )
        privatizer = jax_privacy.noise_addition.gaussian_privatizer(
            stddev=SIGMA * CLIP / EXPECTED, prng_key=1
        )

        def jp_step(carry, x, y, mask):
            params, (opt_state, noise_state) = carry
            grads = clipped(params, x, y, is_padding_example=~mask)
            grads, noise_state = privatizer.update(grads, noise_state)
            params, opt_state = apply(params, opt_state, grads)
            return params, (opt_state, noise_state)

        out["jax_privacy"] = ((lambda p: (p, (adam.init(p), privatizer.init(p)))), jp_step)
    return out


def aggregation_variants(model: models.Model):
    """The aggregation alone on given per-example gradients (carry: the DP state or the key)."""
    tx = dpo.dp_aggregate(SIGMA, CLIP, jax.random.key(1), expected_batch_size=EXPECTED)

    def ours(carry, grads, mask):
        return tx.update(grads, carry, example_mask=mask)

    def hand(k, grads, mask):
        k, step_key = jax.random.split(k)
        return hand_written(grads, mask, step_key), k

    return {
        "aggregation: dp_aggregate": (lambda p: tx.init(p), ours),
        "aggregation: hand-written": (lambda p: jax.random.key(1), hand),
    }


def compiled_loop(step, carry, args, steps: int):
    """``(run, peak bytes)``: ``run()`` runs ``steps`` steps in one jitted ``lax.fori_loop``."""

    def loop(carry, *args):
        return jax.lax.fori_loop(0, steps, lambda _, c: step(c, *args), carry)

    one = jax.jit(step).lower(carry, *args).compile().memory_analysis()
    peak = one.temp_size_in_bytes + one.argument_size_in_bytes + one.output_size_in_bytes
    compiled = jax.jit(loop).lower(carry, *args).compile()
    return (lambda: compiled(carry, *args)), peak


def aggregation_calls(step, carry, args, steps: int):
    """``(run, None)``: ``run()`` makes ``steps`` calls of the jitted aggregation (in a loop of one
    program, XLA would hoist the aggregation of the same gradients out of it)."""
    compiled = jax.jit(step).lower(carry, *args).compile()

    def run():
        for _ in range(steps):
            out = compiled(carry, *args)
        return out

    return run, None


def measure(name: str, mnist, rounds: int, steps: int):
    model, n, x_all, y_all = problem(name, mnist)
    rate = EXPECTED / n
    size = dpo.padded_batch_size(
        n, sampling_rate=rate, steps=round(5 * n / EXPECTED), epsilon=3.0, delta=1e-5
    )
    idx, mask, _ = dpo.poisson_sample(jax.random.key(2), n, rate, size)
    x, y = jnp.asarray(x_all)[idx], jnp.asarray(y_all)[idx]
    params = model.init(jax.random.key(0))
    runs = {}
    for label, (init, step) in variants(model).items():
        runs[label] = compiled_loop(step, init(params), (x, y, mask), steps)
    grads = dpo.per_example_grads(models.example_loss(model))(params, x, y)
    for label, (init, step) in aggregation_variants(model).items():
        runs[label] = aggregation_calls(step, init(params), (grads, mask), steps)
    times = {label: [] for label in runs}
    for _ in range(rounds):
        for label, (run, _) in runs.items():
            jax.block_until_ready(run())  # warm
            start = time.perf_counter()
            jax.block_until_ready(run())
            times[label].append((time.perf_counter() - start) / steps)
    return size, {label: (statistics.median(t), runs[label][1]) for label, t in times.items()}


def report(name: str, size: int, results: dict) -> None:
    base_time, base_bytes = results["non-private"]
    print(f"\n{name} (padded batch {size}, expected {EXPECTED})")
    print(f"{'step':28s} {'steps/s':>9s} {'x non-private':>14s} {'peak MB':>9s} {'x non-private':>14s}")
    for label, (seconds, peak) in results.items():
        if label.startswith("aggregation"):
            continue
        speed, memory = base_time / seconds, peak / base_bytes
        print(f"{label:28s} {1 / seconds:9.0f} {speed:14.3f} {peak / 2**20:9.2f} {memory:14.2f}")
    pairs = [
        ("dp_aggregate", "hand-written"),
        ("dp_aggregate", "optax.contrib"),
        ("dp_gradients auto", "dp_gradients vmap"),
        ("dp_gradients auto", "optax.contrib"),
        ("dp_gradients ghost", "optax.contrib"),
        ("dp_gradients auto", "jax_privacy"),
        ("dp_gradients ghost", "jax_privacy"),
        ("aggregation: dp_aggregate", "aggregation: hand-written"),
    ]
    for ours, theirs in pairs:
        if theirs in results:
            print(f"time {ours} / {theirs}: {results[ours][0] / results[theirs][0]:.3f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["adult", "cnn", "embedding"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--mnist", default=None)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; load {os.getloadavg()}")
    print(f"jax_privacy {getattr(jax_privacy, '__version__', 'not installed')}")
    for name in args.models:
        size, results = measure(name, args.mnist, args.rounds, args.steps)
        report(name, size, results)
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
