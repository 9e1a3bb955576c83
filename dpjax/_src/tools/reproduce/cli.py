"""``dpjax reproduce [NAME ...|all] [--quick|--full|--smoke]``: the papers' numbers beside ours.

Writes ``reproduction.csv`` (every row, with its 95% interval, the claim's tolerance, the verdict
and why), ``reproduction.json`` (each paper's notes, size and timings), ``reproduction.md`` (the
report, with the command at the top) and one ``NAME.png`` per paper into ``--out`` (default
``reproduce-out/``); with ``--update-readme FILE`` also the summary (one line per paper) into FILE's
generated region ``reproduction``. ``--from-csv CSV [CSV ...]`` renders the report and the summary
from stored runs without running (a paper in several runs: the last one given).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import sys
import textwrap
import time
from pathlib import Path

import jax

from dpjax._src import interrupt
from dpjax._src.atomic import write_bytes, write_text
from dpjax._src.studies.checkpoint import CheckpointMismatch
from dpjax._src.studies.progress import heartbeat
from dpjax._src.tools.data.catalog import default_data_dir
from dpjax._src.tools.outdir import OutputError, RunDir
from dpjax._src.tools.readme import readme_problem, update_readme
from dpjax._src.tools.reproduce import BESIDE, REPRODUCTIONS, SEEDS, saved, writers
from dpjax._src.tools.reproduce.result import FAILS, INCONCLUSIVE

__all__ = [
    "MODE_LINES",
    "SMOKE_WHY",
    "add_parser",
    "run",
]

MODE_LINES = {
    "smoke": "Mode `--smoke`: a handful of trials per experiment, to test that every reproduction "
    "runs; the numbers are not meaningful.",
    "quick": "Mode `--quick` (the default): fewer trials than the papers (each section says how many; "
    "the sections' timings say what they cost here); standard errors are larger accordingly. `--full` "
    "runs the papers' trial counts.",
    "full": "Mode `--full`: the papers' trial counts (hours on 2 CPU cores).",
}


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``reproduce`` command to the ``dpjax`` command's subparsers."""
    parser = subparsers.add_parser(
        "reproduce",
        help="reproduce the numbers of the papers dpjax implements, beside the papers' values",
        description="Runs the papers' experiments (fewer trials with --quick, the papers' counts with "
        "--full) and writes each reproduced number beside the paper's as CSV, Markdown and PNG.",
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"reproductions to run: {', '.join(REPRODUCTIONS)}, a seed number (000-004) or all "
        "(default: all)",
    )
    size = parser.add_mutually_exclusive_group()
    for flag, text in (
        ("--quick", "fewer trials than the papers (default)"),
        ("--full", "the papers' trial counts"),
        ("--smoke", "a few trials each, for tests"),
    ):
        size.add_argument(flag, dest="mode", action="store_const", const=flag[2:], help=text)
    parser.set_defaults(mode="quick")  # the --quick help says "(default)"
    parser.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="directory with the real datasets (books.csv, adult.data, adult.test, mnist_5k.csv.gz; "
        "default: the cache of `dpjax data fetch`, $DPJAX_DATA or ~/.cache/dpjax/data; a file not "
        "there: its built-in stand-in)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("reproduce-out"),
        metavar="DIR",
        help="output directory (default: reproduce-out); it must be new or empty unless --overwrite or "
        "--resume is given",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--overwrite", action="store_true", help="replace an earlier run's files in DIR (default: refuse)"
    )
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in DIR: its finished reproductions are kept, and the results "
        "are those of an uninterrupted run (default: start afresh)",
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="write the Markdown report here (figure links point into DIR; default: DIR/reproduction.md)",
    )
    parser.add_argument(
        "--update-readme",
        type=Path,
        metavar="FILE",
        help="replace the region between <!-- dpjax-bench:begin reproduction --> and its end marker in "
        "FILE with the summary table (one line per reproduction, linking to the Markdown report; default: "
        "none; not after an interrupted run)",
    )
    parser.add_argument(
        "--from-csv",
        type=Path,
        nargs="+",
        metavar="CSV",
        help="render the summary (--update-readme) and the report (--markdown) from these stored "
        "reproduction.csv files (with the reproduction.json beside each) instead of running; a paper "
        "in several files: the last one's (default: run)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise (default: 0)")
    parser.add_argument("--list", action="store_true", help="list the reproductions, then exit")
    return parser


def _resolve(names: list[str]) -> list[str] | str:
    if not names or names == ["all"]:
        return list(REPRODUCTIONS)
    out = []
    for name in names:
        name = SEEDS.get(name, name)
        if name not in REPRODUCTIONS:
            return name
        if name not in out:
            out.append(name)
    return out


def _machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    backend = jax.default_backend()
    kinds = ", ".join(sorted({device.device_kind for device in jax.devices()}))
    on = backend if kinds == backend else f"{backend} ({kinds})"  # the GPU's model, say
    return (
        f"{platform.machine()}, {os.cpu_count()} CPU cores, load average {load} at the end, "
        f"Python {platform.python_version()}, jax {jax.__version__} on {on}"
    )


def _command(args) -> str:
    parts = ["dpjax reproduce", " ".join(args.names) or "all", f"--{args.mode}"]
    if args.data_dir is not None:
        parts.append(f"--data-dir {args.data_dir}")
    if args.out != Path("reproduce-out"):
        parts.append(f"--out {args.out}")
    if args.markdown is not None:
        parts.append(f"--markdown {args.markdown}")
    if args.update_readme is not None:
        parts.append(f"--update-readme {args.update_readme}")
    if args.seed != 0:
        parts.append(f"--seed {args.seed}")
    return " ".join(parts)


def _update_readme(readme: Path, reproductions, report: Path, source: str) -> None:
    """Writes the summary of ``reproductions`` into the ``reproduction`` region of ``readme``."""
    link = Path(os.path.relpath(report, readme.parent)).as_posix()
    text = (
        f"{source} Every number, with the paper's beside it, the notes and the figures, is in "
        f"[{link}]({link}).\n\n{writers.summary_table(reproductions, link)}"
    )
    update_readme(readme, text, region="reproduction")


def _mode_line(reproductions) -> str:
    """The size line of a report: one mode's line, or which paper ran at which size."""
    modes = {rep.mode for rep in reproductions}
    if len(modes) == 1:
        return MODE_LINES[modes.pop()]
    by_mode = {m: [r.name for r in reproductions if r.mode == m] for m in ("full", "quick", "smoke")}
    sizes = "; ".join(f"`--{m}`: {', '.join(names)}" for m, names in by_mode.items() if names)
    return (
        f"Sizes per paper ({sizes}): `--full` runs the papers' trial counts, `--quick` fewer (each "
        "section says how many and gives its run's command)."
    )


def _from_csv(args) -> int:
    """``--from-csv CSV [CSV ...]``: the summary and the report of stored runs, without running."""
    if args.update_readme is None and args.markdown is None:
        return _error("--from-csv needs --update-readme or --markdown")
    titles = {name: module.TITLE for name, module in REPRODUCTIONS.items()}
    found, figures = {}, {}
    for path in args.from_csv:
        try:
            for rep in writers.read_csv(path, titles):
                found[rep.name], figures[rep.name] = _explained(rep), path.parent
        except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
            return _error(f"--from-csv {path}: not a reproduction.csv ({type(err).__name__}: {err})")
    order = [*REPRODUCTIONS, *(name for name in found if name not in REPRODUCTIONS)]
    reproductions = [found[name] for name in order if name in found]
    report = args.markdown or args.from_csv[-1].parent / "reproduction.md"
    command = (
        f"dpjax reproduce --from-csv {' '.join(map(str, args.from_csv))}"
        + (f" --update-readme {args.update_readme}" if args.update_readme else "")
        + (f" --markdown {args.markdown}" if args.markdown else "")
    )
    if args.markdown is not None:
        text = writers.markdown_report(
            reproductions,
            command=command,
            mode_line=_mode_line(reproductions),
            machine="each section names its run and machine",
            seconds=sum(rep.seconds for rep in reproductions),
            cpu_seconds=sum(rep.cpu_seconds for rep in reproductions),
            figures={
                name: Path(os.path.relpath(where, args.markdown.parent)) for name, where in figures.items()
            },
        )
        write_text(args.markdown, text)
        print(f"wrote {args.markdown} from {len(args.from_csv)} stored run(s)")
    if args.update_readme is not None:
        source = f"Generated by `{command}` from the stored runs named in the report."
        _update_readme(args.update_readme, reproductions, report, source)
        print(f"updated {args.update_readme}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Runs the selected reproductions and writes the CSV, Markdown and PNG files."""
    if args.list:
        seeds = {name: f"seed {seed}" for seed, name in SEEDS.items()}
        for name, module in REPRODUCTIONS.items():
            head = f"{name:15s} ({seeds.get(name) or BESIDE.get(name, 'beside the seeds')}) "
            print(textwrap.fill(head + module.TITLE, _width(), subsequent_indent=" " * 16))
        return 0
    if args.from_csv is not None:
        missing = [path for path in args.from_csv if not path.is_file()]
        if missing:
            return _error(f"--from-csv {missing[0]}: no such file")
        if args.markdown is not None and args.markdown.is_dir():
            return _error(f"--markdown {args.markdown} is a directory")
        problem = readme_problem(args.update_readme, "reproduction")
        if problem:
            return _error(problem)
        return _from_csv(args)
    names = _resolve(args.names)
    if isinstance(names, str):
        choices = ", ".join(REPRODUCTIONS)
        return _error(f"unknown reproduction {names!r}; choose from {choices}, 000-004 or all")
    if args.data_dir is not None and not args.data_dir.is_dir():
        return _error(f"--data-dir {args.data_dir} is not a directory")
    args.data_dir = args.data_dir or default_data_dir()  # the `dpjax data fetch` cache, where it is
    problem = readme_problem(args.update_readme, "reproduction")
    if problem:
        return _error(problem)
    if args.markdown is not None and args.markdown.is_dir():
        return _error(f"--markdown {args.markdown} is a directory")
    own = ("reproduction.csv", "reproduction.json", "reproduction.md",
           *(f"{name}.png" for name in REPRODUCTIONS))
    out = RunDir(args.out, overwrite=args.overwrite, resume=args.resume, own_files=own,
                 command="dpjax reproduce")
    try:
        out.check()
    except OutputError as err:
        return _error(str(err))
    with interrupt.handled():
        return _run(args, names, out)


def _width() -> int:
    """The screen's width: ``$COLUMNS``, else the terminal's, else 100."""
    return shutil.get_terminal_size((100, 24)).columns


def _error(message: str) -> int:
    print(f"dpjax reproduce: error: {message}", file=sys.stderr)
    return 2


def _checkpointed(out: RunDir, name: str, made: dict):
    """The reproduction ``name`` saved in the checkpoint by a run with the fingerprint ``made``, its PNG
    written again into the staging directory; ``None`` when there is none (or it cannot be trusted).
    Raises :class:`~dpjax.studies.CheckpointMismatch` when it was made otherwise."""
    found = saved.load(out.checkpoint, name, made, say=lambda text: print(text, file=sys.stderr, flush=True))
    if found is None:
        return None
    rep, png = found
    if png is not None:
        write_bytes(out.staging / f"{name}.png", png)
    return rep


def _checkpoint(out: RunDir, rep, made: dict) -> None:
    """Saves a finished reproduction (with its PNG, without its plotting function) atomically."""
    png_path = out.staging / f"{rep.name}.png"
    saved.save(out.checkpoint, rep, made, png_path.read_bytes() if png_path.is_file() else None)


SMOKE_WHY = "--smoke size: a handful of trials, to test that the reproduction runs; not a measurement"


def _explained(rep):
    """``rep`` with each claim that does not hold (or is inconclusive) explained by its paper's module
    (``explain(row)``, the current text, also for a stored run; a row it has nothing for keeps its own);
    at ``--smoke`` size a claim that does not hold and has no explanation gets :data:`SMOKE_WHY`."""
    explain = getattr(REPRODUCTIONS.get(rep.name), "explain", lambda row: "")

    def why(row):
        own = explain(row) or row.why
        return own or (SMOKE_WHY if rep.mode == "smoke" and row.verdict == FAILS else "")

    unsettled = (FAILS, INCONCLUSIVE)
    rep.rows = [
        dataclasses.replace(row, why=why(row)) if row.verdict in unsettled else row for row in rep.rows
    ]
    return rep


def _run(args, names: list[str], out: RunDir) -> int:
    command = _command(args)
    print(textwrap.fill(f"{command}: {MODE_LINES[args.mode]}", _width()), flush=True)
    key = jax.random.key(args.seed)
    out.prepare()
    out.checkpoint.mkdir(exist_ok=True)
    if out.resumed:
        print(f"dpjax reproduce: resuming the interrupted run in {out.path}", flush=True)
    fingerprints = {name: saved.fingerprint(name, REPRODUCTIONS[name], args.mode, args.seed, args.data_dir)
                    for name in names}
    try:  # every checkpointed reproduction checked before any runs
        checkpointed = {name: _checkpointed(out, name, fingerprints[name]) for name in names}
    except CheckpointMismatch as err:
        out.discard()
        return _error(str(err))
    done, failures = [], []
    start, start_cpu = time.perf_counter(), time.process_time()
    for name in names:
        made = fingerprints[name]
        print("\n" + textwrap.fill(f"== {name}: {REPRODUCTIONS[name].TITLE}", _width()), flush=True)
        rep = checkpointed[name]
        if rep is not None:
            print(f"(from the checkpoint)\n{writers.screen_summary(_explained(rep), _width())}", flush=True)
            done.append(rep)
            continue
        began, began_cpu = time.perf_counter(), time.process_time()
        with heartbeat(f"{name} running (compiling and sampling)") as beat:  # one clock of silence for both
            try:
                with interrupt.raising():
                    rep = REPRODUCTIONS[name].run(
                        jax.random.fold_in(key, list(REPRODUCTIONS).index(name)), args.mode, args.data_dir
                    )
            except interrupt.Interrupted:  # a signal stops this reproduction at once; the finished are kept
                break
            except Exception as err:  # report, run the others, exit non-zero
                failures.append(name)
                print(f"dpjax reproduce: error: {name}: {type(err).__name__}: {err}", file=sys.stderr,
                      flush=True)
                continue
            rep.seconds, rep.cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
            rep.mode, rep.command, rep.machine = args.mode, command, _machine()
            beat.phase(f"{name}: writing {name}.png")
            writers.write_png(rep, out.staging / f"{name}.png")
            _checkpoint(out, rep, made)
        timing = f"({rep.seconds:.0f} s, {rep.cpu_seconds:.0f} s CPU)"
        print(f"{writers.screen_summary(_explained(rep), _width())}\n{timing}", flush=True)
        done.append(rep)
    stopped = interrupt.received()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    if done:
        _write(args, out, done, command, seconds, cpu_seconds, stopped)
    else:
        out.discard()
        if stopped:
            print(f"dpjax reproduce: nothing finished; {out.path} is unchanged", flush=True)
    if stopped:
        print(f"dpjax reproduce: interrupted; {len(done)} of {len(names)} reproductions finished",
              file=sys.stderr)
        return interrupt.exit_code(stopped)
    if failures:
        print(
            f"dpjax reproduce: {len(failures)} reproduction(s) failed: {', '.join(failures)}", file=sys.stderr
        )
        return 1
    return 0


def _write(args, out: RunDir, done, command: str, seconds: float, cpu_seconds: float, stopped) -> None:
    """reproduction.csv and reproduction.md (into the staging directory, swapped in whole), the README."""
    writers.write_csv(done, out.staging / "reproduction.csv")
    writers.write_metadata(done, out.staging / "reproduction.json")
    markdown = args.markdown or args.out / "reproduction.md"
    mode_line = MODE_LINES[args.mode] + (
        f" **Interrupted**: {len(done)} reproductions finished; `--resume` continues the run."
        if stopped
        else ""
    )
    report = writers.markdown_report(
        done,
        command=command,
        mode_line=mode_line,
        machine=_machine(),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        figures=Path(os.path.relpath(args.out, markdown.parent)),
    )
    if args.markdown is None:
        (out.staging / "reproduction.md").write_text(report)
    files = ["reproduction.csv", "reproduction.json", *(f"{r.name}.png" for r in done if r.plot is not None)]
    out.commit(complete=not stopped, files=files + ([] if args.markdown else ["reproduction.md"]))
    if args.markdown is not None:
        write_text(markdown, report)
    if args.update_readme is not None and not stopped:
        _update_readme(args.update_readme, done, markdown, f"Generated by `{command}`.")
    timing = f"({seconds:.0f} s, {cpu_seconds:.0f} s CPU)"
    done_line = (f"wrote {markdown} (the full tables), {args.out / 'reproduction.csv'} and the PNGs {timing}"
                 + (" (interrupted: --resume continues it)" if stopped else ""))
    print("\n" + textwrap.fill(done_line, _width()))
