"""Files written whole or not at all: a temporary file beside the target, renamed over it when the
write succeeded (atomic on POSIX), so a reader, or a run killed at any point, sees the old file or
the new one, never a part. What the studies' results and checkpoints, the training checkpoints and
the commands' outputs are written with. Light to import: no JAX.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = [
    "atomic_path",
    "write_bytes",
    "write_text",
]

_UMASK = os.umask(0o022)  # read once (os.umask can only be read by setting it) and put back
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path beside ``path``; when the block succeeds it is renamed to ``path``
    (atomic on POSIX), otherwise removed: readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # the mode of a plainly created file, not mkstemp's 0600
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_bytes(path, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
