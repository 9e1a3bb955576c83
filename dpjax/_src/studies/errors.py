"""Where an error of a study step was raised, for the run record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["error_location"]


def error_location(err: BaseException, fn: Callable | None = None) -> str:
    """``file:line`` where ``err`` was raised in the code of ``fn`` (the deepest such frame), else in
    the deepest frame outside dpjax, JAX and the installed packages, else the deepest frame."""
    import inspect
    import traceback

    if isinstance(err, SyntaxError) and err.filename:  # raised where the file was read, about the file
        return f"{err.filename}:{err.lineno}"
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return "unknown"
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    library = (str(Path(__file__).resolve().parents[1]), "site-packages", "dist-packages", "/lib/python")
    mine = [f for f in frames if code is not None and f.filename == code.co_filename]
    theirs = [f for f in frames if not any(part in str(Path(f.filename).resolve()) for part in library)]
    frame = (mine or theirs or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"

