"""Benchmark: `deepgreen validate` and the full `deepgreen audit` against the read-and-hash floor.

The floor is the least any validator must do: start Python, import pyarrow, read the four
tables and hash them (SHA256), with pyarrow's CSV reader.  Each command runs in a fresh
process, best of five rounds that interleave the commands; the ratios are measured in
this one run, beside `frictionless validate` of the same descriptor.
Goals (issue 12): validate within 1.5x of the floor, the full audit (round-trip proof included) within 3x.

    .venv/bin/python benchmarks/bench_floor.py [PKG]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, package_descriptor, row  # noqa: E402

BIN = Path(sys.executable).parent
GOALS = {"deepgreen validate": 1.5, "deepgreen audit": 3.0}
ROUNDS = 5

_FLOOR = """
import hashlib, sys
from pathlib import Path
import pyarrow as pa, pyarrow.csv
for name in ("runs", "blocks", "samples", "environment"):
    data = (Path(sys.argv[1]) / f"{name}.csv").read_bytes()
    hashlib.sha256(data).hexdigest()
    pyarrow.csv.read_csv(pa.py_buffer(data))
"""


def main() -> None:
    descriptor = package_descriptor()
    from deepgreen_audit.package.descriptor import Package

    tables_dir = Package.open(descriptor).tables_dir
    print(f"package: {descriptor} (tables in {tables_dir})")
    commands = {"read and hash with pyarrow (floor)": [sys.executable, "-c", _FLOOR, str(tables_dir)],
                "deepgreen validate": [str(BIN / "deepgreen"), "validate", str(descriptor)],
                "deepgreen audit": [str(BIN / "deepgreen"), "audit", str(descriptor)],
                "frictionless validate": [str(BIN / "frictionless"), "validate", str(descriptor)]}
    best: dict[str, dict] = {}
    for _ in range(ROUNDS):  # interleaved, so a slow spell of the machine hits every command
        for label, command in commands.items():
            result = measure(command)
            if label not in best or result["wall_s"] < best[label]["wall_s"]:
                best[label] = result
    results = list(best.items())
    floor = results[0][1]
    frictionless = results[-1][1]
    print(f"  {'command':<44} {'wall':>10} {'peak RSS':>12} {'vs floor':>8} {'vs frictionless':>8}")
    for label, result in results:
        print(row(label, result, floor) + f" {result['wall_s'] / frictionless['wall_s']:6.2f}x")
    for label, goal in GOALS.items():
        ratio = dict(results)[label]["wall_s"] / floor["wall_s"]
        print(f"{label} / floor = {ratio:.2f} (goal: within {goal}) -> "
              f"{'met' if ratio <= goal else 'NOT met'}")
    if any(result["rc"] != 0 for _, result in results[:3]):
        sys.exit("a command failed; its figures are not comparable")


if __name__ == "__main__":
    main()
