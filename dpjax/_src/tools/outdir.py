"""Output directories that are replaced whole, never half-written, and that a stopped run resumes.

A command that writes ``--out DIR`` (``dpjax study``, ``bench``, ``reproduce``) checks ``DIR``
before computing anything (:meth:`RunDir.prepare`), writes the run into a staging directory
``.DIR.partial`` beside it, and at the end swaps the staging directory in place of ``DIR``
(:meth:`RunDir.commit`): the files of one run never mix with another's (what other runs wrote
into ``DIR``, such as a nested output directory, is kept), and a run killed at any point leaves
the previous ``DIR`` as it was. The staging directory keeps a ``.checkpoint`` of the
finished units of work; a run stopped by a signal commits what it finished and keeps the
checkpoint in ``DIR/.checkpoint``, and ``--resume`` continues from it (or from the staging
directory of a run that was killed). Light to import: no JAX.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from dpjax._src.atomic import write_text

__all__ = [
    "OutputError",
    "RunDir",
    "file_name",
]

_MARKER = ".dpjax-output"
_CHECKPOINT = ".checkpoint"


def _link(source, target) -> None:
    """A hard link of ``source`` at ``target`` (a copy where the file system has no hard links)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _writable(directory: Path) -> bool:
    """Whether a file can be made (and removed) in ``directory``: tried, since permissions alone do
    not say it (a read-only file system, or a user for whom permission bits do not count)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".dpjax-probe-", dir=directory)
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        return False
    return True


class OutputError(ValueError):
    """``--out`` cannot be used as asked (with the reason, for the user)."""


def file_name(name: str, what: str = "name") -> str:
    """``name`` when it can name a file inside an output directory (one plain, visible path component:
    no ``/`` or ``\\``, not ``.`` or ``..``, no leading dot, no control character); else
    :class:`OutputError`. For names that come from configurations (a study named ``"../../x"`` must
    not write outside ``--out``)."""
    bad = (not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name
           or any(ord(c) < 32 for c in name) or len(name.encode()) > 200)
    if bad:
        raise OutputError(f"{what} {name!r} cannot name a file: use letters, digits, '_', '-', spaces "
                          "(no '/', no leading '.')")
    return name


class RunDir:
    """The output directory of one run: ``path`` (the final ``DIR``) and ``staging`` (where the run
    writes, checkpoint included, until :meth:`commit`).

    Args:
      path: ``--out DIR``.
      overwrite: replace an existing, non-empty ``DIR`` (only one this command marked as its own).
      resume: continue the interrupted run in ``DIR`` (its checkpoint), else start afresh.
      own_files: the names this command writes in ``DIR`` (files or folders): replaced whole by a
        new run (with those of the previous run's manifest), while everything else in ``DIR`` is
        kept. Only a ``DIR`` with this command's ``.dpjax-output`` marker is replaced.
      command: the program name, for messages.
    """

    def __init__(self, path, *, overwrite: bool = False, resume: bool = False, own_files=(),
                 command: str = "dpjax"):
        self.given = Path(path)
        self.path = Path(os.path.abspath(path))  # "." and "out/.." name a directory with a parent
        self.staging = self.path.parent / f".{self.path.name}.partial"
        self.overwrite, self.resume, self.command = overwrite, resume, command
        self.own_files = tuple(own_files)
        self.resumed = False

    @property
    def checkpoint(self) -> Path:
        """The staging directory's checkpoint of finished units."""
        return self.staging / _CHECKPOINT

    def _ours(self) -> bool:
        """Whether ``DIR`` was written by this command: its ``.dpjax-output`` marker says so."""
        try:
            marker = self.path / _MARKER
            return not marker.is_symlink() and json.loads(marker.read_text())["command"] == self.command
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def check(self) -> None:
        """Raises :class:`OutputError` if ``DIR`` may not be written as asked: a file, a symbolic
        link, the current directory or one that holds it, a directory this command did not mark as
        its own (with ``--overwrite``/``--resume``), one that cannot be written, or a staging path
        that is not a directory. Leaves nothing behind."""
        out, shown = self.path, self.given
        if out.is_symlink() or self.staging.is_symlink():
            link = out if out.is_symlink() else self.staging
            raise OutputError(f"--out {shown}: {link} is a symbolic link; give a real directory")
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {shown} is a file, not a directory")
        if self.staging.exists() and not self.staging.is_dir():
            raise OutputError(f"--out {shown}: {self.staging} is in the way (not a directory); remove it")
        if Path.cwd().resolve().is_relative_to(out.resolve()):
            raise OutputError(f"--out {shown} is the current directory (or holds it); it is replaced whole "
                              "at the end of a run: give a new directory, e.g. --out results")
        if out.is_dir() and any(out.iterdir()):
            if not (self.overwrite or self.resume):
                raise OutputError(f"--out {shown} already holds files; pass --overwrite to replace them or "
                                  "--resume to continue an interrupted run there")
            if not self._ours():
                raise OutputError(f"--out {shown} holds files that no {self.command} run wrote (it has no "
                                  f"{_MARKER} of {self.command}); refusing to replace them: choose another "
                                  "directory")
        parent = out.parent
        while not parent.exists():
            parent = parent.parent
        for where in (parent, *([out] if out.is_dir() else [])):
            if not where.is_dir() or not _writable(where):
                raise OutputError(f"--out {shown}: cannot write in {where} (read-only or not a directory)")

    def prepare(self) -> RunDir:
        """:meth:`check`, then makes the staging directory (with the checkpoint to resume from)."""
        self.check()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = self.path / _CHECKPOINT
        if self.resume and self.checkpoint.is_dir():  # a run killed before it could commit
            self.resumed = True
            return self
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir()
        if self.resume and kept.is_dir():
            shutil.copytree(kept, self.checkpoint)
            self.resumed = True
        return self

    def _keep_others(self) -> None:
        """Links into the staging directory what ``DIR`` holds that this command does not write (its own
        names and the files of the previous run's manifest are left behind): e.g. the output of
        another run nested in ``DIR``. Links, not moves: a run killed here leaves ``DIR`` whole."""
        if not self.path.is_dir():
            return
        ours = {_MARKER, _CHECKPOINT, *self.own_files}
        with contextlib.suppress(OSError, ValueError, KeyError):
            manifest = json.loads((self.path / _MARKER).read_text())
            ours |= {Path(name).parts[0] for name in manifest["files"]}
        for entry in self.path.iterdir():
            target = self.staging / entry.name
            if entry.name in ours or target.exists() or target.is_symlink():
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, target, symlinks=True, copy_function=_link)
            else:
                _link(entry, target)

    def commit(self, *, complete: bool, files=()) -> None:
        """Puts the staging directory in place of ``DIR`` (keeping what other runs wrote there, see
        :meth:`_keep_others`); a complete run drops its checkpoint."""
        if complete:
            shutil.rmtree(self.checkpoint, ignore_errors=True)
        manifest = {"command": self.command, "complete": complete, "files": sorted(map(str, files))}
        write_text(self.staging / _MARKER, json.dumps(manifest, indent=2) + "\n")
        self._keep_others()
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{os.getpid()}"
            os.rename(self.path, old)
            os.rename(self.staging, self.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.staging, self.path)

    def discard(self) -> None:
        """Removes the staging directory (nothing to write), unless its checkpoint holds finished work
        (of a killed run that this one was resuming)."""
        if not (self.checkpoint.is_dir() and any(self.checkpoint.iterdir())):
            shutil.rmtree(self.staging, ignore_errors=True)
