"""Stopping a long command cleanly on SIGINT (Ctrl-C) or SIGTERM.

A command that computes in units (a study's steps, a benchmark's cases, a reproduction) runs inside
:func:`handled`. The first signal sets :data:`STOP`; the work checks it between units (and between
the chunks of :func:`dpjax.studies.runner.monte_carlo`) with :func:`check`, which raises
:class:`Interrupted`, and inside :func:`raising` blocks the signal raises at once. The command then
writes every finished unit and exits with :func:`exit_code` (130 for SIGINT, 143 for SIGTERM).
A second signal ends the process at once (outputs are written atomically, so none is half-written).
Light to import: no JAX.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

__all__ = [
    "STOP",
    "Interrupted",
    "check",
    "exit_code",
    "handled",
    "raising",
    "received",
]

STOP = threading.Event()
_state = {"signal": None, "raising": False}


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``signum`` names it."""

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
    _state["signal"] = signum
    STOP.set()
    _say(f"{signal.Signals(signum).name}: stopping after the work in progress and writing what is finished "
         "(send it again to stop at once)")
    if _state["raising"]:
        raise Interrupted(signum)


@contextlib.contextmanager
def handled():
    """Runs the block with the SIGINT and SIGTERM handlers above (installed only when called from the
    main thread), then restores the previous handlers and clears :data:`STOP`."""
    STOP.clear()
    _state.update(signal=None, raising=False)
    main = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        STOP.clear()
        _state.update(raising=False)


@contextlib.contextmanager
def raising():
    """Inside this block (main thread) a first signal raises :class:`Interrupted` at once, for work
    that does not call :func:`check` itself; outside it the signal only sets :data:`STOP`."""
    check()
    _state["raising"] = True
    try:
        yield
    finally:
        _state["raising"] = False


def received() -> int | None:
    """The signal that asked for the stop, or ``None``."""
    return _state["signal"] if STOP.is_set() else None
