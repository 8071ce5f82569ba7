"""The audit's HTML page and JUnit file: render time and size, for the shipped package and the
legacy campaign (imported from ../shared/legacy-campaign when it is there), beside the audit
itself in the same run.

    .venv/bin/python benchmarks/bench_audit_html.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from deepgreen_audit.audit.driver import audit_with_context
from deepgreen_audit.page.html import render_junit, render_page

ROOT = Path(__file__).resolve().parents[1]
LEGACY = ROOT.parent / "shared" / "legacy-campaign"


def measure(name: str, location) -> None:
    clock = time.perf_counter()
    report, ctx = audit_with_context(location)
    audited = time.perf_counter() - clock
    clock = time.perf_counter()
    page = render_page(report, ctx)
    rendered = time.perf_counter() - clock
    junit = render_junit(report)
    print(f"{name:<8} audit {audited:6.2f} s | HTML {rendered:5.2f} s, {len(page.encode()) / 2**20:5.2f} MiB "
          f"({rendered / audited:.2f}x the audit) | JUnit {len(junit.encode()) / 2**10:5.1f} KiB | "
          f"{report.counts}")


def main() -> None:
    measure("shipped", ROOT / "datapackage.json")
    if not LEGACY.is_dir():
        print(f"legacy   skipped: {LEGACY} is not there")
        return
    from deepgreen_audit.importers.legacy import import_source

    with tempfile.TemporaryDirectory() as tmp:
        descriptor, _ = import_source(LEGACY, Path(tmp) / "legacy")
        measure("legacy", descriptor)


if __name__ == "__main__":
    main()
