"""What a running Monte Carlo says: what is compiling, then releases done, releases/s and ETA per chunk.

A :class:`ChunkStatus` turns the runner's events (compiling, a chunk done) into one line of text and
hands it to a sink: a :class:`~dpjax._src.studies.progress.Progress` (``run_study``, ``dpjax study``), or
standard error (a line rewritten in place on a terminal). While a compile or a chunk runs, a
background thread repeats the line with the time elapsed every :data:`_EVERY` seconds, so the run is
never silent for more than that (a 40-second compile says so while it runs).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

__all__: list[str] = []

_EVERY = 1.0  # seconds between repeats of the line while nothing else is said (under the 5 s promise)


def _count(n: float) -> str:
    return f"{n:,.0f}"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes >= 60:
        return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"
    return f"{minutes}:{seconds:02d}"


class ChunkStatus:
    """The status line of one Monte Carlo run of ``total`` trials (``per_trial`` releases each).

    Args:
      sink: ``sink(text)`` shows a line (called from the runner's thread and from a timer thread).
      total: trials of the run.
      per_trial: releases per trial (the grid points a trial covers).
      every: seconds between repeats while a compile or a chunk runs.
    """

    def __init__(self, sink: Callable[[str], None], total: int, per_trial: int = 1, every: float = _EVERY):
        self._sink, self._total, self._per_trial, self._every = sink, total, per_trial, every
        self._lock = threading.Lock()
        self._done = 0
        self._clock = time.perf_counter()
        self._sampling = 0.0  # seconds spent in chunks (not compiling), for the rate
        self._phase: tuple[str, float] | None = None  # (what is running, since)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._repeat, daemon=True)
        self._thread.start()

    def _text(self, now: float) -> str:
        releases, total = self._done * self._per_trial, self._total * self._per_trial
        text = f"{_count(releases)}/{_count(total)} releases"
        if self._done and self._sampling > 0:
            rate = releases / self._sampling
            text += f", {_count(rate)}/s, ETA {_duration((total - releases) / rate)}"
        if self._phase is not None:
            what, since = self._phase
            text = f"{what} ({_duration(now - since)}) · {text}"
        return text

    def _show(self) -> None:
        self._sink(self._text(time.perf_counter()))

    def _repeat(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                if self._phase is not None:
                    self._show()

    def compiling(self, what: str) -> None:
        """A compile of ``what`` begins."""
        with self._lock:
            self._phase = (f"compiling {what}", time.perf_counter())
            self._show()

    def sampling(self, chunk: int, chunks: int) -> None:
        """Chunk ``chunk`` (1-based) of ``chunks`` begins."""
        with self._lock:
            self._phase = (f"chunk {chunk}/{chunks}", time.perf_counter())

    def chunk_done(self, trials: int) -> None:
        """The running chunk has finished ``trials`` more trials."""
        with self._lock:
            if self._phase is not None:
                self._sampling += time.perf_counter() - self._phase[1]
            self._phase = None
            self._done += trials
            self._show()

    @property
    def releases_per_second(self) -> float | None:
        """The sampling rate so far (compiles left out), ``None`` before the first chunk ends."""
        return self._done * self._per_trial / self._sampling if self._done and self._sampling else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def terminal_sink(label: str, stream=None) -> Callable[[str], None]:
    """A sink that rewrites one line of ``stream`` (standard error by default) in place."""
    stream = stream or sys.stderr

    def show(text: str) -> None:
        stream.write(f"\r\x1b[K{label}: {text}")
        stream.flush()

    return show
