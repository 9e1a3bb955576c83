"""The run record saved with every study's results: what ran, where, when, and how long."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from importlib import metadata

__all__ = [
    "run_record",
]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_record(*, seed: int, trials: int, replicates: int, confidence: float, chunk_size: int | None,
               grid: dict, datasets: list, started: float, wall_seconds: float, steps: list[dict]) -> dict:
    """The record of one study run.

    ``steps`` holds, per mechanism and dataset, how the grid ran (one compiled call over the grid,
    or one compile per grid point when the mechanism refuses traced parameters), the number of XLA
    compilations and their seconds, and the step's wall time. ``load`` is the host's load average
    (1, 5 and 15 minutes) when the run ended, beside its core count: a study's times are only
    comparable between quiet runs (a load above one per core means it shared the cores).
    """
    import jax

    import dpjax

    return {
        "seed": seed,
        "trials": trials,
        "replicates": replicates,
        "confidence": confidence,
        "chunk_size": chunk_size,
        "grid": {name: list(values) for name, values in grid.items()},
        "datasets": list(datasets),
        "date": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(wall_seconds, 3),
        "compiles": sum(s["compiles"] for s in steps),
        "cache_hits": sum(s.get("cache_hits", 0) for s in steps),
        # jax's Config stub declares none of the options (they are added at run time):
        "compile_cache": jax.config.jax_compilation_cache_dir,  # type: ignore[attr-defined]
        "steps": steps,
        "versions": {
            "dpjax": dpjax.__version__,
            "jax": jax.__version__,
            "jaxlib": _version("jaxlib"),
            "numpy": _version("numpy"),
            "pandas": _version("pandas"),
            "python": sys.version.split()[0],
        },
        "backend": jax.default_backend(),
        "devices": sorted({d.device_kind for d in jax.devices()}),
        "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]  # as "compile_cache"
        "platform": platform.platform(),
        "load": {"average": [round(v, 2) for v in os.getloadavg()], "cores": os.cpu_count()},
    }
