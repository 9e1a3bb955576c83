"""``dpjax bench``: the headline benchmark of every mechanism family on the current backend.

Registered in :mod:`dpjax.cli` with :func:`add_parser` and dispatched to :func:`run`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from dpjax._src import interrupt
from dpjax._src.studies.checkpoint import CheckpointMismatch
from dpjax._src.tools.argtypes import positive_float, positive_int
from dpjax._src.tools.bench import checkpoint, report
from dpjax._src.tools.bench.bound import self_check
from dpjax._src.tools.bench.cases import FAMILIES, cases
from dpjax._src.tools.bench.harness import device_memory
from dpjax._src.tools.bench.run import run_cases
from dpjax._src.tools.readme import readme_problem, update_readme

__all__ = [
    "FILES",
    "QUICK_SCALE",
    "REFERENCE_MEMORY",
    "add_parser",
    "auto_scale",
    "collect",
    "command_line",
    "run",
    "script",
]

QUICK_SCALE = 0.1
REFERENCE_MEMORY = 16 * 2**30  # scale 1 (the headline sizes) needs well under this
FILES = ("results.json", "results.md", "results.png")  # what --out DIR gets


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``bench`` subcommand to the ``dpjax`` command's subparsers."""
    parser = subparsers.add_parser(
        "bench",
        help="time every mechanism family on this device against the RNG floor and peer libraries",
        description="Runs the headline benchmark of each mechanism family on the current JAX backend "
        "(CPU, GPU or TPU): time per release for one release and for a vmapped Monte Carlo batch, "
        "releases per second, the ratio to the jax.random floor for the same number of variates, "
        "compile time and memory, with peer libraries (the 'bench' extra) side by side.",
    )
    parser.add_argument(
        "families", nargs="*", metavar="FAMILY", help=f"families to run: {', '.join(FAMILIES)} (default: all)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_SCALE:g} x the headline sizes, 3 repeats (minutes on 2 CPU cores; "
        "default: the headline sizes)",
    )
    parser.add_argument(
        "--size",
        type=positive_float,
        metavar="SCALE",
        help="sizes and Monte Carlo batches at SCALE x the headline ones (default: from the device's "
        "memory, 1 for 16 GiB, a power of 2 between 1 and 8)",
    )
    parser.add_argument(
        "--repeats", type=positive_int, help="timed repeats per measurement (default 5; 3 with --quick)"
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="skip the peer libraries and NumPy loops (default: run them)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write results.json, results.md and results.png to DIR (default: no files); DIR must be new "
        "or empty unless --overwrite or --resume is given",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's files in --out DIR (default: refuse)",
    )
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in --out DIR: its finished cases are kept (default: start afresh)",
    )
    parser.add_argument(
        "--update-readme",
        type=Path,
        metavar="FILE",
        help="replace the region between the dpjax-bench markers of FILE with the Markdown report "
        "(default: none; not after an interrupted run)",
    )
    parser.add_argument(
        "--loud",
        action="store_true",
        help="with --update-readme: write a run whose load average exceeded one per core, marked as loud "
        "(default: refuse it; the README's tables are quiet runs)",
    )
    parser.add_argument(
        "--region",
        metavar="NAME",
        help="with --update-readme: the region between <!-- dpjax-bench:begin NAME --> and its end marker "
        "(default: the unnamed region)",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        metavar="FILE",
        help="do not run: report a results.json written earlier (for --out / --update-readme; default: run)",
    )
    return parser


def auto_scale(memory: int | None) -> float:
    """1 for about 16 GiB of device memory, the power of 2 below memory / 16 GiB up to 8."""
    if memory is None:
        return 1.0
    return float(2 ** min(3, max(0, math.floor(math.log2(memory / REFERENCE_MEMORY)))))


def command_line(args: argparse.Namespace) -> str:
    """The ``dpjax bench`` command that ``args`` stand for (recorded with the results)."""
    given = (
        ("--quick", True if args.quick else None),
        ("--size", None if args.size is None else f"{args.size:g}"),
        ("--repeats", args.repeats),
        ("--no-peers", True if args.no_peers else None),
        ("--out", args.out),
        ("--update-readme", args.update_readme),
        ("--region", args.region),
        ("--loud", True if args.loud else None),
    )
    options = [flag if value is True else f"{flag} {value}" for flag, value in given if value is not None]
    return " ".join(["dpjax bench", *args.families, *options])


def collect(args: argparse.Namespace, finished=(), on_row=None) -> dict:
    """Runs the selected families and returns the JSON record (``finished``, ``on_row``: see
    :func:`~dpjax._src.tools.bench.run.run_cases`)."""
    settings = _settings(args)
    return run_cases(
        (case for family in args.families or FAMILIES for case in cases(family, settings["scale"])),
        command=command_line(args),
        **settings,
        finished=finished,
        on_row=on_row,
    )


def _settings(args: argparse.Namespace) -> dict:
    """The measuring settings of a run (what its rows depend on besides the code)."""
    scale = (
        args.size if args.size is not None else (QUICK_SCALE if args.quick else auto_scale(device_memory()))
    )
    return dict(scale=scale, repeats=args.repeats or (3 if args.quick else 5),
                peer_repeats=2 if args.quick else 3, with_peers=not args.no_peers)


def _error(message: str) -> int:
    print(f"dpjax bench: error: {message}", file=sys.stderr)  # one line: scripts grep it
    return 2


def run(args: argparse.Namespace) -> int:
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        return _error(f"unknown family {', '.join(unknown)}; choose from {', '.join(FAMILIES)}")
    if args.region is not None and args.update_readme is None:
        return _error("--region needs --update-readme FILE")
    if args.from_json is not None and not args.from_json.is_file():
        return _error(f"--from-json {args.from_json}: no such file")
    problem = readme_problem(args.update_readme, args.region)
    if problem:
        return _error(problem)
    out = None
    if args.out is not None:
        from dpjax._src.tools.outdir import OutputError, RunDir

        out = RunDir(args.out, overwrite=args.overwrite, resume=args.resume, own_files=FILES,
                     command="dpjax bench")
        try:
            out.check()
        except OutputError as err:
            return _error(str(err))
    elif args.overwrite or args.resume:
        return _error("--overwrite and --resume need --out DIR")
    try:
        record = report.read_json(args.from_json) if args.from_json else None
    except (OSError, ValueError) as err:
        return _error(f"--from-json {args.from_json}: not a results.json ({err})")
    if args.from_json and not (isinstance(record, dict) and isinstance(record.get("rows"), list)):
        return _error(f"--from-json {args.from_json}: not a results.json of dpjax bench (no rows)")
    with interrupt.handled():
        if record is None:
            try:
                record = _measure(args, out)
            except CheckpointMismatch as err:  # --resume of a run made otherwise: refused before measuring
                if out is not None:  # always: only a checkpoint (--out) can mismatch
                    out.discard()
                return _error(str(err))
        return _report(args, record, out)


def _measure(args, out) -> dict:
    """Runs the benchmark, checkpointing each row in the staging directory of ``out``."""
    if out is None:
        return collect(args)
    out.prepare()
    saved, made = out.checkpoint / "record.json", checkpoint.fingerprint(_settings(args))
    finished = checkpoint.load(saved, made, say=lambda text: report.say(text, file=sys.stderr))
    if finished:
        report.say(f"dpjax bench: resuming the interrupted run in {out.path} ({len(finished)} cases done)")
    out.checkpoint.mkdir(exist_ok=True)
    return collect(args, finished, on_row=lambda record: checkpoint.save(saved, record, made))


def _report(args, record: dict, out) -> int:
    """Prints and writes ``record``; returns the exit status."""
    stopped = record.get("status") == "interrupted"
    if stopped and not record["rows"]:
        if out is not None:
            out.discard()
        print("dpjax bench: interrupted before the first case finished; nothing written", file=sys.stderr)
        return interrupt.exit_code()
    print(report.terminal(record))
    if out is not None:
        if not out.staging.is_dir():  # --from-json: nothing was measured
            out.prepare()
        report.write_json(record, out.staging / "results.json")
        (out.staging / "results.md").write_text(report.markdown(record))
        report.plot(record, out.staging / "results.png")
        out.commit(complete=not stopped, files=FILES)
        report.say(f"wrote results.json, results.md and results.png to {out.path}"
                   + (" (interrupted: --resume continues it)" if stopped else ""))
    failures = self_check(record)
    for failure in failures:
        report.say(f"dpjax bench: self-check failed: {failure} (the bound is wrong)", file=sys.stderr)
    if args.update_readme and not stopped:
        loud = record.get("quiet") is not True
        if loud and not args.loud:
            report.say(f"dpjax bench: not updating {args.update_readme}: {report.describe_load(record)}; "
                       "rerun on an idle machine, or pass --loud to write it marked as loud", file=sys.stderr)
            return 1
        update_readme(args.update_readme, report.markdown(record), args.region)
        print(f"updated {args.update_readme}" + (" (marked loud)" if loud else ""))
    if not args.from_json:
        print(f"dpjax bench: {record['wall_seconds']:.0f} s")
    if stopped:
        print(f"dpjax bench: interrupted after {len(record['rows'])} cases", file=sys.stderr)
        return interrupt.exit_code()
    return 1 if failures or any("error" in row for row in record["rows"]) else 0


def script(module: str, make_cases, description: str, argv: list[str] | None = None) -> dict:
    """The command line of a ``benchmarks/`` script that times its own (non-headline) cases with the
    same harness: ``--size``, ``--repeats``, ``--no-peers`` and ``--out`` as in ``dpjax bench``.
    ``make_cases(scale)`` returns the cases. Returns the record (after printing and saving it)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument(
        "--size", type=positive_float, default=1.0, metavar="SCALE", help="scale of the sizes"
    )
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--no-peers", action="store_true", help="skip the peers")
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write results.json, results.md and results.png"
    )
    args = parser.parse_args(argv)
    record = run_cases(
        make_cases(args.size),
        command=f"python -m {module} --size {args.size:g} --repeats {args.repeats}"
        + (" --no-peers" if args.no_peers else ""),
        scale=args.size,
        repeats=args.repeats,
        with_peers=not args.no_peers,
    )
    print(report.terminal(record))
    if args.out:
        report.save(record, args.out)
    return record
