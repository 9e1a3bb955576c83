"""One release of every `dpjax bench` row that has peers, against each peer, interleaved.

The rows, data and peers are those of :mod:`dpjax.tools.bench.cases` (same input to both sides). Unlike
`dpjax bench`, which times dpjax and then each peer, the calls alternate round by round (dpjax,
peer 1, peer 2, ..., dpjax, ...), so a change of machine load hits every column alike; each cell
gives the fastest call (wall time) and the median CPU time of the process per call (all threads:
the work done, which the scheduling delays of a loaded machine do not inflate; XLA's CPU thread
pool waits for its threads, the peers run on one). The dpjax call is the one `dpjax bench` times: the
jitted ``jax.jit(release)``, compiled before timing and called as a user calls it, on the case's
arguments (NumPy data transferred per call), or the eager call for the rows that bin concrete data
on the host side. A row of another method of a
mechanism with peers (``selection.exponential_mechanism (method='inverse_cdf')``) on the same data
with the same noise is timed against that mechanism's peers: the same release law, same input.

    python -m benchmarks.bench_peers [--size SCALE] [--rounds N] [FAMILY ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import jax

from dpjax._src.tools.bench import cases as bench_cases
from dpjax._src.tools.bench.harness import load_average
from dpjax._src.tools.bench.report import seconds

FAMILIES = ("selection", "svt", "quantiles", "aggregates", "topk", "budgeting")


def _dpjax_call(case):
    key = jax.random.key(0)
    if case.eager_single:
        return lambda: case.release(key, *case.args)
    jitted = jax.jit(case.release)
    jax.block_until_ready(jitted(key, *case.args))  # compiled once, then called as a user calls it
    return lambda: jitted(key, *case.args)


def _timed(call) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    start, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(call())
    return time.perf_counter() - start, time.process_time() - cpu


def measure(case, rounds: int) -> list[tuple[str, list[tuple[float, float]]]]:
    """``[(name, [(wall, cpu), ...])]``: dpjax first, then each installed peer, in alternation."""
    calls = [("dpjax", _dpjax_call(case))]
    for peer in case.peers:
        try:
            calls.append((f"{peer.name} ({peer.library})", peer.single()))
        except ImportError:
            continue
    for _, call in calls:  # warm-up: compilation, first-call caches
        _timed(call)
    times = {name: [] for name, _ in calls}
    for _ in range(rounds):
        for name, call in calls:
            times[name].append(_timed(call))
    return [(name, times[name]) for name, _ in calls]


def _summary(times) -> tuple[float, float]:
    """The fastest wall time and the median CPU time."""
    return min(wall for wall, _ in times), statistics.median(cpu for _, cpu in times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=FAMILIES)
    parser.add_argument("--size", type=float, default=0.1, help="scale of the headline sizes (0.1 = --quick)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print(f"load average at start: {load_average()}")
    print(
        "| mechanism | setting | dpjax: fastest [median CPU] | peer | peer: fastest [median CPU] "
        "| peer / dpjax (fastest) | peer / dpjax (median CPU) |"
    )
    print("|---|---|---|---|---|---|---|")
    for family in args.families:
        family_cases = bench_cases.cases(family, args.size)
        with_peers = {case.mechanism: case for case in family_cases if case.peers}
        for case in family_cases:
            base = with_peers.get(case.mechanism.split(" (")[0])
            if not case.peers and base and (base.setting, base.noise) == (case.setting, case.noise):
                case = dataclasses.replace(case, peers=base.peers)
            if not case.peers:
                continue
            (_, mine), *others = measure(case, args.rounds)
            wall, cpu = _summary(mine)
            for name, theirs in others:
                peer_wall, peer_cpu = _summary(theirs)
                print(
                    f"| {case.mechanism} | {case.setting} | {seconds(wall)} [{seconds(cpu)}] | {name} "
                    f"| {seconds(peer_wall)} [{seconds(peer_cpu)}] | {peer_wall / wall:.3g}x "
                    f"| {peer_cpu / cpu:.3g}x |",
                    flush=True,
                )
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
