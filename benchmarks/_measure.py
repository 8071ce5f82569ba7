"""Wall time and peak memory of a command, each run in a fresh process.

Used by the benchmark scripts: `measure(cmd)` runs `cmd` under a small
wrapper process whose RUSAGE_CHILDREN gives the command's own peak RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

_WRAPPER = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t
print(json.dumps({"rc": rc, "wall_s": wall,
                  "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measure(cmd: list[str], repeat: int = 1) -> dict:
    """Best wall time over `repeat` runs, and the peak memory of that run."""
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True,
                             check=True)
        result = json.loads(out.stdout)
        if best is None or result["wall_s"] < best["wall_s"]:
            best = result
    return best


def row(label: str, result: dict, peer: dict | None = None) -> str:
    ratio = f"{result['wall_s'] / peer['wall_s']:6.2f}x" if peer else "       "
    return (f"  {label:<44} {result['wall_s']:8.2f} s {result['peak_mib']:8.0f} MiB {ratio}"
            + ("" if result["rc"] == 0 else f"   (exit {result['rc']})"))


def timer():
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def package_descriptor() -> Path:
    """The descriptor of the package a benchmark reads: its first argument (a descriptor or
    a package folder), by default the shipped package's."""
    given = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    return given / "datapackage.json" if given.is_dir() else given
