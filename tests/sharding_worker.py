"""Subprocess side of ``tests/cross/test_sharding.py``: runs on N virtual CPU devices (or as one process of
a ``jax.distributed`` job) and prints one JSON line of results.

``XLA_FLAGS=--xla_force_host_platform_device_count=N`` must be set before JAX is imported, hence a
separate process. Usage::

    python tests/sharding_worker.py registry 8 [NAME_PREFIX ...]
    python tests/sharding_worker.py monte_carlo 8
    python tests/sharding_worker.py top_k 8
    python tests/sharding_worker.py distributed PROCESS_ID NUM_PROCESSES PORT  (2 devices each)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback

MODE = sys.argv[1]
LOCAL_DEVICES = 2 if MODE == "distributed" else int(sys.argv[2])
# after the flags the test suite passes on (tests/conftest.py: the CPU emitters it compiles with)
os.environ["XLA_FLAGS"] = " ".join(
    [os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={LOCAL_DEVICES}"]
).strip()
os.environ["JAX_PLATFORMS"] = "cpu"  # virtual host devices, also on a machine with an accelerator
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # mechanism_registry

import jax  # noqa: E402

if MODE == "distributed":  # before anything starts the backend
    PROCESS_ID, PROCESSES, PORT = map(int, sys.argv[2:5])
    jax.distributed.initialize(f"localhost:{PORT}", PROCESSES, PROCESS_ID, initialization_timeout=120)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec  # noqa: E402

from dpjax import additive, budgeting, quantiles, selection, topk  # noqa: E402
from dpjax._src.numerics import ceil_div  # noqa: E402
from dpjax._src.studies import runner  # noqa: E402
from dpjax._src.studies.compiled import _trials_function  # noqa: E402

KEY = jax.random.key(17)
# The mechanisms run across processes by the distributed test (a few of each kind of kernel).
DISTRIBUTED = (
    "selection.gumbel_top_k", "topk.limited_domain", "budgeting.pie_ni", "additive.laplace_mechanism"
)


def host(a) -> np.ndarray:
    """``a`` on this host, gathered from every process when it spans several."""
    if isinstance(a, jax.Array) and not a.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(a, tiled=True))
    return np.asarray(a)


# Floats of a mechanism on sharded data may be summed in another order (per shard, then across the
# shards): a sum of n terms reordered moves by up to about n ulp (2 ulp seen for kde_baseline's sum
# over 20 users split in 2 shards), so registry results are compared within 4 ulp.
REGISTRY_ULP = 4


def compare(got, want, maxulp: int = 1) -> str | None:
    """``None`` when the pytrees agree (integers and bools exactly, floats within ``maxulp`` ulp)."""
    got, want = [host(g) for g in jax.tree.leaves(got)], jax.tree.leaves(want)
    if len(got) != len(want):
        return f"{len(got)} leaves, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"leaf {i}: {g.dtype}{g.shape}, expected {w.dtype}{w.shape}"
        if np.issubdtype(w.dtype, np.floating):
            same_nan = np.array_equal(np.isnan(g), np.isnan(w))
            finite = ~np.isnan(w)
            try:
                np.testing.assert_array_max_ulp(g[finite], w[finite], maxulp=maxulp)
            except AssertionError as error:
                return f"leaf {i}: {str(error).strip().splitlines()[0]}"
            if not same_nan:
                return f"leaf {i}: NaN pattern differs"
        elif not np.array_equal(g, w):
            return f"leaf {i}: {g.ravel()[:8]} != {w.ravel()[:8]}"
    return None


def grow(value, devices: int):
    """The data with its leading (data) axis repeated up to a multiple of ``devices`` (ties included)."""
    value = np.asarray(value)
    if value.ndim == 0:
        return value
    n = value.shape[0]
    size = ceil_div(n, devices) * devices
    return np.take(value, np.arange(size) % n, axis=0)


# Where a mechanism is called: ``(axes, how, where)``, on a mesh with explicit or automatic axes,
# eagerly or under ``jax.jit`` (the data as arguments), outside any mesh context or inside
# ``jax.set_mesh`` (jax 0.10 has no ``use_mesh``: ``set_mesh`` replaced it). Each context is a
# compilation of its own (the context is part of what is traced), so each mechanism runs in two
# complementary contexts (every level of each factor: eagerly and under jit, inside and outside
# set_mesh, explicit and automatic axes; as many compilations as the one context per axis type
# before), and successive mechanisms rotate through the four complementary pairs, so the registry
# covers all eight combinations (eager inside set_mesh on explicit axes, the reported failure,
# included).
ROTATION = (
    (("explicit", "eager", "set_mesh"), ("auto", "jit", "plain")),
    (("explicit", "jit", "set_mesh"), ("auto", "eager", "plain")),
    (("explicit", "eager", "plain"), ("auto", "jit", "set_mesh")),
    (("explicit", "jit", "plain"), ("auto", "eager", "set_mesh")),
)
EAGER_PLAIN = (("explicit", "eager", "plain"), ("auto", "eager", "plain"))


def in_context(where: str, mesh):
    return jax.set_mesh(mesh) if where == "set_mesh" else contextlib.nullcontext()


def run_in(mechanism, data: dict, mesh, how: str, where: str):
    """The mechanism's output on ``data`` (already placed) in one context, or the error's first line."""
    try:
        with in_context(where, mesh):
            if how == "jit":
                return jax.jit(lambda key, data: mechanism.call(key, data=data))(KEY, data)
            return mechanism.call(KEY, data=data)
    except Exception as error:  # reported by name, with the error's first line
        if os.environ.get("SHARDING_TRACEBACK"):
            traceback.print_exc()
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}"


def registry(devices: int, names=None, contexts=None) -> dict:
    """Every registry entry (or those whose name starts with one of ``names``) on data sharded
    along its leading axis over all ``devices`` (of every process) in each of ``contexts``
    (default: the ``ROTATION`` pair of its index), vs the same data on one device (eager, no
    mesh). Verdicts are keyed ``name|axes|how|where``; each
    mechanism's wall time goes to stderr."""
    from mechanism_registry import all_mechanisms

    meshes = {
        "explicit": jax.make_mesh((devices,), ("d",), (AxisType.Explicit,)),
        "auto": jax.make_mesh((devices,), ("d",), (AxisType.Auto,)),
    }
    results = {}
    for index, mechanism in enumerate(all_mechanisms()):
        if names and not mechanism.name.startswith(tuple(names)):
            continue
        start = time.perf_counter()
        data = {name: grow(value, devices) for name, value in mechanism.data.items()}
        want = mechanism.call(KEY, data={k: jnp.asarray(v) for k, v in data.items()})
        for axes, how, where in contexts or ROTATION[index % len(ROTATION)]:
            mesh = meshes[axes]

            def put(value, mesh=mesh):
                spec = PartitionSpec("d") if value.ndim else PartitionSpec()
                return jax.device_put(value, NamedSharding(mesh, spec))

            got = run_in(mechanism, {k: put(v) for k, v in data.items()}, mesh, how, where)
            verdict = got if isinstance(got, str) else compare(got, want, REGISTRY_ULP)
            results[f"{mechanism.name}|{axes}|{how}|{where}"] = verdict
        print(f"{mechanism.name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return results


def trial(key, scores):
    """One Monte Carlo trial: a float and an integer release."""
    top = selection.gumbel_top_k(key, scores, k=3, epsilon=1.0)
    return additive.laplace_mechanism(key, scores.sum(), 1.0), top


def monte_carlo(devices: int, memory: bool = True) -> dict:
    """Sharded Monte Carlo over all ``devices`` vs one device, and the compiled memory per device."""
    scores = (jnp.arange(64.0) % 7, )
    want = runner.monte_carlo(trial, KEY, 1000, args=scores, chunk_size=256)
    results = {}
    for kind, axis_type in (("explicit", AxisType.Explicit), ("auto", AxisType.Auto)):
        mesh = jax.make_mesh((devices,), ("d",), (axis_type,))
        got = runner.monte_carlo(trial, KEY, 1000, args=scores, chunk_size=256, mesh=mesh)
        results[kind] = compare(got, want)
    if not memory:
        return results
    memory = {}
    for n in (1, 2, 4, 8):
        if n <= devices:
            mesh = jax.make_mesh((n,), ("d",), devices=jax.devices()[:n])
            chunk = jax.jit(_trials_function(trial, 4096, mesh))
            analysis = chunk.lower(KEY, jnp.uint32(0), scores).compile().memory_analysis()
            memory[n] = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
    results["memory"] = memory
    results["kernels"] = kernel_memory(devices)
    return results


# The heavy kernels whose memory per device must fall as 1/devices: (call, data size).
HEAVY = {
    "budgeting.pie_ni": (
        lambda key, d: budgeting.pie_ni(key, d, 1.0, c=2, beta0=0.1, nu_low=-1.0, nu_high=1.0), 2**15),
    "budgeting.kde": (  # distance mode: one coordinate per user
        lambda key, d: budgeting.kde(key, d[:, None], 1.0, jnp.zeros(1), bandwidth=1.0, c=2, beta0=0.1,
                                     mode="distance"), 2**15),
    "quantiles.unbounded": (lambda key, x: quantiles.unbounded(key, x, 0.5, 1.0), 2**20),
    "topk.limited_domain": (lambda key, c: topk.limited_domain(key, c, k=4, kbar=8, epsilon=1.0, delta=1e-6),
                            2**20),
}


def kernel_memory(devices: int) -> dict:
    """Compiled memory per device (arguments + temporaries + outputs) of the heavy kernels under
    ``jit`` on data sharded over 1 and ``devices`` devices (explicit axes; nothing is allocated)."""
    key = jax.ShapeDtypeStruct((), KEY.dtype)
    out = {}
    for name, (fn, n) in HEAVY.items():
        out[name] = {}
        for count in (1, devices):
            mesh = jax.make_mesh((count,), ("d",), (AxisType.Explicit,), devices=jax.devices()[:count])
            data = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=NamedSharding(mesh, PartitionSpec("d")))
            m = jax.jit(fn).lower(key, data).compile().memory_analysis()
            out[name][count] = m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
    return out


def top_k(devices: int) -> dict:
    """``sharded.top_k`` on heavily tied sharded data (1-D and batched, eager and jit) vs
    ``lax.top_k`` on one device: values and indices identical."""
    from dpjax import sharded

    rng = np.random.default_rng(0)
    data = [rng.integers(0, 5, 8 * devices).astype(np.float32), rng.integers(0, 3, (3, 4 * devices))]
    results = {}
    for kind, axis_type in (("explicit", AxisType.Explicit), ("auto", AxisType.Auto)):
        mesh = jax.make_mesh((devices,), ("d",), (axis_type,))
        verdicts = []
        for x in data:
            spec = PartitionSpec(*(None,) * (x.ndim - 1), "d")
            xs = jax.device_put(x, NamedSharding(mesh, spec))
            for k in (1, 3, 4, 5, x.shape[-1]):
                want = jax.lax.top_k(jnp.asarray(x), k)
                verdicts.append(compare(sharded.top_k(xs, k), want))
                verdicts.append(compare(jax.jit(sharded.top_k, static_argnums=1)(xs, k), want))
        results[kind] = next((v for v in verdicts if v is not None), None)
    return results


def main() -> None:
    if MODE == "registry":
        out = registry(int(sys.argv[2]), names=sys.argv[3:])
    elif MODE == "top_k":
        out = top_k(int(sys.argv[2]))
    elif MODE == "monte_carlo":
        out = monte_carlo(int(sys.argv[2]))
    elif MODE == "distributed":
        devices = jax.device_count()
        assert devices == PROCESSES * LOCAL_DEVICES, jax.devices()
        out = {
            "devices": devices,
            "monte_carlo": monte_carlo(devices, memory=False),
            "registry": registry(devices, names=DISTRIBUTED, contexts=EAGER_PLAIN),
        }
        jax.distributed.shutdown()
    else:
        raise SystemExit(f"unknown mode {MODE}")
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
