"""Writers for reproductions: one CSV of every row, a Markdown report, and one PNG per paper."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from dpjax.studies.reproduce.result import COLUMNS, Reproduction, Row

CSV_COLUMNS = ("reproduction", *COLUMNS)


def number(value: float | None, digits: int = 4) -> str:
    """A short human-readable number ("–" for ``None``)."""
    if value is None:
        return "–"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.{max(digits - 1, 1)}e}"
    return f"{value:.{digits}g}"


def _holds(value: bool | None) -> str:
    return "" if value is None else ("yes" if value else "**no**")


def write_csv(reproductions: Sequence[Reproduction], path: Path) -> None:
    """Every row of every reproduction, full precision."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for rep in reproductions:
            for row in rep.rows:
                writer.writerow(
                    [
                        rep.name,
                        row.experiment,
                        row.setting,
                        row.quantity,
                        "" if row.paper is None else repr(float(row.paper)),
                        repr(float(row.ours)),
                        "" if row.std_error is None else repr(float(row.std_error)),
                        "" if row.ratio is None else repr(float(row.ratio)),
                        row.claim,
                        "" if row.holds is None else row.holds,
                    ]
                )


def read_csv(path: Path, titles: dict[str, str]) -> list[Reproduction]:
    """The reproductions of a ``reproduction.csv`` (rows only: no notes, trials, figure or timings);
    ``titles`` maps the reproduction names to their papers."""

    def number(text: str) -> float | None:
        return float(text) if text else None

    reproductions: dict[str, Reproduction] = {}
    with open(path, newline="") as handle:
        for line in csv.DictReader(handle):
            name = line["reproduction"]
            if name not in reproductions:
                reproductions[name] = Reproduction(name, titles.get(name, name), [], "", [])
            holds = {"True": True, "False": False}.get(line["holds"])
            reproductions[name].rows.append(
                Row(
                    line["experiment"],
                    line["setting"],
                    line["quantity"],
                    number(line["paper"]),
                    float(line["ours"]),
                    number(line["std_error"]),
                    line["claim"],
                    holds,
                )
            )
    return list(reproductions.values())


def summary_table(reproductions: Sequence[Reproduction], report: str) -> str:
    """One line per reproduction: its numbers, how many have a paper value and how many of those lie
    within 0.8-1.25x of it, and the paper's claims that hold; each links to its section of ``report``."""
    lines = [
        "| reproduction | paper | numbers | with a paper value | of those, ours / paper in [0.8, 1.25] | "
        "claims that hold |",
        "|---|---|---|---|---|---|",
    ]
    for rep in reproductions:
        ratios = [r.ratio for r in rep.rows if r.ratio is not None]
        close = sum(0.8 <= ratio <= 1.25 for ratio in ratios)
        checked = [r.holds for r in rep.rows if r.holds is not None]
        lines.append(
            f"| [`{rep.name}`]({report}#{rep.name}) | {rep.title} | {len(rep.rows)} | {len(ratios)} | "
            f"{close} | {sum(checked)} / {len(checked)} |"
        )
    return "\n".join(lines)


def markdown_table(rep: Reproduction) -> str:
    """The rows of one reproduction as a Markdown table."""
    lines = [
        "| experiment | setting | quantity | paper | ours ± SE | ours / paper | paper's claim | holds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rep.rows:
        ours = number(row.ours)
        if row.std_error is not None and math.isfinite(row.std_error):
            ours += f" ± {number(row.std_error, 2)}"
        ratio = "" if row.ratio is None else f"{row.ratio:.3g}"
        cells = (
            row.experiment,
            row.setting,
            row.quantity,
            number(row.paper),
            ours,
            ratio,
            row.claim,
            _holds(row.holds),
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def markdown_report(
    reproductions: Sequence[Reproduction],
    *,
    command: str,
    mode_line: str,
    machine: str,
    seconds: float,
    cpu_seconds: float,
    figures: Path = Path("."),
) -> str:
    """The whole report: the command, the mode, a summary, then one section per paper.

    ``figures`` is the directory of the PNGs relative to the report.
    """
    out = [
        "# Reproductions of the papers' numbers",
        "",
        f"Generated by `{command}` ({machine}): {seconds:.0f} s wall time, {cpu_seconds:.0f} s CPU time.",
        "",
        mode_line,
        "",
        "Every row puts the paper's number (or, where the paper states only a trend, its claim) beside "
        'ours; "holds" says whether our measurement agrees with the claim. "ours / paper" is the '
        "ratio where the paper gives a number.",
        "",
        "| reproduction | paper | rows | claims that hold | wall s | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for rep in reproductions:
        checked = [r.holds for r in rep.rows if r.holds is not None]
        out.append(
            f"| [`{rep.name}`](#{rep.name}) | {rep.title} | {len(rep.rows)} | "
            f"{sum(checked)} / {len(checked)} | {rep.seconds:.0f} | {rep.cpu_seconds:.0f} |"
        )
    for rep in reproductions:
        out += ["", f'<a id="{rep.name}"></a>', f"## {rep.title}", ""]
        out += [f"`dpjax reproduce {rep.name}`: {rep.trials}", ""]
        out += [f"* {note}" for note in rep.notes]
        out += ["", markdown_table(rep)]
        if rep.plot is not None:
            out += ["", f"![{rep.name}]({(figures / f'{rep.name}.png').as_posix()})"]
    return "\n".join(out) + "\n"


def write_png(rep: Reproduction, path: Path) -> None:
    """The reproduction's figure (nothing when it has none)."""
    if rep.plot is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.size": 9, "axes.titlesize": 9, "legend.fontsize": 7}):
        rep.plot(path)
    plt.close("all")
