"""``dpjax study``: runs Monte Carlo accuracy studies and prints, saves and plots their results."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from dpjax._src.datasets import builtin as datasets
from dpjax._src.studies.columns import COLUMNS, column_descriptions
from dpjax._src.studies.definition import Study
from dpjax._src.studies.study import run_study  # with JAX, as the command is imported (interrupt.check)
from dpjax._src.tools.argtypes import positive_float, positive_int

__all__ = [
    "CACHE_ENV",
    "DEFAULTS",
    "EPILOG",
    "add_parser",
    "compile_cache",
    "run",
]

DEFAULTS = {"trials": 500, "seed": 0, "confidence": 0.95, "jobs": 2}
CACHE_ENV = "DPJAX_COMPILE_CACHE"

EPILOG = """\
What the tables and files show
  Each study runs TRIALS independent releases per cell (mechanism x dataset x grid point) and
  measures each release with its metrics. A table block names the metric (what one trial's
  number is, and its unit) and the statistic over the trials; its cells read "estimate ±h",
  h = half the width of a symmetric confidence interval (CI), or "estimate [a, b]" with an
  asymmetric CI (rates, quantiles).
  statistics: mean; rmse (root mean square); median; qNN (the NN% quantile).
  intervals: CLT for means (Wilson for rates, i.e. 0/1 metrics), the CLT of the mean square for
  rmse, order statistics for quantiles (distribution-free).
  "closed form" rows: the mechanism's theoretical value of the statistic, where one exists.
  metric kinds: abs_error |release - truth|; rel_error |release - truth|/|truth|; error
  release - truth (bias); squared_error; recall and precision of a released index set against
  the true set; set_error (items in one set only); wrong_answer (rate of release != truth);
  values of the release itself (counts of answers, budget left, flags); study-specific ones
  (e.g. missed_points: data points between a released and the true quantile).

Columns of results.csv (one row per cell and statistic; also described in results.json)
{columns}

Files written with --out DIR: results.csv (the tidy table of every study), results.json (run
record: seed, trials, versions, backend, date, wall time, compiles, status, failures; metric
legend; rows) and figures/STUDY.png (per study: one panel per metric and statistic against
epsilon on a log axis, errors on a log axis too, rates and counts on a linear one from 0; CI bands,
closed forms dashed). DIR is checked before any computing and replaced
whole at the end (the run is written to .DIR.partial first), so files of two runs never mix.

Interrupting: Ctrl-C or SIGTERM stops after the steps in progress, writes every finished step
(figures of the finished studies only), records "status": "interrupted" and exits with 130 (143
for SIGTERM); a second signal stops at once. --resume continues from the finished steps and gives
the results.csv of an uninterrupted run, byte for byte.

Compilation cache: compiled studies are kept in JAX's persistent cache (--compile-cache, default
~/.cache/dpjax/jax), so a second run loads them instead of compiling; the table headers say how
many compiles came from the cache.

Custom studies: --config FILE.toml (see dpjax._src.tools.study.config), or the Python API
dpjax.studies.run_study, which makes the same tables and figures. The Python files that the
configuration names ("file.py:function") are executed when it is read, each once, --list
included: use only files you trust. A mechanism that raises (or returns a release whose shape is
not the truth's) is reported with its file and line, and a cell where every trial failed (NaN) is
reported too: both are listed under "failures" in results.json, whose status is then "incomplete",
and the exit status is 1; the study's other mechanisms are kept.
"""


def _level(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds ``study`` to the ``dpjax`` subcommands."""
    columns = "\n".join(
        textwrap.fill(f"{name}: {text}", 96, initial_indent="  ", subsequent_indent="      ")
        for name, text in COLUMNS.items()
    )
    parser = subparsers.add_parser(
        "study",
        help="run Monte Carlo accuracy studies (the registered ones, or your own from a TOML file)",
        description=textwrap.fill(  # raw text (the epilog's layout): wrapped here to the screen
            "Runs each study's mechanisms TRIALS times per grid point (one compiled vmap per mechanism and "
            "dataset) and prints the error of the releases with confidence intervals.",
            min(98, shutil.get_terminal_size((100, 24)).columns - 2),
        ),
        epilog=EPILOG.format(columns=columns),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trials", type=positive_int, help="releases per cell (default: 500)")
    parser.add_argument("--epsilon", type=positive_float, nargs="+",
                        help="the epsilon grid of every study (default: each study's, 0.25 1 4)")
    parser.add_argument("--seed", type=int, help="seed of the built-in data and of the noise (default: 0)")
    parser.add_argument("--study", nargs="+", metavar="NAME",
                        help="run only these studies (see --list; default: all registered studies, or only "
                        "those of --config when it declares some)")
    parser.add_argument("--dataset", nargs="+", metavar="NAME", choices=datasets.DATASET_NAMES,
                        help=f"run only on these built-in datasets ({', '.join(datasets.DATASET_NAMES)}; "
                        "default: each study's)")
    parser.add_argument("--confidence", type=_level, help="level of the confidence intervals (default: 0.95)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="a TOML file of options and studies of your own (see below; default: none). "
                        "The Python files it names (\"file.py:function\") are EXECUTED, each once, when the "
                        "file is read (also with --list): use only files you trust")
    parser.add_argument("--jobs", type=positive_int, metavar="N",
                        help="studies run at the same time, in threads (default: 2)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write results.csv, results.json and figures/STUDY.png to DIR (default: no "
                        "files); "
                        "DIR must be new or empty unless --overwrite or --resume is given")
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--overwrite", action="store_true",
                       help="replace the files of an earlier run in --out DIR (default: refuse)")
    again.add_argument("--resume", action="store_true",
                       help="continue the interrupted run in --out DIR from its finished steps; the results "
                       "are those of an uninterrupted run (default: start afresh)")
    parser.add_argument(
        "--compile-cache", metavar="DIR|off",
        help=f"JAX's persistent compilation cache: later runs load the compiled studies instead of compiling "
        f"them again (default: ${CACHE_ENV}, else ~/.cache/dpjax/jax; 'off' turns it off; a cache "
        "directory set in JAX's own configuration wins)")
    parser.add_argument("--list", action="store_true",
                        help="list the studies (with those of --config) and datasets, then exit")
    return parser


def compile_cache(option: str | None) -> str | None:
    """Turns on JAX's persistent compilation cache in the directory ``option`` (or ``$DPJAX_COMPILE_CACHE``,
    else ``$XDG_CACHE_HOME/dpjax/jax``, default ``~/.cache/dpjax/jax``); ``"off"`` leaves it off. A
    directory already set in JAX's configuration (``JAX_COMPILATION_CACHE_DIR``) is kept. Returns the
    directory in use, or ``None``."""
    import jax

    given = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]  # jax's Config stub lacks the options
    if given:
        return given
    choice = option or os.environ.get(CACHE_ENV)
    if choice == "off":
        return None
    if not choice:
        choice = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpjax" / "jax")
    jax.config.update("jax_compilation_cache_dir", choice)
    # the default (1 s) would leave out most of the studies' kernels on a fast machine
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    return choice


def _error(message: str) -> int:
    print(f"dpjax study: error: {message}", file=sys.stderr)
    return 2


def _checked(path, name: str, value):
    """A configuration file's option, checked like the same option on the command line."""
    one: dict[str, Callable[[str], object]] = {
        "trials": positive_int, "seed": int, "confidence": _level, "jobs": positive_int
    }
    many: dict[str, Callable[[str], object]] = {"epsilon": positive_float, "study": str, "dataset": str}
    try:
        if name in one and not isinstance(value, bool):
            return one[name](str(value))
        if name in many and isinstance(value, list) and value:
            values = [many[name](str(v)) for v in value if not isinstance(v, bool)]
            known = name != "dataset" or set(values) <= set(datasets.DATASET_NAMES)
            if len(values) == len(value) and known:
                return values
        elif name in ("out", "compile_cache") and isinstance(value, str) and value:
            return value
    except (argparse.ArgumentTypeError, ValueError):
        pass
    expected = {"epsilon": "a list of numbers > 0", "study": "a list of study names",
                "dataset": f"a list of {', '.join(datasets.DATASET_NAMES)}", "trials": "an integer >= 1",
                "jobs": "an integer >= 1", "seed": "an integer", "confidence": "a number in (0, 1)"}
    requirement = expected.get(name, "a non-empty string")
    raise ValueError(f"{path}: option {name} must be {requirement}, got {value!r}")


def _options(args) -> tuple[dict, list[Study]]:
    """Command line over configuration file over defaults."""
    config: dict = {}
    custom: list[Study] = []
    if args.config is not None:
        from dpjax._src.tools.study import config as config_file

        config, custom = config_file.load(args.config)
        config = {name: _checked(args.config, name, value) for name, value in config.items()}
    options = {}
    names = ("trials", "epsilon", "seed", "study", "dataset", "out", "confidence", "jobs", "compile_cache")
    for name in names:
        value = getattr(args, name)
        options[name] = value if value is not None else config.get(name, DEFAULTS.get(name))
    if options["out"] is not None:
        options["out"] = Path(options["out"])
    return options, custom


def run(args: argparse.Namespace) -> int:
    """Runs ``dpjax study``; returns the exit status."""
    start = time.perf_counter()
    print("dpjax study: loading the study catalog…", file=sys.stderr, flush=True)
    try:
        options, custom = _options(args)
    except (OSError, ValueError) as err:
        return _error(str(err))
    except Exception as err:  # a config's Python file that fails to execute
        return _error(f"{args.config}: {type(err).__name__}: {err} (at {_where(err)})")
    try:
        out = None if args.list else _out(args, options)
    except ValueError as err:
        return _error(str(err))
    from dpjax._src.studies.catalog import studies

    registered = {**studies(), **{s.name: s for s in custom}}
    if args.list:
        width = shutil.get_terminal_size((100, 24)).columns
        for s in registered.values():
            line = f"{s.name:34s} [{s.family}] on {', '.join(s.datasets)}: {s.description}"
            print(textwrap.fill(line, width, subsequent_indent=" " * 35))
        for name in datasets.DATASET_NAMES:
            line = f"dataset {name:26s} {datasets.load(name, options['seed']).description}"
            print(textwrap.fill(line, width, subsequent_indent=" " * 35))
        return 0
    names = options["study"] or ([s.name for s in custom] if custom else list(registered))
    unknown = [n for n in names if n not in registered]
    if unknown:
        return _error(f"unknown study {', '.join(unknown)}; choose from {', '.join(registered)}")
    selected = [registered[n] for n in names]
    if options["dataset"]:
        selected = [s for s in selected if set(s.datasets) & set(options["dataset"])]
        if not selected:
            return _error("no selected study runs on the selected datasets")
    from dpjax._src import interrupt

    with interrupt.handled():
        return _run(selected, options, start, out)


def _out(args, options):
    """The checked output directory (``None`` without ``--out``); raises ``ValueError`` (an
    :class:`~dpjax._src.tools.outdir.OutputError`) at once when it cannot be used as asked."""
    from dpjax._src.tools.outdir import RunDir

    if options["out"] is None:
        if args.overwrite or args.resume:
            raise ValueError("--overwrite and --resume need --out DIR")
        return None
    out = RunDir(options["out"], overwrite=args.overwrite, resume=args.resume,
                 own_files=("results.json", "results.csv", "figures"), command="dpjax study")
    out.check()
    return out


def _where(err: BaseException) -> str:
    from dpjax._src.studies.errors import error_location

    return error_location(err)


def _run(selected, options, start, out) -> int:
    import jax

    from dpjax._src import interrupt
    from dpjax._src.studies.checkpoint import CheckpointMismatch
    from dpjax._src.studies.plan import step_count
    from dpjax._src.studies.progress import Progress
    from dpjax._src.studies.report import format_result
    from dpjax._src.tools.study.checks import empty_cells

    epsilon = options["epsilon"]
    cache = compile_cache(options["compile_cache"])
    print(f"dpjax study: {len(selected)} studies, {options['trials']} trials per cell, epsilon "
          f"{'each study’s grid' if epsilon is None else ' '.join(f'{e:g}' for e in epsilon)}, seed "
          f"{options['seed']}", flush=True)
    print(f"dpjax study: compile cache {cache}" if cache else "dpjax study: compile cache off", flush=True)
    if out is not None:
        out.prepare()
        if out.resumed:
            print(f"dpjax study: resuming the interrupted run in {out.path}", flush=True)
    steps = sum(step_count(s, options["dataset"]) for s in selected)
    results, partial, failures, mismatches = {}, {}, [], []

    def one(study, progress):
        grid = {"epsilon": epsilon} if epsilon is not None and "epsilon" in study.grid else None
        study_start = time.perf_counter()
        try:
            result = run_study(study, trials=options["trials"], seed=options["seed"], grid=grid,
                               datasets=options["dataset"], confidence=options["confidence"],
                               progress=progress, checkpoint=None if out is None else out.checkpoint,
                               on_error="record")
        except interrupt.Interrupted as err:  # keep the finished steps
            if len(err.result.table):
                partial[study.name] = err.result
            return
        except CheckpointMismatch as err:  # --resume of a checkpoint made otherwise: refused
            mismatches.append(str(err))
            return
        except Exception as err:  # report, run the other studies, exit non-zero
            failure = {"study": study.name, "error": f"{type(err).__name__}: {err}", "where": _where(err)}
            failures.append(failure)
            progress.write(f"dpjax study: error: {study.name}: {failure['error']} (at {failure['where']})",
                           file=sys.stderr)
            return
        results[study.name] = result
        for failure in [*result.record.get("failures", ()), *empty_cells(result)]:
            failures.append({"study": study.name, **failure})
            progress.write(f"dpjax study: error: {study.name}: {failure['mechanism']} on "
                           f"{failure['dataset']}: {failure['error']} (at {failure['where']})",
                           file=sys.stderr)
        progress.write(format_result(result, seconds=time.perf_counter() - study_start) + "\n")

    with Progress(steps, lines=True) as progress:
        # Studies run in threads: XLA compiles without holding the GIL, so two compile at once.
        with ThreadPoolExecutor(max_workers=options["jobs"]) as pool:
            futures = [pool.submit(one, study, progress) for study in selected]
            # The main thread wakes every 0.1 s: a signal the kernel hands to a worker thread runs
            # Python's handler only when the main thread runs, and a plain wait would sleep through
            # it until every study had finished.
            while wait(futures, timeout=0.1).not_done:
                pass
            for future in futures:
                future.result()
    stopped = interrupt.received()
    done = [results[s.name] for s in selected if s.name in results]
    unfinished = [partial[s.name] for s in selected if s.name in partial]
    wall = time.perf_counter() - start
    compiles = sum(r.record["compiles"] for r in done + unfinished)
    overlap = (f" ({options['jobs']} at a time, so the studies' own times above add up to more)"
               if options["jobs"] > 1 and len(selected) > 1 else "")
    total = (f"dpjax study: {len(done)} studies in {wall:.1f} s{overlap}, {compiles} compiles, backend "
             f"{jax.default_backend()}")
    print(textwrap.fill(total, shutil.get_terminal_size((100, 24)).columns), flush=True)
    if mismatches:
        if out is not None:
            out.discard()
        return _error("; ".join(mismatches))
    if out is not None:
        if done or unfinished:
            paths, stopped = _write(done, unfinished, options, wall, out.staging, failures=failures)
            out.commit(complete=not (stopped or failures), files=[p.relative_to(out.staging) for p in paths])
            print(f"wrote results.csv, results.json and figures/ ({len(paths) - 2} PNG) to {out.path}"
                  + (" (interrupted: --resume continues it)" if stopped else ""), flush=True)
        else:
            out.discard()
            if stopped:
                print(f"dpjax study: nothing finished; {out.path} is unchanged", flush=True)
    return _exit_status(stopped, len(done), len(selected), failures)


def _exit_status(stopped, done: int, selected: int, failures: list) -> int:
    """Says how the run ended; returns its exit status (130/143 stopped, 1 with failures, else 0)."""
    from dpjax._src import interrupt

    if stopped:
        print(f"dpjax study: interrupted; {done} of {selected} studies finished", file=sys.stderr)
        return interrupt.exit_code(stopped)
    if failures:
        failed = sorted({f["study"] for f in failures})
        print(f"dpjax study: {len(failed)} studies failed (lost mechanisms, or cells where every trial "
              f"failed): {', '.join(failed)}; results.json says \"status\": \"incomplete\"",
              file=sys.stderr)
        return 1
    return 0


def _write(results, unfinished, options, wall: float, out: Path, *, failures: list):
    """figures/STUDY.png, results.csv and results.json under ``out`` (the staging directory): the rows of
    the finished studies and the finished steps of ``unfinished`` ones (no figure for those). A stop
    asked for while the figures are drawn skips the rest of them (``--resume`` draws them) and the
    record says "interrupted".
    Returns the paths and the signal that stopped the run (``None`` if it is complete)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from dpjax._src import interrupt
    from dpjax._src.studies.progress import heartbeat
    from dpjax._src.studies.record import run_record
    from dpjax._src.studies.result import save_figure
    from dpjax._src.tools.outdir import file_name

    (out / "figures").mkdir(parents=True, exist_ok=True)
    figures, computing_stopped = [], interrupt.STOP.is_set()  # then the finished studies' figures are drawn
    for i, r in enumerate(results, 1):
        if interrupt.STOP.is_set() and not computing_stopped:  # a stop asked for while drawing
            break
        figures.append(out / "figures" / f"{file_name(r.study.name, 'study name')}.png")
        print(f"dpjax study: writing figures/{r.study.name}.png ({i}/{len(results)})", flush=True)
        with heartbeat(f"drawing {r.study.name}"):
            save_figure(r.figure(), figures[-1])
    every = results + unfinished
    table = pd.concat([r.table for r in every], ignore_index=True)
    csv_path, json_path = out / "results.csv", out / "results.json"
    table.to_csv(csv_path, index=False)
    record = run_record(
        seed=options["seed"], trials=options["trials"], replicates=1, confidence=options["confidence"],
        chunk_size=every[0].record["chunk_size"],
        grid={name: list(dict.fromkeys(v for r in every for v in r.record["grid"].get(name, ())))
              for name in dict.fromkeys(name for r in every for name in r.record["grid"])},
        datasets=sorted({d for r in every for d in r.record["datasets"]}),
        started=time.time() - wall, wall_seconds=wall,
        steps=[{"study": r.study.name, **s} for r in every for s in r.record["steps"]],
    )
    stopped = interrupt.received()
    record["status"] = "interrupted" if stopped else "incomplete" if failures else "complete"
    record["unfinished_studies"] = [r.study.name for r in unfinished]
    record["failures"] = failures
    payload = {
        "record": record,
        "studies": {r.study.name: {k: v for k, v in r.metadata().items() if k not in ("columns", "record")}
                    for r in every},
        "columns": column_descriptions(table.columns, [r.study for r in every]),
        "rows": json.loads(table.to_json(orient="records")),
    }
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    return [csv_path, json_path, *figures], stopped
