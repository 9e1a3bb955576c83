"""``dpjax study``: runs Monte Carlo accuracy studies and prints, saves and plots their results."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dpjax.cli import positive_float, positive_int
from dpjax.studies import datasets
from dpjax.studies.study import COLUMNS, column_descriptions

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
record: seed, trials, versions, backend, date, wall time, compiles; metric legend; rows) and
figures/STUDY.png (per study: one panel per metric and statistic against epsilon, log-log, CI
bands, closed forms dashed).

Compilation cache: compiled studies are kept in JAX's persistent cache (--compile-cache, default
~/.cache/dpjax/jax), so a second run loads them instead of compiling; the table headers say how
many compiles came from the cache.

Custom studies: --config FILE.toml (see dpjax.studies.config), or the Python API
dpjax.studies.run_study, which makes the same tables and figures.
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
        description="Runs each study's mechanisms TRIALS times per grid point (one compiled vmap per "
        "mechanism and dataset) and prints the error of the releases with confidence intervals.",
        epilog=EPILOG.format(columns=columns),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--trials", type=positive_int, help="releases per cell (default: 500)")
    parser.add_argument("--epsilon", type=positive_float, nargs="+",
                        help="the epsilon grid of every study (default: each study's, 0.25 1 4)")
    parser.add_argument("--seed", type=int, help="seed of the built-in data and of the noise (default: 0)")
    parser.add_argument("--study", nargs="+", metavar="NAME", help="run only these studies (see --list)")
    parser.add_argument("--dataset", nargs="+", metavar="NAME", choices=datasets.DATASET_NAMES,
                        help="run only on these built-in datasets")
    parser.add_argument("--confidence", type=_level, help="level of the confidence intervals (default: 0.95)")
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="a TOML file of options and studies of your own (see below)")
    parser.add_argument("--jobs", type=positive_int, metavar="N",
                        help="studies run at the same time, in threads (default: 2)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write results.csv, results.json and figures/STUDY.png to DIR")
    parser.add_argument(
        "--compile-cache", metavar="DIR|off",
        help=f"JAX's persistent compilation cache: later runs load the compiled studies instead of compiling "
        f"them again (default: ${CACHE_ENV}, else ~/.cache/dpjax/jax; 'off' turns it off; a cache "
        "directory set in JAX's own configuration wins)")
    parser.add_argument("--list", action="store_true", help="list the studies and datasets, then exit")
    return parser


def compile_cache(option: str | None) -> str | None:
    """Turns on JAX's persistent compilation cache in the directory ``option`` (or ``$DPJAX_COMPILE_CACHE``,
    else ``$XDG_CACHE_HOME/dpjax/jax``, default ``~/.cache/dpjax/jax``); ``"off"`` leaves it off. A
    directory already set in JAX's configuration (``JAX_COMPILATION_CACHE_DIR``) is kept. Returns the
    directory in use, or ``None``."""
    import jax

    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir
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


def _options(args) -> tuple[dict, list]:
    """Command line over configuration file over defaults."""
    config, custom = {}, []
    if args.config is not None:
        from dpjax.studies import config as config_file

        config, custom = config_file.load(args.config)
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
    from dpjax.studies.registry import studies

    registered = {**studies(), **{s.name: s for s in custom}}
    if args.list:
        for s in registered.values():
            print(f"{s.name:34s} [{s.family}] on {', '.join(s.datasets)}: {s.description}")
        for name in datasets.DATASET_NAMES:
            print(f"dataset {name:26s} {datasets.load(name, options['seed']).description}")
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
    return _run(selected, options, start)


def _run(selected, options, start) -> int:
    import jax

    from dpjax.studies.progress import Progress
    from dpjax.studies.report import format_result
    from dpjax.studies.study import run_study, step_count

    epsilon = options["epsilon"]
    cache = compile_cache(options["compile_cache"])
    print(f"dpjax study: {len(selected)} studies, {options['trials']} trials per cell, epsilon "
          f"{'each study’s grid' if epsilon is None else ' '.join(f'{e:g}' for e in epsilon)}, seed "
          f"{options['seed']}", flush=True)
    print(f"dpjax study: compile cache {cache}" if cache else "dpjax study: compile cache off", flush=True)
    steps = sum(step_count(s, options["dataset"]) for s in selected)
    results, failures = {}, []

    def one(study, progress):
        grid = {"epsilon": epsilon} if epsilon is not None and "epsilon" in study.grid else None
        study_start = time.perf_counter()
        try:
            result = run_study(study, trials=options["trials"], seed=options["seed"], grid=grid,
                               datasets=options["dataset"], confidence=options["confidence"],
                               progress=progress)
        except Exception as err:  # report, run the other studies, exit non-zero
            failures.append(study.name)
            progress.write(f"dpjax study: error: {study.name}: {type(err).__name__}: {err}", file=sys.stderr)
            return
        results[study.name] = result
        progress.write(format_result(result, seconds=time.perf_counter() - study_start) + "\n")

    with Progress(steps, lines=True) as progress:
        # Studies run in threads: XLA compiles without holding the GIL, so two compile at once.
        with ThreadPoolExecutor(max_workers=options["jobs"]) as pool:
            for future in [pool.submit(one, study, progress) for study in selected]:
                future.result()
    results = [results[s.name] for s in selected if s.name in results]
    wall = time.perf_counter() - start
    compiles = sum(r.record["compiles"] for r in results)
    print(f"dpjax study: {len(results)} studies in {wall:.1f} s, {compiles} compiles, backend "
          f"{jax.default_backend()}", flush=True)
    if options["out"] is not None and results:
        paths = _write(results, options, wall)
        print(f"wrote results.csv, results.json and figures/ ({len(paths) - 2} PNG) to {options['out']}")
    if failures:
        print(f"dpjax study: {len(failures)} studies failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


def _write(results, options, wall: float) -> list[Path]:
    """results.csv, results.json and figures/STUDY.png under ``options["out"]``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from dpjax.studies.progress import heartbeat
    from dpjax.studies.record import run_record

    out = options["out"]
    (out / "figures").mkdir(parents=True, exist_ok=True)
    table = pd.concat([r.table for r in results], ignore_index=True)
    csv_path, json_path = out / "results.csv", out / "results.json"
    table.to_csv(csv_path, index=False)
    record = run_record(
        seed=options["seed"], trials=options["trials"], replicates=1, confidence=options["confidence"],
        chunk_size=results[0].record["chunk_size"],
        grid={name: list(dict.fromkeys(v for r in results for v in r.record["grid"].get(name, ())))
              for name in dict.fromkeys(name for r in results for name in r.record["grid"])},
        datasets=sorted({d for r in results for d in r.record["datasets"]}),
        started=time.time() - wall, wall_seconds=wall,
        steps=[{"study": r.study.name, **s} for r in results for s in r.record["steps"]],
    )
    payload = {
        "record": record,
        "studies": {r.study.name: {k: v for k, v in r.metadata().items() if k not in ("columns", "record")}
                    for r in results},
        "columns": column_descriptions(table.columns, [r.study for r in results]),
        "rows": json.loads(table.to_json(orient="records")),
    }
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    paths = [csv_path, json_path]
    for i, r in enumerate(results, 1):
        print(f"dpjax study: writing figures/{r.study.name}.png ({i}/{len(results)})", flush=True)
        with heartbeat(f"drawing {r.study.name}"):
            fig = r.figure()
            paths.append(out / "figures" / f"{r.study.name}.png")
            fig.savefig(paths[-1], dpi=110)
            plt.close(fig)
    return paths
