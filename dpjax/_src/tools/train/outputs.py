"""The files of ``dpjax train --out`` (:mod:`dpjax._src.tools.train.run`): the per-epoch metrics as CSV and
JSON, and their figure."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dpjax._src.atomic import atomic_path
from dpjax._src.studies.progress import heartbeat

__all__ = ["COLUMNS", "OUT_FILES", "plot", "write_outputs"]
OUT_FILES = ("metrics.csv", "metrics.json", "metrics.png")
COLUMNS = ("epoch", "step", "train_accuracy", "test_accuracy", "clip_norm", "epsilon_spent", "seconds")


def write_outputs(out: Path, rows, args: dict, summary: dict, *, shown=None) -> None:
    """``metrics.csv`` (one row per epoch, epoch 0 before training: ``COLUMNS``), ``metrics.json``
    (the arguments, the run's plan and noise, and the same rows) and ``metrics.png`` (test accuracy,
    clip norm and epsilon spent per epoch) in ``out`` (named ``shown`` on the screen), each written to
    a temporary file and renamed."""
    import csv

    print(f"  writing {shown or out}/metrics.csv, metrics.json, metrics.png ...", flush=True)

    def write_csv(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    record = dict(arguments={k: v for k, v in args.items() if k != "run"}, run=summary, epochs=rows)
    for name, write in (("metrics.csv", write_csv),
                        ("metrics.json", lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n")),
                        ("metrics.png", lambda tmp: plot(rows, summary, tmp))):
        with atomic_path(out / name) as tmp, heartbeat(f"writing {name}", stream=sys.stdout):
            write(tmp)


def plot(rows, summary: dict, path) -> None:
    """Three panels against the epoch (0: before training): test (and train) accuracy, the clip norm
    the next step uses, epsilon spent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    axes[0].plot(epochs, [r["test_accuracy"] for r in rows], "o-", label="test")
    axes[0].plot(epochs, [r["train_accuracy"] for r in rows], "s--", label="train")
    axes[0].set(ylabel="accuracy", title="accuracy")
    axes[0].legend()
    axes[1].plot(epochs, [r["clip_norm"] for r in rows], "o-")
    axes[1].set(ylabel="clip norm", yscale="log", title="clip norm (after the epoch)")
    axes[2].plot(epochs, [r["epsilon_spent"] for r in rows], "o-")
    axes[2].set(ylabel="epsilon", title=f"epsilon spent (delta {summary['delta_accounted']:.3g})")
    for ax in axes:
        ax.set_xlabel("epoch")
    fig.suptitle(f"dpjax train: {summary['dataset']}, noise multiplier {summary['noise_multiplier']:.3f}")
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
