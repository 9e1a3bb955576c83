"""Study configuration files (TOML) for ``dpjax study --config FILE``.

A file may set any command-line option at the top level (``trials``, ``epsilon``, ``seed``,
``study``, ``dataset``, ``out``, ``confidence``, ``jobs``, ``compile_cache``; an option given on the
command line wins) and
declare studies of its own under ``[studies.NAME]``::

    trials = 2000
    epsilon = [0.1, 0.3, 1, 3, 10]

    [studies.my_mean]
    description = "clipped mean of my data + Laplace noise"
    mechanisms = { "Laplace mean" = "my_mechanisms.py:private_mean" }   # f(key, data, **params)
    truth = "my_mechanisms.py:true_mean"                                 # truth(data, **params)
    datasets = { uniform = "uniform", mine = "data/values.npy" }         # built-in name, .npy or .csv
    grid = { epsilon = [0.1, 1, 10] }
    params = { upper = 1.0 }                                            # fixed keyword arguments
    metrics = [ { metric = "abs_error", statistics = ["mean", "q95"], unit = "years" } ]

Functions are ``"module:name"`` (an importable module) or ``"file.py:name"`` (a path relative to
the configuration file). **A named file is executed** when the configuration is read (by
``dpjax study --config``, ``--list`` included), once however many references name it, like an
import: use only files you trust. A metric is the name of a constructor of :mod:`dpjax._src.studies.metrics`
with its keyword arguments, or ``"module:name"`` of a :class:`~dpjax._src.studies.metrics.Metric`. With
studies of its own and no ``study`` list, only those run.
"""

from __future__ import annotations

import importlib
import importlib.util
import tomllib
from pathlib import Path

import numpy as np

from dpjax._src.datasets.builtin import DATASET_NAMES
from dpjax._src.studies import metrics as builtin_metrics
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.tools.outdir import file_name

__all__ = [
    "OPTIONS",
    "load",
    "resolve",
]

OPTIONS = ("trials", "epsilon", "seed", "study", "dataset", "out", "confidence", "jobs", "compile_cache")
_STUDY_KEYS = {"description", "mechanisms", "truth", "datasets", "grid", "static", "params", "metrics"}
_METRICS = ("abs_error", "rel_error", "error", "squared_error", "recall", "precision", "set_error",
            "wrong_answer", "value")


def resolve(reference: str, base: Path, modules: dict | None = None):
    """The object named by ``"module:name"`` or ``"file.py:name"`` (relative to ``base``).

    A ``file.py`` is executed (like an import) to find ``name``: only name files you trust. With
    ``modules`` (a dict kept across calls, keyed by the file's resolved path), each file is executed
    once however many references name it.
    """
    if not isinstance(reference, str) or ":" not in reference:
        raise ValueError(f"expected 'module:name' or 'file.py:name', got {reference!r}.")
    where, name = reference.rsplit(":", 1)
    if where.endswith(".py"):
        path = (base / where).resolve()
        modules = {} if modules is None else modules
        if path not in modules:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.exists():
                raise ValueError(f"no such file: {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            modules[path] = module
        module = modules[path]
    else:
        module = importlib.import_module(where)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ValueError(f"{where} has no {name!r}.") from None


def _dataset(value, base: Path):
    if value in DATASET_NAMES:
        return value
    path = base / value
    if path.suffix == ".npy":
        return np.load(path)
    if path.suffix in (".csv", ".txt"):
        return np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None)
    raise ValueError(f"dataset {value!r}: use a built-in name {list(DATASET_NAMES)} or a .npy/.csv file.")


def _metric(spec, base: Path, modules: dict):
    if isinstance(spec, str):
        return resolve(spec, base, modules)
    spec = dict(spec)
    name = spec.pop("metric", None)
    if name not in _METRICS:
        raise ValueError(f"metric {name!r}: use one of {list(_METRICS)} or 'module:name'.")
    return getattr(builtin_metrics, name)(**spec)


def _study(name: str, spec: dict, base: Path, modules: dict) -> Study:
    file_name(name, "study name")  # it names the study's figure file
    unknown = sorted(set(spec) - _STUDY_KEYS)
    if unknown:
        raise ValueError(f"study {name!r}: unknown keys {unknown}; use {sorted(_STUDY_KEYS)}.")
    params = dict(spec.get("params", {}))
    mechanisms = [Mechanism(label, resolve(ref, base, modules), params=params)
                  for label, ref in spec.get("mechanisms", {}).items()]
    return Study(
        name,
        mechanisms=mechanisms,
        datasets={label: _dataset(value, base) for label, value in spec.get("datasets", {}).items()},
        metrics=[_metric(m, base, modules) for m in spec.get("metrics", [])],
        grid=spec.get("grid", {"epsilon": [1.0]}),
        truth=resolve(spec["truth"], base, modules) if "truth" in spec else None,
        static=spec.get("static", ()),
        description=spec.get("description", ""),
        family="config",
    )


def load(path) -> tuple[dict, list[Study]]:
    """The options and the studies of a configuration file. Executes each Python file it names
    (``"file.py:name"``) once."""
    path = Path(path)
    with open(path, "rb") as f:
        config = tomllib.load(f)
    studies = config.pop("studies", {})
    unknown = sorted(set(config) - set(OPTIONS))
    if unknown:
        raise ValueError(f"{path}: unknown options {unknown}; use {list(OPTIONS)} and [studies.NAME].")
    modules: dict = {}  # each file.py executed once
    return config, [_study(name, spec, path.parent, modules) for name, spec in studies.items()]
