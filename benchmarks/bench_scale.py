"""Benchmark: `deepgreen validate` and the full `deepgreen audit` at 1x, 10x and 100x the study.

Each scale is one synthetic campaign written N times in sequence (`deepgreen synth --copies N`:
the study's 210 runs, then 2,100, then 21,000), each command beside the read-and-hash floor of
the same package (bench_floor.py's: pyarrow reads and hashes the four tables), and
`frictionless validate` at 1x and 10x, all measured in this one run, each command in a fresh
process (wall time; peak RSS of its processes together: the audit proves the round trip in a
child process beside the checks).  Goals (issue 26): at 100x validate and audit (round trip
included) stay under 3 GiB, and the audit takes at most 12x its time at 10x.

    .venv/bin/python benchmarks/bench_scale.py [--scales 1,10,100] [--rounds 2] [--keep DIR]

The 100x package is 1.5 GB on disk and takes about a minute to write; --keep reuses it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, peak_mib, row  # noqa: E402

BIN = Path(sys.executable).parent
MEMORY_GOAL_MIB = 3 * 1024
GROWTH_GOAL = 12.0
FRICTIONLESS_SCALES = (1, 10)

_FLOOR = """
import hashlib, sys
from pathlib import Path
import pyarrow as pa, pyarrow.csv
for name in ("runs", "blocks", "samples", "environment"):
    data = (Path(sys.argv[1]) / f"{name}.csv").read_bytes()
    hashlib.sha256(data).hexdigest()
    pyarrow.csv.read_csv(pa.py_buffer(data))
"""


def _package(workdir: Path, scale: int) -> Path:
    """The campaign written `scale` times (made once; kept in `workdir`)."""
    out = workdir / f"x{scale}"
    if not (out / "datapackage.json").exists():
        print(f"writing the {scale}x package to {out} ...", flush=True)
        subprocess.run([str(BIN / "deepgreen"), "synth", "--out", str(out), "--copies", str(scale),
                        "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    return out


def _commands(pkg: Path, scale: int) -> dict[str, list[str]]:
    commands = {"floor": [sys.executable, "-c", _FLOOR, str(pkg)],
                "deepgreen validate": [str(BIN / "deepgreen"), "validate", str(pkg)],
                "deepgreen audit": [str(BIN / "deepgreen"), "audit", str(pkg)]}
    if scale in FRICTIONLESS_SCALES:
        commands["frictionless validate"] = [str(BIN / "frictionless"), "validate",
                                             str(pkg / "datapackage.json")]
    return commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,100", help="scales to measure (default 1,10,100)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds per command, interleaved; the best counts (default 2)")
    parser.add_argument("--keep", metavar="DIR", help="write the packages here and keep them")
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, dict]] = {}
    try:
        for scale in scales:
            pkg = _package(workdir, scale)
            size_mb = sum(p.stat().st_size for p in pkg.glob("*.csv")) / 1e6
            commands = _commands(pkg, scale)
            best: dict[str, dict] = {}
            for _ in range(args.rounds):  # interleaved, so a slow spell hits every command
                for label, command in commands.items():
                    result = measure(command, tree=True)
                    if label not in best or result["wall_s"] < best[label]["wall_s"]:
                        best[label] = result
            results[scale] = best
            print(f"\n{scale}x: {pkg} ({size_mb:,.0f} MB of tables)")
            print(f"  {'command':<44} {'wall':>10} {'peak RSS':>12} {'vs floor':>8}")
            for label, result in best.items():
                print(row(label, result, best["floor"]), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    _verdicts(results)


def _verdicts(results: dict[int, dict[str, dict]]) -> None:
    failed = [f"{label} at {scale}x exited {r['rc']}" for scale, best in results.items()
              for label, r in best.items() if r["rc"] != 0 and label != "frictionless validate"]
    if 100 in results:
        for label in ("deepgreen validate", "deepgreen audit"):
            peak = peak_mib(results[100][label])
            print(f"{label} at 100x: peak RSS {peak:,.0f} MiB (goal: under {MEMORY_GOAL_MIB:,}) -> "
                  f"{'met' if peak < MEMORY_GOAL_MIB else 'NOT met'}")
    if 10 in results and 100 in results:
        growth = results[100]["deepgreen audit"]["wall_s"] / results[10]["deepgreen audit"]["wall_s"]
        print(f"audit time 100x / 10x = {growth:.2f} (goal: at most {GROWTH_GOAL:.0f}) -> "
              f"{'met' if growth <= GROWTH_GOAL else 'NOT met'}")
    if failed:
        sys.exit("a command failed; its figures are not comparable: " + "; ".join(failed))


if __name__ == "__main__":
    main()
