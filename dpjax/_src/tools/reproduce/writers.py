"""Writers for reproductions: one CSV of every row (and a JSON of each paper's notes and timings
beside it), a Markdown report, and one PNG per paper."""

from __future__ import annotations

import csv
import json
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

from dpjax._src.tools.reproduce.result import (
    COLUMN_DESCRIPTIONS,
    COLUMNS,
    FAILS,
    INTERVAL_RULE,
    NOT_JUDGED,
    VERDICTS,
    Reproduction,
    Row,
    explanation,
    figure_written,
    row_record,
    shown_verdict,
    tolerance_text,
)

__all__ = [
    "CSV_COLUMNS",
    "TEXT_COLUMNS",
    "markdown_report",
    "markdown_table",
    "number",
    "read_csv",
    "screen_summary",
    "summary_table",
    "verdict_counts",
    "write_csv",
    "write_metadata",
    "write_png",
]

CSV_COLUMNS = ("reproduction", "mode", *COLUMNS)
TEXT_COLUMNS = ("experiment", "setting", "quantity", "claim", "verdict", "why")


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


def _number_or_blank(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def write_csv(reproductions: Sequence[Reproduction], path: Path) -> None:
    """Every row of every reproduction, full precision (:data:`CSV_COLUMNS`)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for rep in reproductions:
            for row in rep.rows:
                record = row_record(row)
                writer.writerow(
                    [rep.name, rep.mode]
                    + [
                        record[c] if c in TEXT_COLUMNS else _number_or_blank(record[c])
                        for c in COLUMNS
                    ]
                )


def write_metadata(reproductions: Sequence[Reproduction], path: Path) -> None:
    """``reproduction.json`` beside the CSV: the CSV's column dictionary (``columns``) and per
    reproduction (``reproductions``) its paper, size, trials, notes, timings and the command and
    machine of its run, so that ``--from-csv`` can render the whole report."""
    runs = {
        rep.name: {
            "title": rep.title,
            "mode": rep.mode,
            "trials": rep.trials,
            "notes": rep.notes,
            "seconds": rep.seconds,
            "cpu_seconds": rep.cpu_seconds,
            "command": rep.command,
            "machine": rep.machine,
            "figure": rep.plot is not None,
        }
        for rep in reproductions
    }
    columns = {name: COLUMN_DESCRIPTIONS[name] for name in CSV_COLUMNS}
    path.write_text(json.dumps({"columns": columns, "reproductions": runs}, indent=1) + "\n")


def read_csv(path: Path, titles: dict[str, str]) -> list[Reproduction]:
    """The reproductions of a ``reproduction.csv``, with their notes, sizes, timings and commands
    from the ``reproduction.json`` beside it when there is one (else rows only); ``titles`` maps
    the reproduction names to their papers. The verdicts are recomputed from the stored intervals
    and tolerances; a stored verdict that disagrees with them raises ``ValueError``."""

    def number(text: str) -> float | None:
        return float(text) if text else None

    meta_path = Path(path).with_suffix(".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    meta = meta.get("reproductions", meta)  # the first runs of this format had no column dictionary
    reproductions: dict[str, Reproduction] = {}
    with open(path, newline="") as handle:
        for line in csv.DictReader(handle):
            name = line["reproduction"]
            if name not in reproductions:
                info = meta.get(name, {})
                reproductions[name] = Reproduction(
                    name,
                    titles.get(name, info.get("title", name)),
                    [],
                    info.get("trials", ""),
                    info.get("notes", []),
                    figure_written if info.get("figure") else None,
                    info.get("seconds", 0.0),
                    info.get("cpu_seconds", 0.0),
                    line["mode"],
                    info.get("command", ""),
                    info.get("machine", ""),
                )
            accept = None
            if line["accept_low"] or line["accept_high"]:
                accept = (float(line["accept_low"]), float(line["accept_high"]))
            row = Row(
                line["experiment"],
                line["setting"],
                line["quantity"],
                number(line["paper"]),
                float(line["ours"]),
                number(line["std_error"]),
                line["claim"],
                accept,
                (float(line["ci_low"]), float(line["ci_high"])),
                line["why"],
            )
            if row.verdict != line["verdict"]:
                raise ValueError(
                    f"{name}, {row.setting}: stored verdict {line['verdict']!r}, its interval and "
                    f"tolerance give {row.verdict!r}"
                )
            reproductions[name].rows.append(row)
    return list(reproductions.values())


def verdict_counts(rows: Sequence[Row]) -> dict[str, int]:
    """How many claim rows have each verdict (in :data:`VERDICTS` order)."""
    verdicts = [row.verdict for row in rows if row.accept is not None]
    return {v: verdicts.count(v) for v in VERDICTS}


def _counts_cells(rep: Reproduction) -> str:
    """The claims by verdict; "–" in each at ``--smoke`` size, where no claim is judged."""
    if rep.mode == "smoke":
        return " | ".join("–" for _ in VERDICTS)
    counts = verdict_counts(rep.rows)
    return " | ".join(str(counts[v]) for v in VERDICTS)


def summary_table(reproductions: Sequence[Reproduction], report: str) -> str:
    """One line per reproduction: its size, its numbers, how many have a paper value and how many
    of those lie within 0.8-1.25x of it, and its claims by verdict; each links to its section of
    ``report``."""
    lines = [
        "| reproduction | paper | size | numbers | with a paper value "
        "| of those, ours / paper in [0.8, 1.25] | claims: hold | do not hold | inconclusive at this size |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rep in reproductions:
        ratios = [r.ratio for r in rep.rows if r.ratio is not None]
        close = sum(0.8 <= ratio <= 1.25 for ratio in ratios)
        lines.append(
            f"| [`{rep.name}`]({report}#{rep.name}) | {rep.title} | `--{rep.mode}` | {len(rep.rows)} | "
            f"{len(ratios)} | {close} | {_counts_cells(rep)} |"
        )
    return "\n".join(lines)


def _interval_text(row: Row) -> str:
    low, high = row.interval
    if low == high:
        return "exact" if row.std_error is None and row.ci is None else number(low)
    return f"[{number(low, 3)}, {number(high, 3)}]"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def screen_summary(rep: Reproduction, width: int) -> str:
    """What ``dpjax reproduce`` prints for a finished paper, every line at most ``width`` columns: its
    trials, how many numbers lie near the paper's, its claims by verdict and each claim that does not
    hold (one line each; the full table is in the report)."""
    ratios = [row.ratio for row in rep.rows if row.ratio is not None]
    close = sum(0.8 <= ratio <= 1.25 for ratio in ratios)
    claims = [row for row in rep.rows if row.accept is not None]
    if rep.mode == "smoke":
        verdicts = f"{len(claims)} claims, {NOT_JUDGED} (--smoke)"
    else:
        counts = verdict_counts(rep.rows)
        verdicts = f"claims: {', '.join(f'{n} {v}' for v, n in counts.items())}"
    text = (
        f"{rep.trials}\n{len(rep.rows)} numbers, {len(ratios)} with a paper value, {close} of those within "
        f"0.8-1.25x of it; {verdicts}."
    )
    lines = [textwrap.fill(part, width, subsequent_indent="  ") for part in text.split("\n")]
    if rep.mode != "smoke":
        for row in claims:
            if row.verdict == FAILS:
                lines.append(_clip(f"  {FAILS}: {row.experiment}, {row.setting}: {row.quantity}", width))
    return "\n".join(lines)


def markdown_table(rep: Reproduction) -> str:
    """The rows of one reproduction as a Markdown table."""
    lines = [
        "| experiment | setting | quantity | paper | ours ± SE | 95% interval | ours / paper | paper's claim "
        "| judged by | verdict | why |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rep.rows:
        ours = number(row.ours)
        if row.std_error is not None and math.isfinite(row.std_error):
            ours += f" ± {number(row.std_error, 2)}"
        ratio = "" if row.ratio is None else f"{row.ratio:.3g}"
        verdict = shown_verdict(row, rep.mode)
        cells = (
            row.experiment,
            row.setting,
            row.quantity,
            number(row.paper),
            ours,
            _interval_text(row),
            ratio,
            row.claim,
            "" if row.accept is None else tolerance_text(row.accept),
            f"**{verdict}**" if verdict == FAILS else verdict,
            explanation(row),
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
    figures: Path | dict[str, Path] = Path("."),
) -> str:
    """The whole report: the command, the mode, how claims are judged, a summary, then one section
    per paper (its own command where the reproductions come from several runs).

    ``figures`` is the directory of the PNGs relative to the report (or one per reproduction).
    """
    out = [
        "# Reproductions of the papers' numbers",
        "",
        f"Generated by `{command}` ({machine}): {seconds:.0f} s wall time, {cpu_seconds:.0f} s CPU time.",
        "",
        mode_line,
        "",
        "Every row puts the paper's number (or, where the paper states only a trend, its claim) beside "
        'ours. "ours / paper" is the ratio where the paper gives a number. ' + INTERVAL_RULE + ' "why" '
        "explains every claim that does not hold, and every inconclusive one where the cause is known.",
        "",
        "| reproduction | paper | size | rows | claims: hold | do not hold | inconclusive at this size | "
        "wall s | CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rep in reproductions:
        out.append(
            f"| [`{rep.name}`](#{rep.name}) | {rep.title} | `--{rep.mode}` | {len(rep.rows)} | "
            f"{_counts_cells(rep)} | {rep.seconds:.0f} | {rep.cpu_seconds:.0f} |"
        )
    for rep in reproductions:
        out += ["", f'<a id="{rep.name}"></a>', f"## {rep.title}", ""]
        source = f" (from `{rep.command}`, {rep.machine})" if rep.command and rep.command != command else ""
        out += [f"`dpjax reproduce {rep.name} --{rep.mode}`{source}: {rep.trials}", ""]
        out += [f"* {note}" for note in rep.notes]
        out += ["", markdown_table(rep)]
        if rep.plot is not None:
            where = figures[rep.name] if isinstance(figures, dict) else figures
            out += ["", f"![{rep.name}]({(where / f'{rep.name}.png').as_posix()})"]
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
