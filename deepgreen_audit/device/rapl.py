"""RAPL package counters through powercap sysfs (`/sys/class/powercap`).

Each package domain is a zone folder holding `name`, `energy_uj` (microjoules,
monotonic until it wraps to zero past `max_energy_range_uj`) and
`max_energy_range_uj`.  What counts as "every package domain, once":

* zone folders named `intel-rapl:N` (the MSR interface, also used for AMD
  CPUs by the kernel), `amd-rapl:N` and `intel-rapl-mmio:N` at the top level
  of the powercap tree; sub-zones (`intel-rapl:0:0`, core/uncore/dram) are
  parts of their package and never added;
* `psys` (the whole platform, which contains the packages) is left out;
* one domain name read through several interfaces (the MMIO mirror of the
  MSR `package-0`, or the same folder reached by two links) is read once,
  preferring the MSR interface;
* per-die domains `package-N-die-M` are left out when `package-N` itself is
  present (they are inside it); without it each die is a disjoint domain.

Wraps are counted, not assumed.  A package at 200 W wraps a 262 kJ range in
about 22 minutes, so a long block (a 224x224 epoch, a slow stack) can wrap
twice, and two boundary readings alone cannot tell one wrap from two.  Every
read of a `Rapl` (the 1 Hz sampler's, the harness's at each boundary) compares
each domain with its previous reading and counts a wrap where the counter went
down; reads are serialised by a lock, so the sampler and a boundary never
interleave a read with its comparison.  Read at least once a second, a
counter cannot wrap twice unobserved.  With `w` wraps observed between a
block's two reads (the boundary reads included), its energy per domain is
`end - start + w * max_energy_range_uj` microjoules, summed over domains in
their order (`package_energy_j`).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.device.errors import RaplUnavailable

POWERCAP_ROOT = Path("/sys/class/powercap")
#: Names another powercap tree for a whole collection (driver, runners, preflight): a test and
#: rehearsal hook (a fake tree whose counters advance, tests/fakes/rapl.py), never a measurement.
POWERCAP_ROOT_VARIABLE = "DEEPGREEN_POWERCAP_ROOT"
#: Zone interfaces in order of preference when one domain appears in several.
INTERFACES = ("intel-rapl", "amd-rapl", "intel-rapl-mmio")
_ZONE_RE = re.compile(r"(intel-rapl|amd-rapl|intel-rapl-mmio):(\d+)\Z")
_PACKAGE_RE = re.compile(r"package-(\d+)(?:-die-(\d+))?\Z")
PERMISSION_FIX = ("since Linux 5.10 energy_uj is readable by root only; run "
                  "'sudo chmod a+r /sys/class/powercap/*/energy_uj' (or install a udev rule "
                  "that does it at boot) before collecting")


def active_powercap_root() -> Path:
    """The powercap tree a collection reads: the folder DEEPGREEN_POWERCAP_ROOT names, else
    /sys/class/powercap."""
    redirected = os.environ.get(POWERCAP_ROOT_VARIABLE)
    return Path(redirected) if redirected else POWERCAP_ROOT


def redirected_reason() -> str | None:
    """Why a collection's RAPL readings are not the host's (DEEPGREEN_POWERCAP_ROOT names
    another tree), or None: the package is then marked synthetic."""
    root = active_powercap_root()
    if root == POWERCAP_ROOT:
        return None
    return f"RAPL read from {root} ({POWERCAP_ROOT_VARIABLE}), not from {POWERCAP_ROOT}"


@dataclass(frozen=True)
class RaplDomain:
    """One package domain: its powercap name, its zone folder and its wrap point."""

    name: str
    zone: Path
    max_energy_range_uj: int


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except PermissionError:
        raise RaplUnavailable(f"cannot read {path}: permission denied; {PERMISSION_FIX}") from None
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise RaplUnavailable(f"cannot read {path}: {exc}") from None


def discover(root: Path = POWERCAP_ROOT) -> tuple[RaplDomain, ...]:
    """The package domains under `root`, each once, ordered by package then die."""
    root = Path(root)
    if not root.is_dir():
        raise RaplUnavailable(f"{root} does not exist: no powercap RAPL driver on this host "
                              "(load it with 'modprobe intel_rapl_msr'; virtual machines "
                              "usually have none)")
    by_name: dict[str, tuple[int, Path]] = {}
    seen_real: set[str] = set()
    skipped: list[str] = []
    for entry in sorted(os.listdir(root)):
        match = _ZONE_RE.match(entry)
        if not match:
            continue
        zone = root / entry
        real = os.path.realpath(zone)
        if real in seen_real:
            continue
        seen_real.add(real)
        try:
            name = (zone / "name").read_text().strip()
        except OSError as exc:
            raise RaplUnavailable(f"cannot read {zone / 'name'}: {exc}") from None
        if not _PACKAGE_RE.match(name):
            skipped.append(name)
            continue
        rank = INTERFACES.index(match.group(1))
        if name not in by_name or rank < by_name[name][0]:
            by_name[name] = (rank, zone)
    whole = {m.group(1) for n in by_name if (m := _PACKAGE_RE.match(n)) and m.group(2) is None}
    chosen = []
    for name, (_, zone) in by_name.items():
        package = _PACKAGE_RE.match(name)
        assert package is not None  # by_name holds package domains only
        pkg, die = package.groups()
        if die is not None and pkg in whole:
            continue
        chosen.append((int(pkg), int(die or -1), name, zone))
    if not chosen:
        found = ", ".join(skipped) if skipped else "no RAPL zone"
        raise RaplUnavailable(f"no RAPL package domain under {root} (found: {found})")
    chosen.sort()
    return tuple(RaplDomain(name, zone, _read_int(zone / "max_energy_range_uj"))
                 for _, _, name, zone in chosen)


@dataclass(frozen=True)
class RaplReading:
    """One read of every domain: the counters and the wraps observed so far, in domain order.

    `wraps` counts, per domain, the wraps seen since the `Rapl` was opened; the wraps of a
    block are the difference of its two readings' counts."""

    energy_uj: tuple[int, ...]
    wraps: tuple[int, ...]


class Rapl:
    """The package counters of a host; `read()` reads them all, in domain order, counting wraps."""

    def __init__(self, root: Path = POWERCAP_ROOT):
        self.domains = discover(root)
        self._paths = [d.zone / "energy_uj" for d in self.domains]
        self._lock = threading.Lock()
        self._last_uj: tuple[int, ...] | None = None
        self._wraps: tuple[int, ...] = (0,) * len(self.domains)
        self.read()  # refuse now, not mid-run, when the counters are unreadable

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.domains)

    @property
    def max_energy_range_uj(self) -> tuple[int, ...]:
        return tuple(d.max_energy_range_uj for d in self.domains)

    def read(self) -> RaplReading:
        """Read every domain and count a wrap in each whose counter is below its previous read.

        The read and the comparison are one step under the lock: a sampler read that landed
        between a boundary's read and its comparison would otherwise look like a wrap."""
        with self._lock:
            now = tuple(_read_int(p) for p in self._paths)
            if self._last_uj is not None:
                self._wraps = tuple(w + (n < last) for w, n, last in zip(self._wraps, now, self._last_uj))
            self._last_uj = now
            return RaplReading(now, self._wraps)

    def read_uj(self) -> tuple[int, ...]:
        """The counters alone (the read still counts wraps)."""
        return self.read().energy_uj


def wraps_between(start: RaplReading, end: RaplReading) -> tuple[int, ...]:
    """Wraps observed per domain between two readings of one `Rapl` (their own reads included)."""
    return tuple(e - s for s, e in zip(start.wraps, end.wraps))


def fewest_wraps(start_uj, end_uj) -> tuple[int, ...]:
    """The fewest wraps two readings allow, per domain (1 where the counter went down, else 0):
    the count to use only for a window far shorter than a wrap (an API call's milliseconds)."""
    return tuple(int(e < s) for s, e in zip(start_uj, end_uj))


def package_energy_j(start_uj, end_uj, max_energy_range_uj, wraps) -> float:
    """Energy between two readings of every domain with `wraps` wraps per domain between them,
    joules: sum over domains of `end - start + wraps * max_energy_range_uj` microjoules."""
    return sum((e - s + w * r) / 1e6 for s, e, r, w in zip(start_uj, end_uj, max_energy_range_uj, wraps))
