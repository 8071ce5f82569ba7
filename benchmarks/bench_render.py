"""Benchmark: `deepgreen render` (numbers, tables, figures separately) and the PDF build.

On the full-size package (default: the shipped one, ./datapackage.json).
Prints the in-process time of each part of one render (best of three),
the wall time and peak memory of the whole `deepgreen render` command
beside `deepgreen validate` on the same package (the peer), and the time of
`deepgreen paper --no-data` (latexmk, from scratch) when TeX Live is
installed.  Goal: reading + analysis + numbers + tables under 3 s.

    .venv/bin/python benchmarks/bench_render.py [PKG]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import measure, package_descriptor, row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def main() -> None:
    from deepgreen_audit.package.descriptor import Package
    from deepgreen_audit.render import build_pdf, render

    location = package_descriptor()
    package = Package.open(location)
    print(f"package: {package.descriptor_path}")
    if package.synthetic:
        print(package.notice())
    work = Path(tempfile.mkdtemp(prefix="dg-bench-render-"))
    try:
        best: dict[str, float] = {}
        for _ in range(3):
            report = render(location, work / "generated")
            for part, seconds in report.seconds.items():
                best[part] = min(seconds, best.get(part, seconds))
        print("  render, in process (best of 3):")
        for part in ("read", "analysis", "numbers", "tables", "figures"):
            print(f"    {part:<10} {best[part]:7.2f} s")
        core = best["read"] + best["analysis"] + best["numbers"] + best["tables"]
        print(f"    read + analysis + numbers + tables = {core:.2f} s (goal < 3 s) -> "
              f"{'met' if core < 3 else 'NOT met'}")

        peer = measure([str(BIN / "deepgreen"), "validate", str(location)])
        whole = measure([str(BIN / "deepgreen"), "render", str(location), "--out",
                         str(work / "cli-generated")])
        print(f"  {'command':<44} {'wall':>10} {'peak RSS':>12} {'vs validate':>8}")
        print(row("deepgreen validate (peer)", peer, peer))
        print(row("deepgreen render", whole, peer))

        if shutil.which("latexmk"):
            paper = work / "paper"
            paper.mkdir()
            shutil.copy(ROOT / "paper" / "paper.tex", paper / "paper.tex")
            shutil.copytree(work / "generated", paper / "generated")
            clock = time.perf_counter()
            pdf = build_pdf(paper)
            print(f"  PDF build (latexmk, from scratch): {time.perf_counter() - clock:.2f} s "
                  f"-> {pdf.stat().st_size / 1e6:.2f} MB")
        else:
            print("  PDF build: skipped (latexmk not installed)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
