"""Checkpoints of finished study steps: data (JSON), never pickles, each with a fingerprint of what made it.

:func:`dpjax.studies.run_study` (``checkpoint=DIR``) saves each finished step as ``DIR/NAME.json``:
the step's record and table rows, and a :func:`fingerprint` of everything they depend on (the run's
settings, the source files of the mechanism, truth and metrics, the data, the seed, the versions of
dpjax's code and of the libraries). A later run with the same checkpoint loads a step only when its
fingerprint is the same, part for part; any difference raises :class:`CheckpointMismatch` naming the
parts that differ (a resumed run never mixes steps of two different runs). A file that cannot be read
or that does not hold what a step's file holds is not trusted: the step is computed again.
Reading a checkpoint runs no code (JSON only).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
from pathlib import Path

import numpy as np

__all__ = [
    "FORMAT",
    "CheckpointMismatch",
    "StepStore",
    "data_digest",
    "fingerprint",
    "source_digest",
    "versions",
]

FORMAT = "dpjax-study-step/1"


class CheckpointMismatch(ValueError):
    """A checkpointed step was made by something else than the run that would resume it."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: str) -> str:
    """The sha256 of a file, read again when its modification time or size changed."""
    try:
        stat = os.stat(path)
    except OSError:
        return "unreadable"
    return _cached_digest(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _cached_digest(path: str, mtime_ns: int, size: int) -> str:
    try:
        return _sha(Path(path).read_bytes())
    except OSError:
        return "unreadable"


@functools.cache
def _library_digest() -> str:
    """The digest of dpjax's own Python files (what its mechanisms run)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + _file_digest(str(path)).encode())
    return h.hexdigest()


def source_digest(fn) -> str:
    """The digest of the code of ``fn``: its qualified name and the whole source file it is defined in
    (so an edit of a helper in that file counts); a :func:`functools.partial` adds its arguments."""
    if isinstance(fn, functools.partial):
        return _sha(json.dumps([source_digest(fn.func), data_digest((fn.args, fn.keywords))]).encode())
    fn = inspect.unwrap(fn)
    try:
        where = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except TypeError:  # a builtin, or an object without a file
        where = None
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    return _sha(json.dumps([name, None if where is None else _file_digest(where)]).encode())


def _leaves(value):
    """The arrays and scalars of a pytree of data, with their paths (dicts in key order)."""
    if isinstance(value, dict):
        for key in sorted(value, key=repr):
            for path, leaf in _leaves(value[key]):
                yield (repr(key), *path), leaf
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            for path, leaf in _leaves(item):
                yield (i, *path), leaf
    else:
        yield (), value


def data_digest(value) -> str:
    """The digest of a pytree of data (arrays by dtype, shape and bytes; other values by ``repr``)."""
    h = hashlib.sha256()
    for path, leaf in _leaves(value):
        h.update(repr(path).encode())
        if callable(leaf):
            h.update(source_digest(leaf).encode())
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            array = np.ascontiguousarray(np.asarray(leaf))
            h.update(f"{array.dtype.str}{array.shape}".encode() + array.tobytes())
        else:
            h.update(repr(leaf).encode())
    return h.hexdigest()


def versions() -> dict:
    """The code a result depends on besides its own: a digest of dpjax's Python files, the versions of
    JAX, jaxlib, NumPy and Python, the backend and ``jax_enable_x64``."""
    import jax

    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]  # jax's Config stub lacks the options
    return {**_packages(), "backend": jax.default_backend(), "jax_enable_x64": x64}


@functools.cache
def _packages() -> dict:
    import sys
    from importlib import metadata

    import jax

    def version(package):
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {"dpjax code": _library_digest(), "jax": jax.__version__, "jaxlib": version("jaxlib"),
            "numpy": np.__version__, "python": sys.version.split()[0]}


def fingerprint(*, settings: dict, mechanism, truth, metrics, data, seed: int) -> dict:
    """What a step's numbers depend on, part by part (each JSON: a value or a sha256 digest).

    Args:
      settings: the run's settings of the step (trials, replicates, confidence, grid points, ...).
      mechanism: the mechanism's function; truth: the truth function (or ``None``).
      metrics: the study's :class:`~dpjax._src.studies.metrics.Metric` objects.
      data: the step's dataset (host arrays) and fixed parameters.
      seed: the run's seed.
    """
    described = [[m.name, m.statistics, m.output, m.truth, m.unit, m.rate, source_digest(m.fn)]
                 for m in metrics]
    return {
        "settings": json.loads(json.dumps(settings, default=repr)),
        "seed": seed,
        "mechanism source": source_digest(mechanism),
        "truth source": None if truth is None else source_digest(truth),
        "metrics": _sha(json.dumps(described, default=repr).encode()),
        "data": data_digest(data),
        "versions": versions(),
    }


def _plain(value):
    """JSON for the NumPy scalars of a step's rows."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not data")


def _valid(payload, identity: dict) -> bool:
    """Whether ``payload`` holds a step's file for ``identity`` (its record and its non-empty rows)."""
    if not (isinstance(payload, dict) and payload.get("format") == FORMAT
            and isinstance(payload.get("fingerprint"), dict) and isinstance(payload.get("step"), dict)
            and isinstance(payload.get("rows"), list) and payload["rows"]):
        return False
    step, rows = payload["step"], payload["rows"]
    if payload.get("identity") != identity or step.get("mechanism") != identity["mechanism"]:
        return False
    labels = set(identity["labels"])
    return all(isinstance(r, dict) and r.get("study") == identity["study"] and r.get("mechanism") in labels
               and r.get("dataset") == identity["dataset"] and isinstance(r.get("estimate"), (int, float))
               for r in rows)


class StepStore:
    """The finished steps of a run in ``directory``, one JSON file per step, each written atomically.

    A step is named by its ``identity`` (study, mechanism, dataset, static point: JSON, so no two
    steps share a name) and checked by its :func:`fingerprint`.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.unreadable: list[str] = []  # steps whose file was not trusted (computed again)

    def _path(self, identity: dict) -> Path:
        return self.directory / f"{_sha(json.dumps(identity, sort_keys=True).encode())[:32]}.json"

    def load(self, identity: dict, expected: dict):
        """``(step, rows)`` saved for ``identity``; ``None`` when there is none or it cannot be
        trusted (then it is noted in ``unreadable``). Raises :class:`CheckpointMismatch` when it was
        made with another fingerprint."""
        path = self._path(identity)
        try:
            payload = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            payload = None
        if not _valid(payload, identity):
            self.unreadable.append(path.name)
            return None
        saved = payload["fingerprint"]
        parts = sorted(set(saved) | set(expected))
        differ = [part for part in parts if saved.get(part) != expected.get(part)]
        if differ:
            what = f"{identity['study']}: {identity['mechanism']} on {identity['dataset']}"
            raise CheckpointMismatch(
                f"the checkpoint of {what} ({path}) was made with another {', '.join(differ)}; refusing to "
                "resume from it: run without --resume (or with --overwrite) to start afresh")
        return payload["step"], payload["rows"]

    def save(self, identity: dict, fingerprint: dict, step: dict, rows: list) -> None:
        """Writes the step's file atomically."""
        from dpjax._src.atomic import write_text

        payload = {"format": FORMAT, "identity": identity, "fingerprint": fingerprint, "step": step,
                   "rows": rows}
        write_text(self._path(identity), json.dumps(payload, default=_plain, allow_nan=True) + "\n")
