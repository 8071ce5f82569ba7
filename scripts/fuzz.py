"""Fuzz the readers for a while (issues 16, 27): tables, descriptor, run trees, protocol, importers.

    nice -n 10 .venv/bin/python scripts/fuzz.py --minutes 12

Splits the time evenly over the readers of tests/fuzz_readers.py and
runs Hypothesis on each in rounds of random examples until its share is
spent.  Prints, per reader, the inputs tried and the minutes, and every
traceback found (with Hypothesis's shrunk falsifying example); exits 1 if
there was any.  CI runs the same targets briefly (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

# The checkout's own code, not whichever copy the environment has installed, and its tests.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from fuzz_readers import TARGETS, TRIED  # noqa: E402

ROUND_EXAMPLES = 200


def fuzz_reader(name: str, seconds: float) -> list[str]:
    """Rounds of Hypothesis examples on one reader for `seconds`; returns the tracebacks."""
    found = []

    @settings(max_examples=ROUND_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        TARGETS[name](data.draw)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            fuzz()
        except Exception:  # a traceback is what we hunt: keep it, go on hunting
            found.append(traceback.format_exc())
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="total time (default 12)")
    parser.add_argument("--reader", choices=list(TARGETS), action="append",
                        help="only this reader (repeatable; default: all)")
    args = parser.parse_args()
    readers = args.reader or list(TARGETS)
    share = args.minutes * 60 / len(readers)
    failures = {}
    started = time.monotonic()
    for name in readers:
        t0 = time.monotonic()
        failures[name] = fuzz_reader(name, share)
        print(f"{name:<16} {TRIED[name]:>8,} inputs  {(time.monotonic() - t0) / 60:5.1f} min  "
              f"{len(failures[name])} traceback(s)", flush=True)
    total = sum(TRIED[n] for n in readers)
    count = sum(len(f) for f in failures.values())
    print(f"{'all':<16} {total:>8,} inputs  {(time.monotonic() - started) / 60:5.1f} min  "
          f"{count} traceback(s)")
    for name, found in failures.items():
        for text in found:
            print(f"\n--- {name} ---\n{text}")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
