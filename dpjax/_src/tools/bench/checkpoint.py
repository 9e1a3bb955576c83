"""The checkpoint of ``dpjax bench``: the finished cases of a run, checked before ``--resume`` reuses them.

``dpjax bench --out DIR`` saves its record after each case as ``record.json`` in the run's checkpoint
directory (data only: reading it runs no code), with a fingerprint of what made it: the run's
settings (scale, repeats, peers) and :func:`dpjax._src.studies.checkpoint.versions` (the digest of dpjax's
code, the library versions, the backend, ``jax_enable_x64``). :func:`load` refuses
(:class:`~dpjax.studies.CheckpointMismatch`) a record made otherwise, naming what differs,
so a resumed run never mixes rows of two different runs; a file that is unreadable or not one of
these is ignored (its cases are measured again).
"""

from __future__ import annotations

import json
from pathlib import Path

from dpjax._src.atomic import write_text
from dpjax._src.studies.checkpoint import CheckpointMismatch, versions

__all__ = [
    "FORMAT",
    "fingerprint",
    "load",
    "save",
]

FORMAT = "dpjax-bench-record/1"


def fingerprint(settings: dict) -> dict:
    """What the rows of a run with ``settings`` (scale, repeats, peers) depend on, part by part."""
    return {**json.loads(json.dumps(settings, default=repr)), "versions": versions()}


def save(path: Path, record: dict, made: dict) -> None:
    """Writes ``record`` (the rows so far) with the fingerprint ``made`` to ``path``, atomically."""
    write_text(path, json.dumps({"format": FORMAT, "fingerprint": made, "record": record}) + "\n")


def load(path: Path, made: dict, say=print) -> list[dict]:
    """The finished rows saved in ``path`` by a run with the fingerprint ``made``; none when there is no
    file or it cannot be trusted (``say`` tells why). Raises
    :class:`~dpjax.studies.CheckpointMismatch` when it was made otherwise."""
    if not path.is_file():
        return []
    try:
        payload = json.loads(path.read_text())
        saved, rows = payload["fingerprint"], payload["record"]["rows"]
        if payload["format"] != FORMAT or not isinstance(saved, dict) or not isinstance(rows, list):
            raise ValueError("not a checkpoint of dpjax bench")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as err:
        say(f"dpjax bench: the checkpoint {path} cannot be used ({type(err).__name__}: {err}); "
            "measuring every case again")
        return []
    differ = [part for part in sorted(set(saved) | set(made)) if saved.get(part) != made.get(part)]
    if differ:
        raise CheckpointMismatch(
            f"the checkpoint {path} was made with another {', '.join(differ)}; refusing to resume from "
            "it: run without --resume (or with --overwrite) to start afresh")
    return [row for row in rows if isinstance(row, dict)]
