"""What a running study shows: a progress bar on a terminal, one line per step elsewhere.

The bar names the steps that are running (several when studies run in threads) and keeps its clock
ticking while XLA compiles (a background thread refreshes it twice a second), so a long first
compilation never looks like a hang; a step's status (:meth:`Progress.status`: what is compiling,
releases done, releases/s, ETA) follows its name. Without a terminal, one line per step as it
starts, a step's status at most every ``_STATUS_EVERY`` seconds, and after ``_HEARTBEAT`` seconds of
silence a line naming the steps still running, with their status, and for how long.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from tqdm import tqdm

__all__ = [
    "Progress",
    "heartbeat",
]

_HEARTBEAT = 5.0  # seconds of silence after which the line mode says what is still running
_BEAT = 4.0  # seconds between heartbeat lines on a terminal (under the 5 s promise, with a second of margin)
_STATUS_EVERY = 3.5  # the line mode prints a step's status when this long has passed since the last line


class Progress:
    """Progress over ``total`` steps (a step: one mechanism on one dataset).

    Args:
      total: number of steps.
      enabled: ``True``/``False`` to force the bar; ``None``: only when ``stream`` is a terminal.
      lines: without a bar, print one line per step as it starts.
      stream: where to write (standard error by default).
    """

    def __init__(self, total: int, *, enabled: bool | None = None, lines: bool = False, stream=None):
        self._stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._running: list[str] = []
        self._started = 0
        self._total = total
        self._bar = None
        if enabled or (enabled is None and self._stream.isatty()):
            self._bar = tqdm(total=total, file=self._stream, unit="step", leave=False,
                             bar_format="{desc} {bar} {n_fmt}/{total_fmt} steps [{elapsed}]")
            self._stop = threading.Event()
            self._ticker: threading.Thread | None = threading.Thread(
                target=self._tick, args=(self._bar,), daemon=True)
            self._ticker.start()
        self._lines = lines and self._bar is None
        self._started_at: dict[str, float] = {}
        self._status: dict[str, str] = {}
        self._last_line = time.perf_counter()
        if self._lines:
            self._stop = threading.Event()
            self._ticker = threading.Thread(target=self._heartbeat, daemon=True)
            self._ticker.start()

    def _tick(self, bar: tqdm) -> None:
        while not self._stop.wait(0.5):
            bar.refresh()

    def _heartbeat(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                now = time.perf_counter()
                if self._running and now - self._last_line >= _HEARTBEAT:
                    still = ", ".join(f"{label} ({now - self._started_at[label]:.0f} s"
                                      + (f": {self._status[label]})" if label in self._status else ")")
                                      for label in self._running)
                    print(f"  … still running: {still}", file=self._stream, flush=True)
                    self._last_line = now

    def _describe(self, bar: tqdm) -> None:
        bar.set_description_str(" | ".join(
            f"{label}: {self._status[label]}" if label in self._status else label for label in self._running),
            refresh=True)

    def status(self, label: str, text: str) -> None:
        """The running step ``label`` reports ``text`` (what is compiling; releases done, rate, ETA)."""
        with self._lock:
            if label not in self._running:
                return
            self._status[label] = text
            now = time.perf_counter()
            if self._bar is not None:
                self._describe(self._bar)
            elif self._lines and now - self._last_line >= _STATUS_EVERY:
                print(f"  {label}: {text}", file=self._stream, flush=True)
                self._last_line = now

    def start(self, label: str) -> None:
        """The step ``label`` begins."""
        with self._lock:
            self._started += 1
            self._running.append(label)
            self._started_at[label] = self._last_line = time.perf_counter()
            if self._bar is not None:
                self._describe(self._bar)
            elif self._lines:
                print(f"[{self._started}/{self._total}] {label}", file=self._stream, flush=True)

    def done(self, label: str) -> None:
        """The step ``label`` is done."""
        with self._lock:
            self._running.remove(label)
            self._started_at.pop(label, None)
            self._status.pop(label, None)
            if self._bar is not None:
                self._bar.update(1)
                self._describe(self._bar)

    def write(self, text: str, file=None) -> None:
        """Prints ``text`` without breaking the bar."""
        with self._lock:
            self._last_line = time.perf_counter()
            if self._bar is not None:
                self._bar.write(text, file=file or sys.stdout)
            else:
                print(text, file=file or sys.stdout, flush=True)

    def close(self) -> None:
        if self._lines and self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
        if self._bar is not None and self._ticker is not None:  # a bar always has its ticker
            self._stop.set()
            self._ticker.join()
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _beat_wait(elapsed: float, every: float, terminal: bool) -> float:
    """Seconds from ``elapsed`` (seconds into the phase) to the next heartbeat line: ``every`` on a
    terminal (never a silence longer than that); elsewhere (a log file) ``max(every, elapsed / 5)``, so
    an hour-long phase writes tens of lines, not hundreds."""
    return every if terminal else max(every, elapsed / 5)


def _beat(every: float, terminal: bool, emit, clock, wait) -> None:
    """The heartbeat's loop: ``wait(seconds)`` (true once the phase is over) between calls of ``emit()``
    (which prints a line); ``clock()`` tells the time (injected, so a test runs it on a simulated clock)."""
    start = clock()
    while not wait(_beat_wait(clock() - start, every, terminal)):
        emit()


class _Beat:
    """What :func:`heartbeat` yields: :meth:`phase` renames the phase, keeping its clock of silence (two
    phases that follow each other quietly, each shorter than the heartbeat, are still one silence)."""

    def __init__(self, label: str, clock=time.perf_counter):
        self._clock = clock
        self.phase(label)

    def phase(self, label: str) -> None:
        """The block goes on with ``label`` (its line counts the seconds from now)."""
        self.label, self.since = label, self._clock()

    def line(self) -> str:
        return f"  … {self.label} ({self._clock() - self.since:.0f} s)"


@contextlib.contextmanager
def heartbeat(label: str, *, every: float | None = None, stream=None):
    """Prints ``… label (N s)`` after ``every`` seconds (default :data:`_BEAT`) and then every ``every``
    seconds on a terminal (every ``max(every, elapsed / 5)`` seconds elsewhere) while the block runs,
    for phases with no progress of their own (a reproduction's section, a benchmark case, writing
    figures): a long compile or write never looks like a hang. Yields an object whose
    ``phase(label)`` names the next phase of the same block."""
    stream = stream or sys.stderr
    every = _BEAT if every is None else every
    stop, beat = threading.Event(), _Beat(label)

    def emit() -> None:
        print(beat.line(), file=stream, flush=True)

    thread = threading.Thread(target=_beat, args=(every, _isatty(stream), emit, time.perf_counter, stop.wait),
                              daemon=True)
    thread.start()
    try:
        yield beat
    finally:
        stop.set()
        thread.join()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-like stream without a terminal
        return False
