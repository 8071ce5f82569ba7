"""Wall time and peak memory of a command, each run in a fresh process.

Used by the benchmark scripts: `measure(cmd)` runs `cmd` under a small
wrapper process whose RUSAGE_CHILDREN gives the peak RSS of the command's largest process
(`peak_mib`), and which with `tree` samples the RSS of the command and its child processes
together every 50 ms (`tree_peak_mib`: pages they share counted twice, so an upper bound).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

_WRAPPER = r"""
import json, resource, subprocess, sys, threading, time
tree, command = sys.argv[1] == "tree", sys.argv[2:]
if tree:
    import psutil
t = time.perf_counter()
proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
tree_peak = 0
def sample():  # the command and its children together (the audit's round trip runs beside it)
    global tree_peak
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            processes = [root, *root.children(recursive=True)]
            tree_peak = max(tree_peak, sum(p.memory_info().rss for p in processes))
        except psutil.Error:
            pass
        time.sleep(0.05)
sampler = threading.Thread(target=sample, daemon=True)
if tree:
    sampler.start()
rc = proc.wait()
wall = time.perf_counter() - t
if tree:
    sampler.join()
print(json.dumps({"rc": rc, "wall_s": wall,
                  "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "tree_peak_mib": tree_peak / 2 ** 20}))
"""


def measure(cmd: list[str], repeat: int = 1, tree: bool = False) -> dict:
    """Best wall time over `repeat` runs, and the peak memory of that run: of its largest
    process, and with `tree` also of all its processes together, sampled every 50 ms (which
    costs the machine a little CPU beside a short command, so only where memory is the point)."""
    best = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _WRAPPER, "tree" if tree else "-", *cmd],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout)
        if best is None or result["wall_s"] < best["wall_s"]:
            best = result
    return best


def peak_mib(result: dict) -> float:
    """The command's peak memory: its processes' together where it ran more than one."""
    return max(result["peak_mib"], result.get("tree_peak_mib", 0.0))


def row(label: str, result: dict, peer: dict | None = None) -> str:
    ratio = f"{result['wall_s'] / peer['wall_s']:6.2f}x" if peer else "       "
    return (f"  {label:<44} {result['wall_s']:8.2f} s {peak_mib(result):8.0f} MiB {ratio}"
            + ("" if result["rc"] == 0 else f"   (exit {result['rc']})"))


def timer():
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def package_descriptor() -> Path:
    """The descriptor of the package a benchmark reads: its first argument (a descriptor or
    a package folder), by default the shipped package's."""
    given = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    return given / "datapackage.json" if given.is_dir() else given
