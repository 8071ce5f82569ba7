"""Fuzz the readers and writers for a while (issues 16, 27, 38): tables, descriptor, run trees,
protocol, importers, and hostile text through every output.

    nice -n 10 .venv/bin/python scripts/fuzz.py --minutes 12

Splits the time evenly over the targets of tests/fuzz_readers.py and
tests/fuzz_outputs.py and runs Hypothesis on each in rounds of random examples
until its share is spent.  An input that runs longer than `HANG_S` is a hang: an
alarm stops it and it counts as found.  Prints, per target, the inputs tried,
the minutes, the tracebacks (a failed output check among them) and the hangs;
per writer, the outputs checked; then every one found (with Hypothesis's shrunk
falsifying example); exits 1 if there was any.  CI runs the same targets
briefly (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback
from pathlib import Path

# The checkout's own code, not whichever copy the environment has installed, and its tests.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from fuzz_outputs import TARGETS, WRITTEN  # noqa: E402
from fuzz_readers import TRIED  # noqa: E402

ROUND_EXAMPLES = 200
#: The first round's examples, which measure the target's speed.
FIRST_ROUND_EXAMPLES = 10
#: Seconds one input may take before it counts as a hang (the slowest, an audit, takes ~2 s).
HANG_S = 60


class Hang(BaseException):
    """An input ran past HANG_S: a reader blocked (a FIFO opened) or never ended (a device).
    Not an Exception, so that no `except Exception` in the code under test swallows it."""


def _alarm(signum, frame):
    raise Hang(f"one input ran longer than {HANG_S} s")


def fuzz_reader(name: str, seconds: float) -> list[str]:
    """Rounds of Hypothesis examples on one reader for `seconds`; returns the tracebacks.  A
    round holds as many examples as the time left allows at the speed seen so far (at most
    ROUND_EXAMPLES), so a slow target (an audit an example) ends near its share too."""
    found = []
    deadline = time.monotonic() + seconds
    examples = FIRST_ROUND_EXAMPLES
    while time.monotonic() < deadline:
        tried, started = TRIED[name], time.monotonic()
        try:
            _round(name, examples)()
        except (Exception, Hang):  # a traceback or a hang is what we hunt: keep it, go on
            found.append(traceback.format_exc())
        each_s = (time.monotonic() - started) / max(1, TRIED[name] - tried)
        examples = max(1, min(ROUND_EXAMPLES, int((deadline - time.monotonic()) / each_s)))
    return found


def _round(name: str, examples: int):
    """One round of `examples` Hypothesis examples on the target `name`, each under the alarm."""
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def fuzz(data):
        signal.alarm(HANG_S)
        try:
            TARGETS[name](data.draw)
        finally:
            signal.alarm(0)

    return fuzz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="total time (default 12)")
    parser.add_argument("--reader", choices=list(TARGETS), action="append",
                        help="only this reader (repeatable; default: all)")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    readers = args.reader or list(TARGETS)
    share = args.minutes * 60 / len(readers)
    failures = {}
    started = time.monotonic()
    for name in readers:
        t0 = time.monotonic()
        failures[name] = fuzz_reader(name, share)
        hangs = sum("Hang:" in text for text in failures[name])
        print(f"{name:<20} {TRIED[name]:>8,} inputs  {(time.monotonic() - t0) / 60:5.1f} min  "
              f"{len(failures[name]) - hangs} traceback(s)  {hangs} hang(s)", flush=True)
    total = sum(TRIED[n] for n in readers)
    count = sum(len(f) for f in failures.values())
    hangs = sum("Hang:" in text for found in failures.values() for text in found)
    print(f"{'all':<20} {total:>8,} inputs  {(time.monotonic() - started) / 60:5.1f} min  "
          f"{count - hangs} traceback(s)  {hangs} hang(s)")
    for writer, checked in WRITTEN.items():
        print(f"writer {writer:<13} {checked:>8,} outputs checked", flush=True)
    for name, found in failures.items():
        for text in found:
            print(f"\n--- {name} ---\n{text}")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
