"""What a running study shows: a progress bar on a terminal, one line per step elsewhere.

The bar names the steps that are running (several when studies run in threads) and keeps its clock
ticking while XLA compiles (a background thread refreshes it twice a second), so a long first
compilation never looks like a hang.
"""

from __future__ import annotations

import sys
import threading

from tqdm import tqdm


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
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        self._lines = lines and self._bar is None

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self._bar.refresh()

    def _describe(self) -> None:
        self._bar.set_description_str(" | ".join(self._running), refresh=True)

    def start(self, label: str) -> None:
        """The step ``label`` begins."""
        with self._lock:
            self._started += 1
            self._running.append(label)
            if self._bar is not None:
                self._describe()
            elif self._lines:
                print(f"[{self._started}/{self._total}] {label}", file=self._stream, flush=True)

    def done(self, label: str) -> None:
        """The step ``label`` is done."""
        with self._lock:
            self._running.remove(label)
            if self._bar is not None:
                self._bar.update(1)
                self._describe()

    def write(self, text: str, file=None) -> None:
        """Prints ``text`` without breaking the bar."""
        with self._lock:
            if self._bar is not None:
                self._bar.write(text, file=file or sys.stdout)
            else:
                print(text, file=file or sys.stdout, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._stop.set()
            self._ticker.join()
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
