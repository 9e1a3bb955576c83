"""What an accelerator run ran on: the device, its driver and the package versions, as JSON.

``python -m dpjax._src.tools.bench.environment PATH`` writes it (``benchmarks/accelerator_run.sh``, step 1)
and prints one line per entry.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax

from dpjax._src.tools.bench.harness import load_average, machine_info

__all__ = [
    "PACKAGES",
    "describe",
    "main",
]

PACKAGES = ("dpjax", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "libtpu", "numpy", "optax")


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _nvidia_smi() -> str | None:
    """The GPUs' name, driver and memory as ``nvidia-smi`` reports them (``None`` without it)."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    try:
        return subprocess.run(query, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def describe() -> dict:
    """The machine (:func:`~dpjax._src.tools.bench.harness.machine_info`), every device, the versions,
    ``nvidia-smi``'s line and the load average."""
    return {
        "machine": machine_info(),
        "devices": [str(device) for device in jax.devices()],
        "versions": _versions(),
        "nvidia_smi": _nvidia_smi(),
        "load_average": load_average(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m dpjax._src.tools.bench.environment PATH", file=sys.stderr)
        return 2
    info = describe()
    Path(argv[0]).write_text(json.dumps(info, indent=2) + "\n")
    for key, value in info.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
