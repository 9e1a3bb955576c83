"""The checkpoint of ``dpjax reproduce``: each finished reproduction as data, checked before it is reused.

A finished reproduction is saved in the run's checkpoint directory as ``NAME.json`` (its rows, notes
and timings: data only, reading it runs no code) and ``NAME.png`` (its figure, whose sha256 the JSON
holds), with a fingerprint of what made it: the reproduction, mode, seed and data directory, the
digest of the data files, the source of the reproduction's module, dpjax's code and the library
versions (:func:`dpjax._src.studies.checkpoint.versions`). :func:`load` refuses
(:class:`~dpjax.studies.CheckpointMismatch`) a reproduction made otherwise, naming what
differs, and ignores (the reproduction runs again) a file that is unreadable or not one of these.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from dpjax._src.atomic import write_bytes, write_text
from dpjax._src.studies.checkpoint import CheckpointMismatch, source_digest, versions
from dpjax._src.tools.reproduce.result import Reproduction, Row, figure_written

__all__ = [
    "FORMAT",
    "fingerprint",
    "load",
    "save",
]

FORMAT = "dpjax-reproduction/1"
_FIELDS = ("name", "title", "trials", "notes", "seconds", "cpu_seconds", "mode", "command", "machine")


def _data_digest(data_dir) -> str | None:
    """The digest of the files directly in ``data_dir`` (names and bytes), ``None`` without one."""
    if data_dir is None:
        return None
    h = hashlib.sha256()
    for path in sorted(Path(data_dir).iterdir()):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).hexdigest().encode())
    return h.hexdigest()


def fingerprint(name: str, module, mode: str, seed: int, data_dir) -> dict:
    """What the numbers of reproduction ``name`` (run by ``module``) depend on, part by part."""
    data = None if data_dir is None else str(Path(data_dir).resolve())
    return {"reproduction": name, "mode": mode, "seed": seed, "data directory": data,
            "data files": _data_digest(data_dir), "reproduction source": source_digest(module.run),
            "versions": versions()}


def save(directory: Path, rep: Reproduction, made: dict, png: bytes | None) -> None:
    """Writes ``rep`` (without its plotting function) and its PNG into the checkpoint ``directory``."""
    rows = [dataclasses.asdict(row) for row in rep.rows]
    payload = {"format": FORMAT, "fingerprint": made, "png_sha256": None,
               "reproduction": {field: getattr(rep, field) for field in _FIELDS}, "rows": rows}
    if png is not None:
        write_bytes(directory / f"{rep.name}.png", png)
        payload["png_sha256"] = hashlib.sha256(png).hexdigest()
    write_text(directory / f"{rep.name}.json", json.dumps(payload, indent=1, default=_plain) + "\n")


def _plain(value):
    """JSON for NumPy scalars in a reproduction's rows."""
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not data")


def _row(record: dict) -> Row:
    pair = {key: None if record[key] is None else (float(record[key][0]), float(record[key][1]))
            for key in ("accept", "ci")}
    return Row(**{**record, **pair})


def _decoded(payload, name: str, directory: Path):
    """The :class:`Reproduction` and PNG of a saved payload; raises ``ValueError`` (or ``KeyError``,
    ``TypeError``) when it is not one."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError("not a dpjax reproduction checkpoint")
    fields = payload["reproduction"]
    if fields["name"] != name or set(fields) != set(_FIELDS):
        raise ValueError("another reproduction's checkpoint")
    rep = Reproduction(**fields, rows=[_row(r) for r in payload["rows"]])
    png = None
    if payload["png_sha256"] is not None:
        png = (directory / f"{name}.png").read_bytes()
        if hashlib.sha256(png).hexdigest() != payload["png_sha256"]:
            raise ValueError("its PNG does not match its checksum")
    return rep, png


def load(directory: Path, name: str, made: dict, say=print):
    """``(reproduction, png)`` saved for ``name`` by a run with the fingerprint ``made``; ``None`` when
    there is none or it cannot be trusted (``say`` tells why). Raises
    :class:`~dpjax.studies.CheckpointMismatch` when it was made otherwise."""
    path = directory / f"{name}.json"
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text())
        saved = payload["fingerprint"]
        rep, png = _decoded(payload, name, directory)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError, RecursionError) as err:
        say(f"dpjax reproduce: the checkpoint of {name} cannot be used ({type(err).__name__}: {err}); "
            "running it again")
        return None
    if not isinstance(saved, dict):
        say(f"dpjax reproduce: the checkpoint of {name} has no fingerprint; running it again")
        return None
    differ = [part for part in sorted(set(saved) | set(made)) if saved.get(part) != made.get(part)]
    if differ:
        raise CheckpointMismatch(
            f"the checkpoint of {name} ({path}) was made with another {', '.join(differ)}; refusing to "
            "resume from it: run without --resume (or with --overwrite) to start afresh")
    if png is not None:
        rep.plot = figure_written  # markdown_report links the PNG
    return rep, png
