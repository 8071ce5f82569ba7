"""Typed errors of the instruments and the harness.

A missing counter is not a bug and not the user's mistake: it is a fact about
the host, carried as `CounterUnavailable` with a reason that ends up in the
tables (energy_missing_reason, counters_missing_reason).
"""

from __future__ import annotations

from deepgreen_audit.errors import UserError

#: The option that lets collection go on without a counter (its energy cells empty, with why).
ALLOW_OPTION = "--allow-missing-counters"
#: Consecutive runs failing for the same reason after which a campaign stops (0: never).
MAX_CONSECUTIVE_FAILURES = 3


class CounterUnavailable(Exception):
    """A hardware counter cannot be read on this host; `reason` says why (one line)."""

    counter = "counter"

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"{self.counter}: {reason}")


class NvmlUnavailable(CounterUnavailable):
    """NVML itself is absent (no driver, no pynvml, no GPU)."""

    counter = "NVML"


class EnergyNotSupported(NvmlUnavailable):
    """The GPU has no total-energy counter (pre-Volta): NVMLError_NotSupported."""


class RaplUnavailable(CounterUnavailable):
    """No readable RAPL package domain under powercap sysfs."""

    counter = "RAPL"


class CodeCarbonRefused(UserError):
    """The installed CodeCarbon breaks the contract (a 2.x version, a bad pinned file)."""


class ProtocolViolation(Exception):
    """A stack broke the block order or the line protocol; `code` is stable (docs/protocol.md)."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")
