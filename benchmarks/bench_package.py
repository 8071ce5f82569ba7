"""Benchmark: validate, flatten and restore on the full-size package, beside peers.

Prints wall time and peak memory of `deepgreen validate`, `deepgreen restore`
and `deepgreen flatten` on the shipped full-size package, and of
`frictionless validate` and `sha256sum -c` on the same files, with ratios
against `frictionless validate`.  Goal: `deepgreen validate`, which checks
at least what frictionless checks, in well under half its time.

    .venv/bin/python benchmarks/bench_package.py [PKG]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, package_descriptor, row  # noqa: E402

BIN = Path(sys.executable).parent


def main() -> None:
    descriptor = package_descriptor()
    from deepgreen_audit.package.descriptor import Package

    package = Package.open(descriptor)
    tables_dir = package.tables_dir
    size = sum((tables_dir / f"{t}.csv").stat().st_size for t in ("runs", "blocks", "samples", "environment"))
    print(f"package: {descriptor} ({size / 1e6:.1f} MB in four tables)")
    if package.synthetic:
        print(package.notice())
    work = Path(tempfile.mkdtemp(prefix="dg-bench-"))
    try:
        frictionless = measure([str(BIN / "frictionless"), "validate", str(descriptor)])
        results = [
            ("frictionless validate (peer)", frictionless),
            ("sha256sum -c SHA256SUMS", measure(["sh", "-c", f"cd {tables_dir} && sha256sum -c SHA256SUMS"], 3)),
            ("deepgreen validate", measure([str(BIN / "deepgreen"), "validate", str(descriptor)], 2)),
            ("deepgreen restore", measure([str(BIN / "deepgreen"), "restore", str(descriptor),
                                           "--out", str(work / "runs"), "--overwrite"])),
            ("deepgreen flatten", measure([str(BIN / "deepgreen"), "flatten", str(work / "runs"),
                                           "--out", str(work / "pkg"), "--overwrite"])),
        ]
        print(f"  {'command':<44} {'wall':>10} {'peak RSS':>12} {'vs frictionless':>8}")
        for label, result in results:
            print(row(label, result, frictionless))
        if any(result["rc"] != 0 for _, result in results):
            sys.exit("a command failed; its figures are not comparable")
        validate = results[2][1]["wall_s"] / frictionless["wall_s"]
        print(f"deepgreen validate / frictionless validate = {validate:.2f} "
              f"(goal: well under 0.5) -> {'met' if validate < 0.5 else 'NOT met'}")
        same = all((work / "pkg" / f"{t}.csv").read_bytes() == (tables_dir / f"{t}.csv").read_bytes()
                   for t in ("runs", "blocks", "samples", "environment"))
        print(f"round trip restore -> flatten byte-identical: {same}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
