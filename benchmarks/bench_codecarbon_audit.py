"""The CodeCarbon-log audit against its import, side by side in the same run (these machines are
noisy: the ratio is the figure): a folder of about a thousand real logs (the shared logs of
../shared/codecarbon-logs, each copied N times under new names), and one long log of 100,000
rows (a shared 3.x log's rows repeated with new run ids) audited with --html.

    .venv/bin/python benchmarks/bench_codecarbon_audit.py [COPIES]

Targets (issue 37): the audit of ~1,000 logs within 3x their import; the long log's audit
with its page within 10x its import, under 500 MiB, its page under 10 MiB.
"""

from __future__ import annotations

import csv
import io
import shutil
import sys
import tempfile
from pathlib import Path

from _measure import measure, peak_mib, row

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "codecarbon-logs"
#: A 3.x log of the shared set (machine mode, several runs) whose rows the long log repeats.
LONG_SOURCE = "043.csv"
LONG_ROWS = 100_000
DEEPGREEN = [sys.executable, "-m", "deepgreen_audit"]


def many_logs(folder: Path, copies: int) -> int:
    folder.mkdir(parents=True)
    for k in range(copies):
        for log in sorted(SHARED.glob("*.csv")):
            shutil.copyfile(log, folder / f"{log.stem}_{k}.csv")
    return len(list(folder.iterdir()))


def long_log(path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO((SHARED / LONG_SOURCE).read_text(encoding="utf-8"))))
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        for n in range(LONG_ROWS):
            source = rows[n % len(rows)]
            writer.writerow({**source, "run_id": f"{n:08d}-0000-4000-8000-000000000000"})


def side_by_side(label: str, logs: Path, work: Path, html: bool) -> None:
    pkg = work / f"{label}-pkg"
    imported = measure([*DEEPGREEN, "import", "codecarbon", str(logs), "--out", str(pkg)])
    page = work / f"{label}.html"
    audited = measure([*DEEPGREEN, "audit", str(pkg), *(["--html", str(page)] if html else [])],
                      tree=True)
    print(row(f"{label}: import", imported))
    print(row(f"{label}: audit{' --html' if html else ''}", audited, imported))
    if html and page.exists():
        print(f"  {label}: page {page.stat().st_size / 2**20:.1f} MiB, audit peak "
              f"{peak_mib(audited):.0f} MiB")


def main() -> None:
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 38
    if not SHARED.is_dir():
        sys.exit(f"{SHARED} is not there: the benchmark reads the shared CodeCarbon logs")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        count = many_logs(work / "logs", copies)
        print(f"{count} logs ({copies} copies of the {len(list(SHARED.glob('*.csv')))} shared ones)")
        side_by_side("many logs", work / "logs", work, html=False)
        long_log(work / "long.csv")
        print(f"one log of {LONG_ROWS:,} rows ({LONG_SOURCE}'s rows repeated)")
        side_by_side("long log", work / "long.csv", work, html=True)


if __name__ == "__main__":
    main()
