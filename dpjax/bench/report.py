"""Reports of a ``dpjax bench`` record: terminal table, JSON, Markdown, plot, README region.

The Markdown is what ``benchmarks/README.md`` shows between the ``<!-- dpjax-bench:begin -->`` and
``<!-- dpjax-bench:end -->`` markers (or ``<!-- dpjax-bench:begin NAME -->`` ... for a named region;
:func:`update_readme`), so every headline timing there comes from a JSON record of this harness
together with the command that produced it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from dpjax.bench.harness import machine_info

__all__ = [
    "MAIN_COLUMNS",
    "PEER_COLUMNS",
    "bandwidth",
    "count",
    "describe_machine",
    "figure_notes",
    "main_rows",
    "markdown",
    "markers",
    "peer_rows",
    "plot",
    "print_machine",
    "print_table",
    "ratio",
    "read_json",
    "save",
    "seconds",
    "size",
    "terminal",
    "update_readme",
    "write_json",
]

MAIN_COLUMNS = (
    "mechanism",
    "setting",
    "single / release [min, max]",
    "single x floor",
    "single x limit",
    "MC releases",
    "MC / release [min, max]",
    "MC x floor",
    "MC releases/s",
    "compile s (single, MC)",
    "memory (MC call)",
)
PEER_COLUMNS = ("mechanism", "peer", "input", "peer / release", "peer / dpjax single", "peer / dpjax MC")


def seconds(value: float | None) -> str:
    """A duration with a unit chosen for 3 significant digits (ns to s)."""
    if value is None or not math.isfinite(value):
        return ""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def ratio(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:.3g}x" if value < 1e4 else f"{value:.2e}x"


def count(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:.3g}" if value < 1e4 else f"{value:.2e}"


def size(value: int | None) -> str:
    if value is None:
        return ""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value} B"


def _spread(timing: dict) -> str:
    """``median [min, max]`` of a timing record."""
    if "min_seconds" not in timing:
        return seconds(timing["seconds"])
    return (
        f"{seconds(timing['seconds'])} [{seconds(timing['min_seconds'])}, {seconds(timing['max_seconds'])}]"
    )


def _limit(single: dict) -> str:
    """``single x limit``: the release's time over the larger of its RNG and memory floors, and which."""
    if "limit_ratio" not in single:
        return ""
    return f"{ratio(single['limit_ratio'])} ({single['limit']})"


def bandwidth(value: float | None) -> str:
    """Bytes per second in GB/s (10^9 bytes)."""
    return "" if not value else f"{value / 1e9:.3g} GB/s"


def main_rows(record: dict) -> list[list[str]]:
    rows = []
    for row in record["rows"]:
        if "error" in row:
            rows.append([row["mechanism"], row.get("setting", ""), f"error: {row['error']}"]
                        + [""] * (len(MAIN_COLUMNS) - 3))
            continue
        single, mc = row["single"], row.get("monte_carlo")
        compile_times = [single.get("compile_seconds")] + ([mc.get("compile_seconds")] if mc else [])
        rows.append(
            [
                row["mechanism"],
                row["setting"],
                _spread(single) + (" (eager)" if single.get("path") == "eager call" else ""),
                ratio(single.get("floor_ratio")),
                _limit(single),
                str(mc["releases"]) if mc else "",
                _spread(mc) if mc else "",
                ratio(mc.get("floor_ratio")) if mc else "",
                count(mc.get("releases_per_second")) if mc else "",
                ", ".join(f"{t:.2f}" for t in compile_times if t is not None),
                size((mc or single).get("memory_bytes")),
            ]
        )
    return rows


def peer_rows(record: dict) -> list[list[str]]:
    rows = []
    for row in record["rows"]:
        for peer in row.get("peers", []):
            name = (
                f"{peer['name']} ({peer['library']} {peer['version']})"
                if peer.get("version")
                else peer["name"]
            )
            if "skipped" in peer:
                rows.append([row["mechanism"], name, peer["note"], f"skipped: {peer['skipped']}", "", ""])
                continue
            repeated = ""
            if peer["repeated_seconds"] != peer["seconds"]:
                repeated = f" (repeated: {seconds(peer['repeated_seconds'])})"
            rows.append(
                [
                    row["mechanism"],
                    name,
                    peer["note"],
                    seconds(peer["seconds"]) + repeated,
                    ratio(peer["ratio_single"]),
                    ratio(peer.get("ratio_monte_carlo")),
                ]
            )
    return rows


def _text_table(columns, rows) -> str:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _markdown_table(columns, rows) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(v.replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(lines)


def describe_machine(record: dict) -> str:
    m = record["machine"]
    memory = size(m.get("device_memory_bytes"))
    load = record.get("load_average_start")
    return (
        f"{m['backend']} backend, device {m['device']} (x{m['device_count']}, {memory}); "
        f"host {m['host_cpu']}, {m['cores']} cores; Python {m['python']}, jax {m['jax']}, "
        f"x64 {'on' if m['x64'] else 'off'}; "
        + (f"streaming bandwidth {bandwidth(record['stream_bandwidth'])}; " if record.get("stream_bandwidth")
           else "")
        + f"load average at start {load}, at end {record.get('load_average_end')}"
    )


def terminal(record: dict) -> str:
    parts = [
        f"dpjax bench on {describe_machine(record)}",
        _text_table(MAIN_COLUMNS, main_rows(record)),
    ]
    peers = peer_rows(record)
    if peers:
        parts.append(_text_table(PEER_COLUMNS, peers))
    return "\n\n".join(parts)


def markdown(record: dict) -> str:
    """The Markdown report: command, machine, the main table and the peer table."""
    parts = [
        f"Command: `{record['command']}` ({record['date']}, {record['wall_seconds']:.0f} s in total, "
        f"scale {record['scale']:g}, median of {record['repeats']} repeats).",
        f"Machine: {describe_machine(record)}.",
        'Times are per release (median of the repeats [fastest, slowest]); "single" is one release per '
        'call, "MC" one call of '
        '`jit(vmap(release))` over that many keys (data shared) divided by the releases; "x floor" '
        "divides by the `jax.random` floor for the same number of variates, measured in the same run "
        "in the same shape (at most 2^25 variates per floor call); \"x limit\" divides one release by the "
        "larger of that floor and its memory floor (its data read once at the streaming bandwidth "
        "measured in the same run), and names the larger: 1x is as fast as the device allows; "
        "compile time is excluded from every time "
        "and shown apart; memory is XLA's "
        "compiled memory analysis of the Monte Carlo call (of the single call where there is none).",
        _markdown_table(MAIN_COLUMNS, main_rows(record)),
    ]
    peers = peer_rows(record)
    if peers:
        parts.append(
            'Peers, one release per call on the host ("repeated": the peer\'s own faster path for '
            "repeated releases on the same data, used for the Monte Carlo ratio); a ratio above 1 means "
            "dpjax is faster."
        )
        parts.append(_markdown_table(PEER_COLUMNS, peers))
    return "\n\n".join(parts) + "\n"


def write_json(record: dict, path: Path) -> None:
    path.write_text(json.dumps(record, indent=2) + "\n")


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def _with_spread(timing: dict | None) -> tuple[float, float, float]:
    """(median, fastest, slowest) seconds of a timing record (NaN where absent)."""
    if not timing or "seconds" not in timing:
        return math.nan, math.nan, math.nan
    median = timing["seconds"]
    return median, timing.get("min_seconds", median), timing.get("max_seconds", median)


def _fastest_peer(row: dict) -> dict | None:
    timed = [p for p in row.get("peers", []) if "seconds" in p]
    return min(timed, key=lambda p: p["seconds"]) if timed else None


def _device_name(machine: dict) -> str:
    """The accelerator's name, or the host CPU's model on the CPU backend (whose device kind is 'cpu')."""
    if machine["backend"] == "cpu" or machine.get("device") in (None, "cpu"):
        return f"CPU {machine.get('host_cpu') or ''} ({machine.get('cores')} cores)".replace("  ", " ")
    count = machine.get("device_count", 1)
    return f"{machine['device']}" + (f" x{count}" if count and count > 1 else "")


def figure_notes(record: dict) -> list[str]:
    """The figure's subtitle lines: scale, repeats, quick run or not, and the peers not timed."""
    quick = "--quick" in record.get("command", "")
    notes = [f"{'quick run · ' if quick else ''}scale {record['scale']:g} of the headline sizes · median of "
             f"{record['repeats']} repeats, bars from the fastest to the slowest · compile time excluded"]
    skipped = sorted({f"{p['name']} ({p['skipped']})" for r in record["rows"] for p in r.get("peers", [])
                      if "skipped" in p})
    if "--no-peers" in record.get("command", ""):
        notes.append("peers not run (--no-peers)")
    elif skipped:
        notes.append("peers skipped: " + "; ".join(skipped))
    failed = [r["mechanism"] for r in record["rows"] if "error" in r]
    if failed:
        notes.append("failed (not shown): " + ", ".join(failed))
    return notes


def plot(record: dict, path: Path) -> None:
    """Time per release (log scale) of dpjax (single, Monte Carlo), its floors and the fastest peer,
    with bars from the fastest to the slowest repeat; titled with the device, the scale, whether it was
    a quick run, and the peers that were skipped."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in record["rows"] if "error" not in r]
    series = {
        "dpjax single": [_with_spread(r["single"]) for r in rows],
        "RNG floor (single)": [(r["single"]["floor_seconds"],) * 3 for r in rows],
        "memory floor (single)": [(r["single"].get("memory_floor_seconds", math.nan),) * 3 for r in rows],
        "dpjax Monte Carlo": [_with_spread(r.get("monte_carlo")) for r in rows],
        "RNG floor (Monte Carlo)": [(r.get("monte_carlo", {}).get("floor_seconds", math.nan),) * 3
                                    for r in rows],
        "fastest peer": [_with_spread(_fastest_peer(r)) for r in rows],
    }
    height = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(10, 2.6 + 0.55 * len(rows)), layout="constrained")
    for j, (label, values) in enumerate(series.items()):
        median, low, high = np.array(values, float).reshape(-1, 3).T
        spread = np.nan_to_num(np.stack([median - low, high - median]))
        ax.barh([i + j * height for i in range(len(rows))], median, height, label=label,
                xerr=spread if spread.any() else None,
                error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "0.25"})
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))])
    ax.set_yticklabels([f"{r['mechanism']}\n{r['setting'].split(',')[0]}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds per release (log scale)")
    machine = record["machine"]
    ax.set_title(f"dpjax bench on {_device_name(machine)} ({machine['backend']} backend)\n"
                 + "\n".join(textwrap.fill(n, 100) for n in figure_notes(record)), fontsize=8.5)
    fig.legend(loc="outside lower center", ncol=len(series), fontsize=7, frameon=False)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save(record: dict, out: Path) -> None:
    """Writes ``results.json``, ``results.md`` and ``results.png`` of ``record`` to the folder ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(record, out / "results.json")
    (out / "results.md").write_text(markdown(record))
    plot(record, out / "results.png")
    print(f"wrote {out / 'results.json'}, results.md and results.png")


def print_machine() -> None:
    """One line describing the machine and device (for scripts that print their own tables)."""
    print("machine: " + "; ".join(f"{k}={v}" for k, v in machine_info().items()))


def print_table(title: str, rows: list[dict], columns: list[str] | None = None) -> None:
    """Prints dict rows as an aligned text table (floats with 4 significant digits)."""
    if not rows:
        print(f"{title}: (no rows)")
        return
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))

    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    print(f"\n{title}")
    print(_text_table(columns, [[cell(r.get(c)) for c in columns] for r in rows]))


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
    from dpjax.outdir import write_text

    write_text(path, f"{head}{begin}\n{text.strip()}\n{end}{tail}")  # atomic: never a half-written file
