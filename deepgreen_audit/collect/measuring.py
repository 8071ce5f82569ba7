"""What a campaign measures on this host, in words: the part of each run's progress line that
says what is measured, and the warning collect prints once, before its first run, for what is
not.

Both follow the instruments' probe (`instruments.probe`): a counter it opened is measured; a
counter it lacks (`missing`) is named with its reason; a counter neither opened nor missing
lies outside the campaign's measurement boundary.  CodeCarbon and the 1 Hz sampler run in
every run; what they can only model or leave empty follows from the same probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepgreen_audit.collect.instruments import CounterProbe

#: The energy counters and what each measures.
COUNTERS: tuple[tuple[str, str], ...] = (("NVML", "GPU energy"), ("RAPL", "CPU energy"))


@dataclass(frozen=True)
class Measuring:
    """The counters a host opened and those it lacks, with why."""

    #: the counters the probe opened ("NVML", "RAPL")
    readable: tuple[str, ...]
    #: {counter: why it is missing}
    missing: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, found: CounterProbe, missing: dict[str, str] | None = None) -> Measuring:
        """From the instruments' probe: the counters it opened and those it lacks; `missing`,
        when given, the lacking counters the campaign's boundary needs (a cpu campaign's NVML
        is outside it: `instruments.missing_in_boundary`)."""
        opened = {"NVML": found.nvml, "RAPL": found.rapl}
        return cls(tuple(name for name, _ in COUNTERS if opened[name] is not None),
                   dict(found.missing if missing is None else missing))

    def per_run(self) -> str:
        """What each run measures, for its progress line."""
        counters = [f"{what} ({counter})" for counter, what in COUNTERS if counter in self.readable]
        sampled = "GPU and CPU utilisation" if "NVML" in self.readable else "CPU utilisation"
        text = "measuring " + ", ".join([*counters, "CodeCarbon", f"the 1 Hz sampler ({sampled})"])
        return text if counters else text + "; NO energy counter"

    def not_measured(self) -> str | None:
        """One line, loud, of what the campaign does not measure here and what that leaves in
        its tables; None when every counter was opened."""
        lacking = [f"{what} ({counter}: {self.missing[counter]})" for counter, what in COUNTERS
                   if counter in self.missing]
        outside = [f"{what} ({counter})" for counter, what in COUNTERS
                   if counter not in self.readable and counter not in self.missing]
        if not lacking and not outside:
            return None
        parts = []
        if lacking:
            parts.append(f"{' and '.join(lacking)}: every block leaves "
                         f"{'their' if len(lacking) > 1 else 'its'} energy cells empty, with this "
                         "reason in blocks.energy_missing_reason")
        if outside:
            parts.append(f"{' and '.join(outside)}: outside this campaign's measurement boundary")
        if "RAPL" not in self.readable:
            parts.append("CodeCarbon's CPU and RAM figures are models on this host, not "
                         "measurements (blocks.codecarbon_cpu_method says which model)")
        if "NVML" not in self.readable:
            parts.append("CodeCarbon reports no GPU, and the samples' GPU columns stay empty")
        return "NOT MEASURED: " + "; ".join(parts)
