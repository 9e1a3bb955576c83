"""The study runner against the hand-written ``jit(vmap)`` of the same releases (issue 42).

For a fast mechanism (UQE, ``quantiles.unbounded``, median, lower = 0), a mid one (EMQ,
``quantiles.emq``, median) and a heavy one (JointExp, ``quantiles.joint_exp``, quartiles), on
lognormal data, ``trials`` trials x 4 epsilons, each path makes the same releases (trial ``i`` uses
``fold_in(key, i)``, the grid is ``vmap``-ed inside):

* ``hand-written``: ``jax.jit(lambda key, x: vmap over i of vmap over epsilon)`` with the data as an
  argument, and ``hand-written (closed)`` with the data closed over;
* ``monte_carlo(f, key, trials, args=(x,))`` and ``monte_carlo`` with the data closed over;
* ``run_study`` (defaults: chunks sized from memory), whose table's mean absolute error must equal
  the hand-written releases' to float precision (same keys).

Cold: the first call in the process with a fresh function (compiles included). Warm: the median of
``--repeats`` calls, the paths interleaved in each round; a second ``run_study`` must compile nothing
(counted with JAX's compile events). Run from the repository root:
``python -m benchmarks.bench_study [--trials 100000] [--n 100000] [--cases uqe,emq,joint_exp]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import quantiles
from dpjax._src.studies.compiles import CompileCounter
from dpjax._src.studies.steps import trial_key
from dpjax._src.tools.bench.harness import load_average
from dpjax.studies import Mechanism, Study, metrics, monte_carlo, run_study

EPSILONS = (0.1, 0.5, 1.0, 2.0)
BOUNDS = (0.0, 100.0)


def mechanisms():
    """{case: (mechanism(key, x, epsilon), truth(x), trials divisor)}: the heavier, the fewer trials."""
    qs = jnp.asarray([0.25, 0.5, 0.75])
    return {
        "uqe": (lambda k, x, epsilon: quantiles.unbounded(k, x, 0.5, epsilon, lower=0.0),
                lambda x: jnp.median(x), 1),
        "emq": (lambda k, x, epsilon: quantiles.emq(k, x, 0.5, epsilon, bounds=BOUNDS),
                lambda x: jnp.median(x), 100),
        "joint_exp": (lambda k, x, epsilon: jnp.mean(quantiles.joint_exp(k, x, qs, epsilon, bounds=BOUNDS)),
                      lambda x: jnp.mean(jnp.quantile(x, qs)), 1000),
    }


def step_key(study: str, mechanism: str, dataset: str, seed: int = 0):
    """The key ``run_study`` gives this step (``dpjax._src.studies.steps.trial_key``)."""
    return trial_key(seed, study, mechanism, dataset)


def paths(name, mech, truth, x, trials):
    """{path: call() -> mean absolute error per epsilon}, each with a fresh function (cold on first call)."""
    eps = jnp.asarray(EPSILONS, jnp.float32)
    key = step_key(name, name, "lognormal")
    xj = jnp.asarray(x)

    def grid(k, data):
        return jax.vmap(lambda e: jnp.abs(mech(k, data, e) - truth(data)))(eps)

    def trials_of(key, data):
        indices = jnp.arange(trials, dtype=jnp.uint32)
        return jax.vmap(lambda i: grid(jax.random.fold_in(key, i), data))(indices)

    raw = jax.jit(trials_of)
    closed = jax.jit(lambda key: trials_of(key, xj))
    by_arg = lambda k, data: grid(k, data)  # noqa: E731 - a fresh function: its own compiled chunk
    by_closure = lambda k: grid(k, xj)  # noqa: E731
    study = Study(name, mechanisms=[Mechanism(name, lambda k, data, epsilon: mech(k, data, epsilon))],
                  datasets={"lognormal": x}, grid={"epsilon": EPSILONS},
                  truth=lambda data, epsilon: truth(data), metrics=[metrics.abs_error(("mean",))])

    def table_means():
        table = run_study(study, trials=trials, progress=False).table
        return table.sort_values("epsilon")["estimate"].to_numpy()

    return {
        "hand-written": lambda: _mean(raw(key, xj)),
        "hand-written (closed)": lambda: _mean(closed(key)),
        "monte_carlo(args=(x,))": lambda: _mean(monte_carlo(by_arg, key, trials, args=(xj,), progress=False)),
        "monte_carlo (closed)": lambda: _mean(monte_carlo(by_closure, key, trials, progress=False)),
        "run_study": table_means,
    }


def _mean(errors) -> np.ndarray:
    """Mean absolute error per epsilon, in float64 like the study's statistics."""
    return np.asarray(errors, np.float64).mean(axis=0)


def timed(call):
    with CompileCounter() as compiles:
        start = time.perf_counter()
        out = call()
        seconds = time.perf_counter() - start
    return out, seconds, compiles.count


def bench(name, trials, n, repeats):
    mech, truth, divisor = mechanisms()[name]
    trials = max(trials // divisor, 10)
    x = np.random.default_rng(0).lognormal(size=n).astype(np.float32)
    calls = paths(name, mech, truth, x, trials)
    cold, warm, results = {}, {p: [] for p in calls}, {}
    for path, call in calls.items():
        results[path], cold[path], _ = timed(call)
    second = None
    for _ in range(repeats):
        for path, call in calls.items():
            _, seconds, compiles = timed(call)
            warm[path].append(seconds)
            if path == "run_study":
                second = compiles if second is None else max(second, compiles)
    reference = results["hand-written"]
    print(f"\n{name}: n = {n:,}, {trials:,} trials x {len(EPSILONS)} epsilons = {trials * len(EPSILONS):,} "
          f"releases; second run_study compiles: {second}")
    print("| path | cold s | warm s (median) | x hand-written (warm) | mean error equal |")
    print("|---|---|---|---|---|")
    base = statistics.median(warm["hand-written"])
    for path in calls:
        w = statistics.median(warm[path])
        equal = np.allclose(results[path], reference, rtol=1e-5, atol=0)
        print(f"| {path} | {cold[path]:.2f} | {w:.3f} | {w / base:.2f} | {'yes' if equal else 'NO'} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="uqe,emq,joint_exp")
    options = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; load average at start: {load_average()}")
    for name in options.cases.split(","):
        bench(name, options.trials, options.n, options.repeats)
    print(f"\nload average at end: {load_average()}")


if __name__ == "__main__":
    main()
