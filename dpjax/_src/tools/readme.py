"""Generated regions of a README: the ``dpjax bench`` and ``dpjax reproduce`` tables written between
``<!-- dpjax-bench:begin REGION -->`` and ``<!-- dpjax-bench:end REGION -->`` lines
(``--update-readme PATH``), so every number there comes from a run's record."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "markers",
    "readme_problem",
    "update_readme",
]


def markers(region: str | None = None) -> tuple[str, str]:
    """The begin and end lines of a generated region (``region`` names one of several in a file)."""
    name = f" {region}" if region else ""
    return f"<!-- dpjax-bench:begin{name} -->", f"<!-- dpjax-bench:end{name} -->"


def update_readme(path: Path, text: str, region: str | None = None) -> None:
    """Replaces the region between the ``dpjax-bench`` markers (of ``region``) of ``path`` with ``text``."""
    begin, end = markers(region)
    content = Path(path).read_text()
    if content.count(begin) != 1 or content.count(end) != 1 or content.index(begin) > content.index(end):
        raise ValueError(f"{path} must contain one {begin} line followed by one {end} line.")
    head, rest = content.split(begin)
    _, tail = rest.split(end)
    from dpjax._src.atomic import write_text

    write_text(path, f"{head}{begin}\n{text.strip()}\n{end}{tail}")  # atomic: never a half-written file


def readme_problem(path: Path | None, region: str | None) -> str | None:
    """Why ``--update-readme path`` cannot be updated (checked before any computing), or ``None``."""
    if path is None:
        return None
    if not path.is_file():
        return f"--update-readme {path}: no such file"
    begin, end = markers(region)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        return f"--update-readme {path}: {err}"
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        return f"--update-readme {path} must contain one {begin} line followed by one {end} line"
    return None
