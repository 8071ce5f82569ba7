"""Benchmark: the full audit against `frictionless validate` alone, on the full-size package.

Prints wall time and peak memory of `deepgreen audit` (integrity, round trip and every
registered check) and of `frictionless validate` on the same descriptor, each in a fresh
process, and their ratio.  Goal: the full audit within 1.5x of frictionless validate.

    .venv/bin/python benchmarks/bench_audit.py [PKG]

PKG defaults to the shipped package (./datapackage.json); a full-size synthetic one is
made with `deepgreen synth --out /tmp/full`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL = 1.5


def main() -> None:
    descriptor = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "datapackage.json"
    if descriptor.is_dir():
        descriptor = descriptor / "datapackage.json"
    from deepgreen_audit.package.descriptor import Package

    package = Package.open(descriptor)
    rows = {name: len(package.text(name).rows) for name in ("runs", "blocks", "samples")}
    print(f"package: {descriptor} ({', '.join(f'{n} {c:,}' for n, c in rows.items())} rows)")
    if package.synthetic:
        print(package.notice())
    frictionless = measure([str(BIN / "frictionless"), "validate", str(descriptor)])
    audit = measure([str(BIN / "deepgreen"), "audit", str(descriptor)], 2)
    validate = measure([str(BIN / "deepgreen"), "validate", str(descriptor)], 2)
    print(f"  {'command':<44} {'wall':>10} {'peak RSS':>12} {'vs frictionless':>8}")
    for label, result in (("frictionless validate (peer)", frictionless),
                          ("deepgreen audit (full: integrity + all checks)", audit),
                          ("deepgreen validate (integrity only)", validate)):
        print(row(label, result, frictionless))
    ratio = audit["wall_s"] / frictionless["wall_s"]
    print(f"deepgreen audit / frictionless validate = {ratio:.2f} (goal: within {GOAL}) -> "
          f"{'met' if ratio <= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
