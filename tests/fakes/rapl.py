"""A fake powercap tree whose RAPL package counter advances like a real one, for collections on
a host without RAPL (tests, rehearsals).

`deepgreen collect` reads the tree that DEEPGREEN_POWERCAP_ROOT names (docs/collection.md); point
it here and every process of the collection (driver, runners, preflight) reads this counter
instead of /sys/class/powercap.  A file does not grow by itself, so a thread of the process that
made the tree rewrites `energy_uj` from wall time, POWER_W watts, wrapping to zero past
`max_energy_range_uj` as the hardware does::

    with advancing_powercap(tmp / "powercap") as root:
        env["DEEPGREEN_POWERCAP_ROOT"] = str(root)
        ...  # collect

From a shell, `python tests/fakes/rapl.py ROOT` builds the tree and advances it until
interrupted.  The package such a collection makes is marked synthetic (its CPU energies are
this counter's, not the host's).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: What the fake package draws.
POWER_W = 25.0
#: The wrap point of a real package counter (262 kJ).
MAX_ENERGY_RANGE_UJ = 262_143_328_850
#: The counter starts this many seconds of drawing before its wrap: a collection sees one.
SECONDS_BEFORE_WRAP = 3.0
#: How often the thread rewrites the counter (real RAPL updates about every millisecond).
UPDATE_S = 0.01


class AdvancingPackage:
    """One package zone (`intel-rapl:0`, named package-0) whose energy_uj follows wall time."""

    def __init__(self, root: Path, power_w: float = POWER_W,
                 max_energy_range_uj: int = MAX_ENERGY_RANGE_UJ,
                 seconds_before_wrap: float = SECONDS_BEFORE_WRAP):
        self.zone = Path(root) / "intel-rapl:0"
        self.power_w, self.max_energy_range_uj = power_w, max_energy_range_uj
        self.start_uj = max(0, max_energy_range_uj - int(seconds_before_wrap * power_w * 1e6))
        self.zone.mkdir(parents=True, exist_ok=True)
        (self.zone / "name").write_text("package-0\n")
        (self.zone / "max_energy_range_uj").write_text(f"{max_energy_range_uj}\n")
        self._started = time.monotonic()
        self.advance()

    def advance(self) -> int:
        """Rewrite energy_uj with what the package drew since it was made; readers see the old
        value or the new one, never half a file."""
        drawn_uj = int((time.monotonic() - self._started) * self.power_w * 1e6)
        value = (self.start_uj + drawn_uj) % self.max_energy_range_uj
        partial = self.zone / ".energy_uj.tmp"
        partial.write_text(f"{value}\n")
        os.replace(partial, self.zone / "energy_uj")
        return value


@contextlib.contextmanager
def advancing_powercap(root: Path, power_w: float = POWER_W,
                       max_energy_range_uj: int = MAX_ENERGY_RANGE_UJ) -> Iterator[Path]:
    """A powercap tree under `root` with one package advancing at `power_w` while the block runs
    (a daemon thread); yields `root`, the value for DEEPGREEN_POWERCAP_ROOT."""
    package = AdvancingPackage(root, power_w, max_energy_range_uj)
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(UPDATE_S):
            package.advance()

    thread = threading.Thread(target=run, name="fake-rapl", daemon=True)
    thread.start()
    try:
        yield Path(root)
    finally:
        stop.set()
        thread.join()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/fakes/rapl.py ROOT  (then DEEPGREEN_POWERCAP_ROOT=ROOT)", file=sys.stderr)
        return 2
    with advancing_powercap(Path(argv[0])) as root:
        print(f"advancing {root}/intel-rapl:0/energy_uj at {POWER_W:g} W; Ctrl-C stops", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
