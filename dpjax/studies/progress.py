"""What a running study shows: a progress bar on a terminal, one line per step elsewhere.

The bar names the step that is running and keeps its clock ticking while XLA compiles (a background
thread refreshes it twice a second), so a long first compilation never looks like a hang.
"""

from __future__ import annotations

import sys
import threading

from tqdm import tqdm


class Progress:
    """Progress over ``total`` steps (a step: one mechanism on one dataset).

    Args:
      total: number of steps.
      enabled: ``True``/``False`` to force; ``None``: only when ``stream`` is a terminal.
      lines: on a non-terminal stream, print one line per step instead of a bar.
      stream: where to write (standard error by default).
    """

    def __init__(self, total: int, *, enabled: bool | None = None, lines: bool = False, stream=None):
        self._stream = stream or sys.stderr
        terminal = self._stream.isatty()
        self._bar = None
        self._lines = lines and not terminal and enabled is not False
        self._done = 0
        self._total = total
        if enabled or (enabled is None and terminal):
            self._bar = tqdm(total=total, file=self._stream, unit="step", leave=False,
                             bar_format="{desc} {bar} {n_fmt}/{total_fmt} steps [{elapsed}]")
            self._stop = threading.Event()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self._bar.refresh()

    def start(self, label: str) -> None:
        """A step begins."""
        if self._bar is not None:
            self._bar.set_description_str(label, refresh=True)
        elif self._lines:
            print(f"[{self._done + 1}/{self._total}] {label}", file=self._stream, flush=True)

    def advance(self) -> None:
        """The current step is done."""
        self._done += 1
        if self._bar is not None:
            self._bar.update(1)

    def write(self, text: str, file=None) -> None:
        """Prints ``text`` without breaking the bar."""
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
