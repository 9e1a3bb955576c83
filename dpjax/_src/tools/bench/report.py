"""Reports of a ``dpjax bench`` record: terminal table, JSON, Markdown, plot, README region.

The Markdown is what ``benchmarks/README.md`` shows between the ``<!-- dpjax-bench:begin -->`` and
``<!-- dpjax-bench:end -->`` markers (or ``<!-- dpjax-bench:begin NAME -->`` ... for a named region;
:func:`dpjax._src.tools.readme.update_readme`), so every headline timing there comes from a JSON record of
this harness together with the command that produced it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from dpjax._src.tools.bench.harness import machine_info

__all__ = [
    "BOUND_COLUMNS",
    "COMPACT_COLUMNS",
    "COMPACT_PEER_COLUMNS",
    "DEFAULT_COLUMNS",
    "EXPLAINED",
    "MAIN_COLUMNS",
    "PEER_COLUMNS",
    "bandwidth",
    "bound_rows",
    "compact_rows",
    "count",
    "describe_limits",
    "describe_load",
    "describe_machine",
    "label",
    "main_rows",
    "markdown",
    "peer_rows",
    "plot",
    "print_machine",
    "print_table",
    "ratio",
    "read_json",
    "save",
    "say",
    "screen_width",
    "seconds",
    "size",
    "terminal",
    "write_json",
]

MAIN_COLUMNS = (
    "mechanism",
    "method (single, MC)",
    "setting",
    "single / release [min, max]",
    "single x limit",
    "MC releases (why)",
    "MC / release [min, max]",
    "MC x limit",
    "MC releases/s",
    "x jax.random (single, MC)",
    "compile s (single, MC)",
    "memory (MC call)",
)
COMPACT_COLUMNS = ("mechanism", "single", "x limit", "MC n", "MC / rel.", "x limit")
BOUND_COLUMNS = ("mechanism", "single: bytes, bits (binds)", "MC per release: bytes, bits (binds)")
PEER_COLUMNS = ("mechanism", "peer", "input", "peer / release", "peer / dpjax single", "peer / dpjax MC")
COMPACT_PEER_COLUMNS = ("mechanism", "peer", "peer / release", "/ single", "/ MC")
DEFAULT_COLUMNS = 100


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


def _limit(part: dict | None) -> str:
    """``x limit``: the time over the part's lower bound, and which of its parts binds."""
    if not part or part.get("limit_ratio") is None:
        return ""
    return f"{ratio(part['limit_ratio'])} ({part['bound']['binds']})"


def label(row: dict) -> str:
    """The row's name: the mechanism, and the model of a training row."""
    return row["mechanism"] + (f" ({row['model']})" if row.get("model") else "")


def bandwidth(value: float | None) -> str:
    """Bytes per second in GB/s (10^9 bytes)."""
    return "" if not value else f"{value / 1e9:.3g} GB/s"


def main_rows(record: dict) -> list[list[str]]:
    """The full table's rows (results.md, the README)."""
    rows = []
    for row in record["rows"]:
        if "error" in row:
            rows.append([label(row), "", row.get("setting", ""), f"error: {row['error']}"]
                        + [""] * (len(MAIN_COLUMNS) - 4))
            continue
        single, mc = row["single"], row.get("monte_carlo")
        compile_times = [single.get("compile_seconds")] + ([mc.get("compile_seconds")] if mc else [])
        floors = [ratio(single.get("floor_ratio"))] + ([ratio(mc.get("floor_ratio"))] if mc else [])
        rows.append(
            [
                label(row),
                ", ".join(m for m in (single.get("method"), (mc or {}).get("method")) if m),
                row["setting"],
                _spread(single) + (" (eager)" if single.get("path") == "eager call" else ""),
                _limit(single),
                f"{mc['releases']} ({mc.get('batch_reason', '')})" if mc else "",
                _spread(mc) if mc else "",
                _limit(mc),
                count(mc.get("releases_per_second")) if mc else "",
                ", ".join(floors),
                ", ".join(f"{t:.2f}" for t in compile_times if t is not None),
                size((mc or single).get("memory_bytes")),
            ]
        )
    return rows


def compact_rows(record: dict) -> list[list[str]]:
    """The terminal's rows: name, single time and limit ratio, Monte Carlo batch, time and ratio."""
    rows = []
    for row in record["rows"]:
        if "error" in row:
            rows.append([label(row), "error", "", "", "", ""])
            continue
        single, mc = row["single"], row.get("monte_carlo")
        rows.append([label(row), seconds(single["seconds"]), _limit(single),
                     str(mc["releases"]) if mc else "", seconds(mc["seconds"]) if mc else "", _limit(mc)])
    return rows


def bound_rows(record: dict) -> list[list[str]]:
    """What each row's limit counts: bytes moved and random bits drawn per release, and which binds."""
    def cell(part):
        b = (part or {}).get("bound")
        if not b:
            return ""
        loops = f", {b['uncounted_loops']} loops not counted" if b.get("uncounted_loops") else ""
        return f"{size(round(b['bytes']))}, {count(b['random_bits'])} bits ({b['binds']}{loops})"

    return [[label(r), cell(r.get("single")), cell(r.get("monte_carlo"))] for r in record["rows"]
            if "error" not in r]


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


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "~"


def _text_table(columns, rows, width: int | None = None) -> str:
    """An aligned text table; with ``width``, the widest columns are narrowed (cells cut with ``~``)
    until every line fits in ``width`` characters."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    while width is not None and sum(widths) + 2 * (len(widths) - 1) > width and max(widths) > 4:
        widths[widths.index(max(widths))] -= 1
    lines = ["  ".join(_fit(c, w).ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(_fit(v, w).ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def screen_width() -> int:
    """The terminal's width: ``$COLUMNS``, default 100."""
    import os

    try:
        return max(40, int(os.environ.get("COLUMNS", DEFAULT_COLUMNS)))
    except ValueError:
        return DEFAULT_COLUMNS


def _markdown_table(columns, rows) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(v.replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(lines)


def describe_limits(record: dict) -> str:
    """The device's measured rates: streaming bandwidth (largest and smallest working set), RNG."""
    limits = record.get("limits")
    if not limits:
        return ""
    ladder = {int(k): v for k, v in limits["stream_bandwidth_by_bytes"].items()}
    big, small = max(ladder), min(ladder)
    return (f"streaming bandwidth {bandwidth(ladder[big])} at {size(big)}, {bandwidth(ladder[small])} at "
            f"{size(small)}; RNG {limits['random_bits_per_second'] / 1e9:.3g} Gbit/s (threefry)")


def describe_load(record: dict) -> str:
    """The 1-minute load average before, during (the highest) and after the run, and whether quiet."""
    during = [load[0] for load in record.get("load_average_during", []) if load]
    start, end = record.get("load_average_start"), record.get("load_average_end")
    quiet = record.get("quiet")
    verdict = {True: "quiet", False: "LOUD: above one per core", None: "load unknown"}[quiet]
    return (f"load average {start[0] if start else '?'} before, {max(during) if during else '?'} at most "
            f"during, {end[0] if end else '?'} after ({verdict})")


def describe_machine(record: dict) -> str:
    m = record["machine"]
    memory = size(m.get("device_memory_bytes"))
    limits = describe_limits(record)
    return (
        f"{m['backend']} backend, device {m['device']} (x{m['device_count']}, {memory}); "
        f"host {m['host_cpu']}, {m['cores']} cores; Python {m['python']}, jax {m['jax']}, "
        f"x64 {'on' if m['x64'] else 'off'}; " + (f"{limits}; " if limits else "") + describe_load(record)
    )


def say(text: str, file=None) -> None:
    """Prints ``text`` wrapped to the screen's width (continuation lines indented)."""
    import sys
    import textwrap

    lines = [textwrap.fill(line, screen_width(), subsequent_indent="    ", break_on_hyphens=False)
             for line in text.splitlines() or [""]]
    print("\n".join(lines), file=file or sys.stdout, flush=True)


def terminal(record: dict, width: int | None = None) -> str:
    """The screen's compact view, every line within ``width`` (default :func:`screen_width`); the
    full tables are in results.md / the JSON."""
    import textwrap

    width = width or screen_width()
    parts = [
        textwrap.fill(f"dpjax bench on {describe_machine(record)}", width),
        _text_table(COMPACT_COLUMNS, compact_rows(record), width),
    ]
    peers = [[r[0], r[1], r[3], r[4], r[5]] for r in peer_rows(record)]
    if peers:
        parts.append(_text_table(COMPACT_PEER_COLUMNS, peers, width))
    failures = record.get("self_check")
    if failures:
        parts.append(textwrap.fill("self-check failed (a row beat its limit): " + "; ".join(failures), width))
    return "\n\n".join(parts)


EXPLAINED = (
    'Times are per release (median of the repeats [fastest, slowest]); "single" is one release per call, '
    '"MC" one call of `jit(vmap(release))` over that many keys (data shared) divided by the releases, '
    "with the kernel each ran (what `method=\"auto\"` chose). \"x limit\" divides by a lower bound on "
    "the time: the larger of the bytes the call must move (its data read once, the keys, the outputs) "
    "over the device's streaming bandwidth for that working set, and the random bits its sampler draws "
    "(threefry hashes counted in its jaxpr, so an O(log n) sampler is bounded by its O(log n) draws) "
    "over the device's RNG throughput, both measured in the same run (best of the repeats); it names "
    "the part that binds, and 1x is as fast as the device allows (a row below 0.9x fails the run's "
    "self-check). \"x jax.random\" divides by `jax.random` drawing the counted variates (a reference, "
    "not a bound). Compile time is excluded from every time and shown apart; memory is XLA's compiled "
    "memory analysis of the Monte Carlo call (of the single call where there is none)."
)


def markdown(record: dict) -> str:
    """The Markdown report: command, machine and load, the main table, the bounds, the peers."""
    loud = {False: "the load average exceeded one per core", None: "its load was not recorded"}
    parts = [
        *([f"**Loud run**: {loud[record.get('quiet')]}; its times are not a quiet machine's."]
          if record.get("quiet") is not True else []),
        f"Command: `{record['command']}` ({record['date']}, {record['wall_seconds']:.0f} s in total, "
        f"scale {record['scale']:g}, median of {record['repeats']} repeats).",
        f"Machine: {describe_machine(record)}.",
        EXPLAINED,
        _markdown_table(MAIN_COLUMNS, main_rows(record)),
    ]
    bounds = bound_rows(record)
    if any(cell for row in bounds for cell in row[1:]):
        parts.append("What each limit counts, per release (the JSON explains each row's bound in one line):")
        parts.append(_markdown_table(BOUND_COLUMNS, bounds))
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


def _plot_label(row: dict) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(label(row), 44))


def plot(record: dict, path: Path) -> None:
    """Two panels per row: seconds per release (log scale; dpjax single, Monte Carlo, the fastest
    peer, bars from the fastest to the slowest repeat) and the limit ratio (time / lower bound, log
    scale, a line at 1) of the single release and the Monte Carlo batch; titled with the device."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in record["rows"] if "error" not in r]
    times = {
        "single release": [_with_spread(r["single"]) for r in rows],
        "Monte Carlo (per release)": [_with_spread(r.get("monte_carlo")) for r in rows],
        "fastest peer": [_with_spread(_fastest_peer(r)) for r in rows],
    }
    ratios = {
        name: [(r.get(part) or {}).get("limit_ratio") or math.nan for r in rows]
        for name, part in (("single release", "single"), ("Monte Carlo (per release)", "monte_carlo"))
    }
    height = 0.8 / len(times)
    fig, (left, right) = plt.subplots(1, 2, sharey=True, figsize=(13, 2.2 + 0.5 * len(rows)),
                                      layout="constrained")
    for j, (name, values) in enumerate(times.items()):
        median, low, high = np.array(values, float).reshape(-1, 3).T
        spread = np.nan_to_num(np.stack([median - low, high - median]))
        left.barh([i + j * height for i in range(len(rows))], median, height, label=name,
                  xerr=spread if spread.any() else None,
                  error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "0.25"})
    for j, (name, factors) in enumerate(ratios.items()):
        right.barh([i + j * height for i in range(len(rows))], factors, height, label=name)
    right.axvline(1.0, color="0.2", linewidth=1)
    left.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))])
    left.set_yticklabels([_plot_label(r) for r in rows], fontsize=7)
    left.invert_yaxis()
    for ax in (left, right):
        ax.set_xscale("log")
    left.set_xlabel("seconds per release (log scale)")
    right.set_xlabel("time / limit (log scale; 1 = as fast as the device allows)")
    left.legend(fontsize=7, loc="lower right")
    right.legend(fontsize=7, loc="lower right")
    quick = " (--quick)" if "--quick" in record.get("command", "") else ""
    fig.suptitle(f"dpjax bench on {_device_name(record['machine'])}{quick}", fontsize=10)
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
