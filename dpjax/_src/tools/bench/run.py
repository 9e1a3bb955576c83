"""Times a :class:`~dpjax._src.tools.bench.case.Case`: single release, Monte Carlo batch, floors, peers.

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
from typing import Any

import jax

from dpjax._src import interrupt
from dpjax._src.studies.progress import heartbeat
from dpjax._src.tools.bench import peers as peer_libraries
from dpjax._src.tools.bench.bound import (
    Limits,
    bound,
    bytes_moved,
    measure_limits,
    rebound,
    self_check,
    threefry_hashes,
)
from dpjax._src.tools.bench.case import Case
from dpjax._src.tools.bench.floor import data_bytes, floor_releases, rng_floor
from dpjax._src.tools.bench.harness import (
    Timing,
    device_memory,
    device_peak_memory,
    load_average,
    machine_info,
    time_eager,
    time_host,
    time_jitted,
)
from dpjax._src.tools.bench.report import say

__all__ = [
    "MIN_RELEASES",
    "batch_size",
    "case_id",
    "load_is_quiet",
    "measure",
    "run_cases",
]

MIN_RELEASES = 1_000  # a Monte Carlo batch this large is what a study sees (preparations amortized)


def batch_size(case: Case, memory: int | None, fraction: float = 0.25) -> tuple[int, str]:
    """Monte Carlo releases per call and why: the case's count, at least ``MIN_RELEASES``, capped
    so the batch's working memory stays below ``fraction`` of the device's memory (``memory``
    bytes; no cap when unknown). ``(0, "")`` for a single-release-only case."""
    if case.releases <= 0:
        return 0, ""
    wanted = max(case.releases, MIN_RELEASES)
    why = "the minimum batch" if wanted == MIN_RELEASES else "the row's batch"
    if memory is None or case.bytes_per_release <= 0:
        return wanted, why
    cap = max(1, int(fraction * memory) // case.bytes_per_release)
    if cap < wanted:
        return cap, (f"capped by memory: {case.bytes_per_release / 2**20:.3g} MiB per release, "
                     f"{fraction:g} of {memory / 2**30:.3g} GiB")
    return wanted, why


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


def _limit(part: dict, nbytes: int, hashes: tuple[float, int], limits: Limits, releases: int = 1) -> None:
    """Adds the limit of a timed part (its bound per release and ``limit_ratio``) to its record;
    ``hashes``: (threefry hashes, loops left out) of :func:`~dpjax._src.tools.bench.bound.threefry_hashes`."""
    part["bound"] = bound(nbytes, hashes[0], limits, releases, hashes[1])
    part["limit_ratio"] = part["seconds"] / part["bound"]["seconds"] if part["bound"]["seconds"] else None


def _bound_note(row: dict) -> str:
    """One line explaining the bound of a row (both parts)."""
    parts = []
    for name in ("single", "monte_carlo"):
        b = row.get(name, {}).get("bound")
        if b:
            loops = b["uncounted_loops"]
            loops = f" (draws of {loops} data-dependent loops not counted)" if loops else ""
            parts.append(f"{name.replace('_', ' ')} ({row[name]['method']}): {b['bytes']:.3g} B moved and "
                         f"{b['random_bits']:.3g} random bits{loops} per release, {b['binds']} binds")
    return ("; ".join(parts) + " (bytes: data read once per call, keys, outputs; bits: threefry hashes "
            "in the jaxpr x 64; limit = max(bytes / bandwidth at that size, bits / RNG rate))")


def _monte_carlo(case: Case, releases: int, why: str, repeats: int, limits: Limits | None):
    """Times ``jit(vmap(release))`` over ``releases`` keys; returns its record and output."""
    batched = jax.vmap(case.release, in_axes=(0,) + (None,) * len(case.args))
    keys = jax.random.split(jax.random.key(1), releases)
    timing, output = time_jitted(batched, keys, *case.args, repeats=repeats)
    record = {"releases": releases, "batch_reason": why, "method": case.methods[1],
              **_timing_record(timing.per(releases)), "call_seconds": timing.median}
    if limits is not None:
        reads = (keys, case.args, case.host_data)
        _limit(record, bytes_moved(reads, output), threefry_hashes(batched, keys, *case.args), limits,
               releases)
    return record, output


def _floors(row: dict, case: Case, variates: float, releases: int, repeats: int) -> None:
    """The ``jax.random`` floors (the same number of variates drawn by ``jax.random``), for reference."""
    floor = rng_floor(case.noise, variates, repeats=repeats)
    row["single"]["floor_seconds"] = floor.median
    row["single"]["floor_ratio"] = row["single"]["seconds"] / floor.median
    if releases:
        drawn = floor_releases(variates, releases)
        floor = rng_floor(case.noise, variates, releases=drawn, repeats=repeats)
        row["monte_carlo"]["floor_releases"] = drawn
        row["monte_carlo"]["floor_seconds"] = floor.median
        row["monte_carlo"]["floor_ratio"] = row["monte_carlo"]["seconds"] / floor.median


def measure(
    case: Case,
    *,
    memory: int | None,
    limits: Limits | None = None,
    repeats: int = 5,
    peer_repeats: int = 3,
    with_peers: bool = True,
    log: Callable[[str], None] = print,
) -> dict:
    """All the timings of one case, as a JSON-ready dict (seconds are per release). ``limits``: the
    device's measured rates (:func:`~dpjax._src.tools.bench.bound.measure_limits`) for the limit of
    each part; ``None`` leaves the limits out."""
    row: dict[str, Any] = {  # a JSON record: values of every JSON type
        "family": case.family, "mechanism": case.mechanism, "setting": case.setting,
        "method": case.method or "(one kernel)", "model": case.model, "noise": case.noise,
        "variates_note": case.variates_note,
    }
    start = time.perf_counter()
    key = jax.random.key(0)
    timer = time_eager if case.eager_single else time_jitted
    single, single_output = timer(case.release, key, *case.args, repeats=repeats)
    row["single"] = _timing_record(single)
    row["single"]["path"] = "eager call" if case.eager_single else "jax.jit"
    row["single"]["method"] = case.methods[0]
    if limits is not None:
        reads = (key, case.args, case.host_data)
        _limit(row["single"], bytes_moved(reads, single_output),
               threefry_hashes(case.release, key, *case.args), limits)
    releases, why = batch_size(case, memory)
    output = single_output
    if releases:
        row["monte_carlo"], output = _monte_carlo(case, releases, why, repeats, limits)
    if limits is not None:
        row["bound"] = _bound_note(row)
    row["variates"] = case.variates(output) if callable(case.variates) else float(case.variates)
    row["data_bytes"] = data_bytes((case.args, case.host_data))
    _floors(row, case, row["variates"], releases, repeats)
    batch = (f", Monte Carlo {row['monte_carlo']['seconds']:.3g} s per release x {releases}"
             if releases else "")
    log(f"  {case.mechanism}: single {single.median:.3g} s{batch}")
    mc_seconds = row["monte_carlo"]["seconds"] if releases else None
    row["peers"] = [
        _peer_record(peer, single.median, mc_seconds, peer_repeats, log) for peer in case.peers if with_peers
    ]
    row["wall_seconds"] = time.perf_counter() - start
    return row


def case_id(row: dict) -> tuple:
    """What names a case in the rows of a record: family, mechanism and setting."""
    return row["family"], row["mechanism"], row["setting"]


def _rebound(record: dict, limits: Limits, kept=()) -> None:
    """Recomputes the limits of the rows measured in this run with ``limits`` (the best rates of the
    run); ``kept`` rows (from the checkpoint of an interrupted run) keep their own."""
    record["limits"] = limits.to_json()
    kept_ids = {id(row) for row in kept}
    for row in record["rows"]:
        if id(row) in kept_ids:
            continue
        for part in ("single", "monte_carlo"):
            if "bound" in row.get(part, {}):
                rebound(row[part], limits)
        if "bound" in row:
            row["bound"] = _bound_note(row)


def load_is_quiet(record: dict) -> bool | None:
    """Whether the machine stayed quiet: no 1-minute load average (before, during, after the run)
    above one per core; ``None`` when the record has no loads."""
    loads = [record.get("load_average_start"), *record.get("load_average_during", []),
             record.get("load_average_end")]
    ones = [load[0] for load in loads if load]
    cores = record.get("machine", {}).get("cores")
    if not ones or not cores:
        return None
    return max(ones) <= cores


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
    :mod:`dpjax._src.interrupt`; the rows are the cases finished before it).

    ``finished`` rows (of an interrupted run: ``--resume``) are kept instead of measuring their cases
    again; ``on_row(record)`` is called after each row (to checkpoint the record)."""
    start = time.perf_counter()
    memory = device_memory()
    say(f"{command}: backend {jax.default_backend()}, scale {scale:g}, {repeats} repeats")
    with heartbeat("measuring the device's streaming bandwidth and RNG throughput"):
        limits = measure_limits(memory, repeats=repeats)
    record: dict[str, Any] = {  # a JSON record: values of every JSON type
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "load_average_start": load_average(),
        "scale": scale,
        "repeats": repeats,
        "limits": limits.to_json(),
        "load_average_during": [],
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
            say(f"  {case.mechanism}: from the checkpoint")
        else:
            try:
                with interrupt.raising(), heartbeat(f"{case.mechanism}: compiling and timing"):
                    row = measure(case, memory=memory, limits=limits, repeats=repeats,
                                  peer_repeats=peer_repeats,
                                  with_peers=with_peers, log=say)
            except interrupt.Interrupted:  # a signal stops the case at once; the finished rows are kept
                record["status"] = "interrupted"
                break
            except Exception as err:  # report, run the other cases, let the caller exit non-zero
                row = {"family": case.family, "mechanism": case.mechanism, "setting": case.setting,
                       "method": case.method or "(one kernel)", "model": case.model}
                row["error"] = f"{type(err).__name__}: {err}"
                say(f"error: {case.mechanism}: {row['error']}", file=sys.stderr)
        record["rows"].append(row)
        record["load_average_during"].append(load_average())
        if on_row is not None:
            on_row(record)
    if record["status"] == "complete":
        with heartbeat("measuring the device's rates again"):
            limits = limits.best(measure_limits(memory, repeats=repeats))
        _rebound(record, limits, kept=done.values())
    record["load_average_end"] = load_average()
    record["quiet"] = load_is_quiet(record)
    record["self_check"] = self_check(record)
    record["device_peak_memory_bytes"] = device_peak_memory()
    record["wall_seconds"] = time.perf_counter() - start
    return record
