"""Stopping a long command cleanly on SIGINT (Ctrl-C) or SIGTERM.

A command that computes in units (a study's steps, a benchmark's cases, a reproduction) runs inside
:func:`handled`. The first signal sets :data:`STOP`; the work checks it between units (and between
the chunks of :func:`dpjax.studies.monte_carlo`) with :func:`check`, which raises
:class:`Interrupted`, and inside :func:`raising` blocks the signal raises at once. The command then
writes every finished unit and exits with :func:`exit_code` (130 for SIGINT, 143 for SIGTERM).
A second signal ends the process at once (outputs are written atomically, so none is half-written).

A signal can come at any moment, also while JAX is imported or the backend starts, where Python
may run the handler inside a callback that swallows what it raises ("Exception ignored in
``_xla_gc_callback``"), or inside an extension's initialization, where an exception aborts the
process (so during an import the handler does not raise at all). So a handler never relies on its
exception alone: it records the signal,
which :func:`handled` keeps (the work stops at its next :func:`check`) and :func:`session` (the
whole ``dpjax`` command, from its first line) reports through :func:`seen`, so that the command
exits 130 or 143 whatever the work returned. Light to import: no JAX.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any

__all__ = [
    "STOP",
    "Interrupted",
    "check",
    "defer",
    "exit_code",
    "handled",
    "raising",
    "received",
    "seen",
    "session",
]

STOP = threading.Event()
_state = {"signal": None, "raising": False, "seen": None, "session": False}


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``signum`` names it. A study run that stops sets ``result``
    (the result of its finished steps) before the exception leaves it."""

    result: Any  # only where a study run set it

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(signum: int | None = None) -> int:
    """The shell's status for a run stopped by ``signum`` (default: the one received): 128 + signum."""
    return 128 + int(signum or _state["signal"] or signal.SIGINT)


def check() -> None:
    """Raises :class:`Interrupted` once a stop was asked for (a no-op otherwise)."""
    if STOP.is_set():
        raise Interrupted(_state["signal"] or signal.SIGINT)


def _say(text: str) -> None:
    try:
        print(f"\n{text}", file=sys.stderr, flush=True)
    except (OSError, RuntimeError):  # stderr closed, or busy in the interrupted frame (reentrant write)
        pass


def _handler(signum, frame):
    if STOP.is_set():  # the second signal: stop now
        _say(f"{signal.Signals(signum).name} again: stopping at once")
        os._exit(exit_code(signum))
    _state.update(signal=signum, seen=signum)
    STOP.set()
    _say(f"{signal.Signals(signum).name}: stopping after the work in progress and writing what is finished "
         "(send it again to stop at once)")
    if _state["raising"] and not _importing(frame):
        raise Interrupted(signum)


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import: there an exception may cross the initialization of a
    compiled extension (jaxlib's), which aborts the process instead of propagating; the signal is
    then only recorded, and the next :func:`check` raises it."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _install(handler) -> dict:
    """Installs ``handler`` for SIGINT and SIGTERM (from the main thread only, where signal handlers
    live); returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


def _restore(previous: dict) -> None:
    for s, h in previous.items():
        signal.signal(s, h)


@contextlib.contextmanager
def handled():
    """Runs the block with the SIGINT and SIGTERM handlers above (installed only when called from the
    main thread), then restores the previous handlers and clears :data:`STOP`. Inside a
    :func:`session`, a signal received before the block is kept (its work stops at the first
    :func:`check`) and :data:`STOP` is left for the session to clear."""
    if not _state["session"]:
        STOP.clear()
        _state.update(signal=None)
    was_raising = _state["raising"]
    _state.update(raising=False)
    previous = _install(_handler)
    try:
        yield
    finally:
        _restore(previous)
        if not _state["session"]:
            STOP.clear()
        _state.update(raising=was_raising)


@contextlib.contextmanager
def session():
    """The whole of one command: from its first line, a first SIGINT or SIGTERM is recorded (see
    :func:`seen`) and raises :class:`Interrupted` at once (except inside an import, and inside
    :func:`handled` blocks, where the work stops at its next :func:`check`), a second one ends the
    process. Where a callback swallows
    the :class:`Interrupted` (JAX's garbage-collector callback), Python's "Exception ignored"
    report of it is left out: the signal is recorded all the same. Restores the previous handlers
    and clears the record at the end."""
    STOP.clear()
    _state.update(signal=None, seen=None, raising=True, session=True)
    previous, unraisable = _install(_handler), sys.unraisablehook

    def quiet(report):  # our exception, swallowed by a callback: the signal is recorded all the same
        if not isinstance(report.exc_value, Interrupted):
            unraisable(report)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        _restore(previous)
        STOP.clear()
        _state.update(signal=None, raising=False, session=False)


def seen() -> int | None:
    """The first signal received during the current :func:`session` (``None`` if none), even one whose
    exception was swallowed or came after its work had finished."""
    return _state["seen"]


@contextlib.contextmanager
def raising():
    """Inside this block (main thread) a first signal raises :class:`Interrupted` at once, for work
    that does not call :func:`check` itself; outside it the signal only sets :data:`STOP`."""
    check()
    was_raising, _state["raising"] = _state["raising"], True
    try:
        yield
    finally:
        _state["raising"] = was_raising


def defer() -> None:
    """From now on in this :func:`session`, a first signal is only recorded (:func:`seen`), not raised:
    for the command's last steps, which report it through the exit status."""
    _state["raising"] = False


def received() -> int | None:
    """The signal that asked for the stop, or ``None``."""
    return _state["signal"] if STOP.is_set() else None
