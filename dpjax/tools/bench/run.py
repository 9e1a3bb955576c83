"""Times a :class:`~dpjax.tools.bench.case.Case`: single release, Monte Carlo batch, floors, peers.

Every figure of a row is measured in the same process, on the same device, one after the other:
the single release (``jax.jit(release)``, or the eager call for mechanisms that do host work per
call), the Monte Carlo batch (``jax.jit(jax.vmap(release))`` over keys, data shared), the
``jax.random`` floor for the same number of variates in both shapes, the memory floor of one
release (its data read once at the streaming bandwidth measured at the start of the run), and the
peers on the host.
"""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable, Iterable

import jax

from dpjax import interrupt
from dpjax.studies.progress import heartbeat
from dpjax.tools.bench import peers as peer_libraries
from dpjax.tools.bench.case import Case
from dpjax.tools.bench.floor import data_bytes, floor_releases, rng_floor, stream_bandwidth
from dpjax.tools.bench.harness import (
    Timing,
    device_memory,
    device_peak_memory,
    load_average,
    machine_info,
    time_eager,
    time_host,
    time_jitted,
)

__all__ = [
    "batch_size",
    "case_id",
    "measure",
    "run_cases",
]


def batch_size(case: Case, memory: int | None, fraction: float = 0.25) -> int:
    """Monte Carlo releases per call: the case's count, capped so the batch's working memory stays
    below ``fraction`` of the device's memory (``memory`` bytes; no cap when unknown)."""
    if case.releases <= 0:
        return 0
    if memory is None or case.bytes_per_release <= 0:
        return case.releases
    return max(1, min(case.releases, int(fraction * memory) // case.bytes_per_release))


def _timing_record(timing: Timing) -> dict:
    return {
        "seconds": timing.median,
        "min_seconds": timing.low,
        "max_seconds": timing.high,
        "repeats": len(timing.times),
        "releases_per_second": 1.0 / timing.median if timing.median > 0 else None,
        "compile_seconds": timing.compile,
        "memory_bytes": timing.memory,
    }


def _peer_record(peer, single_seconds: float, mc_seconds: float | None, repeats: int, log) -> dict:
    record = {
        "name": peer.name,
        "library": peer.library,
        "version": peer_libraries.version(peer.library),
        "note": peer.note,
    }
    if record["version"] is None:
        record["skipped"] = f"{peer.library} is not installed (from the clone: pip install -e '.[bench]')"
        return record
    try:
        single = time_host(peer.single(), repeats=repeats)
        repeated = time_host(peer.repeated(), repeats=repeats) if peer.repeated else single
    except ImportError as err:
        record["skipped"] = f"import failed: {err}"
        return record
    record.update(
        seconds=single.median,
        min_seconds=single.low,
        max_seconds=single.high,
        repeated_seconds=repeated.median,
        ratio_single=single.median / single_seconds,
        ratio_monte_carlo=repeated.median / mc_seconds if mc_seconds else None,
    )
    log(f"    peer {peer.name}: {single.median:.3g} s per release")
    return record


def _limit(single: dict, data: int, bandwidth: float | None) -> None:
    """Adds the memory floor of one release and its limit (the larger floor) to its timing record."""
    limit, floor = "RNG", single["floor_seconds"]
    if bandwidth and data:
        single["memory_floor_seconds"] = data / bandwidth
        single["memory_floor_ratio"] = single["seconds"] / single["memory_floor_seconds"]
        if single["memory_floor_seconds"] > floor:
            limit, floor = "memory", single["memory_floor_seconds"]
    single["limit"] = limit
    single["limit_ratio"] = single["seconds"] / floor


def measure(
    case: Case,
    *,
    memory: int | None,
    bandwidth: float | None = None,
    repeats: int = 5,
    peer_repeats: int = 3,
    with_peers: bool = True,
    log: Callable[[str], None] = print,
) -> dict:
    """All the timings of one case, as a JSON-ready dict (seconds are per release). ``bandwidth`` is
    the device's streaming bandwidth in bytes per second (:func:`~dpjax.tools.bench.floor.stream_bandwidth`)
    for the memory floor of one release; ``None`` leaves it out."""
    row = {
        "family": case.family,
        "mechanism": case.mechanism,
        "setting": case.setting,
        "noise": case.noise,
        "variates_note": case.variates_note,
    }
    start = time.perf_counter()
    key = jax.random.key(0)
    timer = time_eager if case.eager_single else time_jitted
    single, single_output = timer(case.release, key, *case.args, repeats=repeats)
    row["single"] = _timing_record(single)
    row["single"]["path"] = "eager call" if case.eager_single else "jax.jit"
    releases = batch_size(case, memory)
    output = single_output
    if releases:
        batched = jax.vmap(case.release, in_axes=(0,) + (None,) * len(case.args))
        keys = jax.random.split(jax.random.key(1), releases)
        timing, output = time_jitted(batched, keys, *case.args, repeats=repeats)
        row["monte_carlo"] = {"releases": releases, **_timing_record(timing.per(releases))}
        row["monte_carlo"]["call_seconds"] = timing.median
    variates = case.variates(output) if callable(case.variates) else float(case.variates)
    row["variates"] = variates
    floor = rng_floor(case.noise, variates, repeats=repeats)
    row["single"]["floor_seconds"] = floor.median
    row["single"]["floor_ratio"] = single.median / floor.median
    row["data_bytes"] = data_bytes(case.args)
    _limit(row["single"], row["data_bytes"], bandwidth)
    if releases:
        drawn = floor_releases(variates, releases)
        floor = rng_floor(case.noise, variates, releases=drawn, repeats=repeats)
        row["monte_carlo"]["floor_releases"] = drawn
        row["monte_carlo"]["floor_seconds"] = floor.median
        row["monte_carlo"]["floor_ratio"] = row["monte_carlo"]["seconds"] / floor.median
    log(
        f"  {case.mechanism}: single {single.median:.3g} s"
        + (
            f", Monte Carlo {row['monte_carlo']['seconds']:.3g} s per release x {releases}"
            if releases
            else ""
        )
    )
    mc_seconds = row["monte_carlo"]["seconds"] if releases else None
    row["peers"] = [
        _peer_record(peer, single.median, mc_seconds, peer_repeats, log) for peer in case.peers if with_peers
    ]
    row["wall_seconds"] = time.perf_counter() - start
    return row


def case_id(row: dict) -> tuple:
    """What names a case in the rows of a record: family, mechanism and setting."""
    return row["family"], row["mechanism"], row["setting"]


def run_cases(
    cases: Iterable[Case],
    *,
    command: str,
    scale: float,
    repeats: int = 5,
    peer_repeats: int = 3,
    with_peers: bool = True,
    finished: Iterable[dict] = (),
    on_row: Callable[[dict], None] | None = None,
) -> dict:
    """Measures every case (a failing case is recorded with its error) and returns the JSON record:
    the command, date, machine, load averages before and after, scale, repeats, the rows and the
    ``status``: ``"complete"``, or ``"interrupted"`` when a signal stopped the run (see
    :mod:`dpjax.interrupt`; the rows are the cases finished before it).

    ``finished`` rows (of an interrupted run: ``--resume``) are kept instead of measuring their cases
    again; ``on_row(record)`` is called after each row (to checkpoint the record)."""
    start = time.perf_counter()
    memory = device_memory()
    print(f"{command}: backend {jax.default_backend()}, scale {scale:g}, {repeats} repeats", flush=True)
    with heartbeat("measuring the device's streaming bandwidth"):
        bandwidth = stream_bandwidth(memory, repeats=repeats)
    record = {
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "load_average_start": load_average(),
        "scale": scale,
        "repeats": repeats,
        "stream_bandwidth": bandwidth,
        "rows": [],
    }
    done = {case_id(row): row for row in finished if "error" not in row}
    family, record["status"] = None, "complete"
    for case in cases:
        if case.family != family:
            family = case.family
            print(f"{family}:", flush=True)
        row = done.get((case.family, case.mechanism, case.setting))
        if row is not None:
            print(f"  {case.mechanism}: from the checkpoint", flush=True)
        else:
            try:
                with interrupt.raising(), heartbeat(f"{case.mechanism}: compiling and timing"):
                    row = measure(case, memory=memory, bandwidth=bandwidth, repeats=repeats,
                                  peer_repeats=peer_repeats,
                                  with_peers=with_peers, log=lambda text: print(text, flush=True))
            except interrupt.Interrupted:  # a signal stops the case at once; the finished rows are kept
                record["status"] = "interrupted"
                break
            except Exception as err:  # report, run the other cases, let the caller exit non-zero
                row = {"family": case.family, "mechanism": case.mechanism, "setting": case.setting}
                row["error"] = f"{type(err).__name__}: {err}"
                print(f"error: {case.mechanism}: {row['error']}", file=sys.stderr, flush=True)
        record["rows"].append(row)
        if on_row is not None:
            on_row(record)
    record["load_average_end"] = load_average()
    record["device_peak_memory_bytes"] = device_peak_memory()
    record["wall_seconds"] = time.perf_counter() - start
    return record
