"""Audit checks of API-level data: a registry of small functions run by one driver.

Each check has a stable id, the section of the experiment specification it
serves (S5: measurement) and a docstring saying why it matters; it reads
`api_calls` rows (dicts, typed) and yields findings.  They are properties
of the data a user must know before trusting a per-call figure, not
integrity errors of the package (that is `validate_api_package`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from deepgreen_audit.greenlight.fecom import ENERGY_DOMAINS


@dataclass(frozen=True)
class Finding:
    check: str
    call_id: str
    message: str


@dataclass(frozen=True)
class Check:
    id: str
    spec: str
    func: Callable[[list[dict]], Iterable[Finding]]

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or "").strip().splitlines()[0]


CHECKS: dict[str, Check] = {}


def check(id_: str, spec: str = "S5_measurement"):
    def register(func):
        CHECKS[id_] = Check(id_, spec, func)
        return func
    return register


@check("api-call-shorter-than-interval")
def short_calls(calls):
    """A call shorter than the sampling interval has no (or one) sample in its window: no energy."""
    for c in calls:
        interval = c["measurement_interval_s"]
        window_s = c["execution_time_s"] * (c["repetitions"] or 1)  # profile-api repeats calls
        if interval is not None and window_s < interval:
            yield Finding("api-call-shorter-than-interval", c["call_id"],
                          f"window of {window_s:.3g} s < the {interval} s sampling interval; "
                          + ("its energy cells are empty" if c["energy_missing_reason"]
                             else "its energy rests on at most one sample"))


@check("api-baseline-unstable")
def unstable_baselines(calls):
    """The idle baseline subtracted is less stable than the stable-state criterion, or short."""
    for c in calls:
        interval, loop = c["measurement_interval_s"], c["wait_per_stable_check_loop_s"]
        expected = int(loop / interval) if interval and loop else None
        for d in ENERGY_DOMAINS:
            cv, limit, n = c[f"{d}_baseline_std_to_mean"], c[f"{d}_std_to_mean"], c[f"{d}_baseline_samples"]
            if n is not None and expected is not None and n < expected:
                yield Finding("api-baseline-unstable", c["call_id"],
                              f"{d.upper()} baseline has {n} samples, the window needs {expected}")
            elif cv is not None and limit is not None and cv > limit:
                yield Finding("api-baseline-unstable", c["call_id"],
                              f"{d.upper()} baseline stdev/mean {cv:.4f} exceeds the stable-state "
                              f"criterion {limit}")


@check("api-negative-normalised-energy")
def negative_normalised(calls):
    """Energy below the idle baseline means the baseline was higher than the call's draw."""
    for c in calls:
        for d in ENERGY_DOMAINS:
            value = c[f"{d}_total_normalised_j"]
            if value is not None and value < 0:
                yield Finding("api-negative-normalised-energy", c["call_id"],
                              f"{d.upper()} normalised energy {value:.4g} J < 0 (total "
                              f"{c[f'{d}_total_j']:.4g} J)")


def _by_file(calls) -> list[list[dict]]:
    """Calls grouped by experiment file, each group in start-time order."""
    groups: dict[tuple, list[dict]] = {}
    for c in calls:
        groups.setdefault((c["source"], c["experiment_kind"], c["project"], c["experiment"]),
                          []).append(c)
    return [sorted(g, key=lambda c: c["start_time_execution_ns"]) for g in groups.values()]


@check("api-lag-overlaps-next-call")
def lag_overlaps(calls):
    """A lag window that runs past the next call's start charges one call's tail to both."""
    for group in _by_file(calls):
        for i, c in enumerate(group):
            nxt = next((n for n in group[i + 1:]
                        if n["start_time_execution_ns"] >= c["end_time_execution_ns"]), None)
            if nxt is None:
                continue
            for d, end, base in (("cpu", "end_time_perf_s", "sys_start_time_perf_ns"),
                                 ("ram", "end_time_perf_s", "sys_start_time_perf_ns"),
                                 ("gpu", "end_time_nvidia_s", "sys_start_time_nvidia_ns")):
                lag = c[f"{d}_lag_time_s"]
                if not lag or c[end] is None or c[base] is None:
                    continue
                over_s = (c[base] + (c[end] + lag) * 1e9 - nxt["start_time_execution_ns"]) / 1e9
                if over_s > 0:
                    yield Finding("api-lag-overlaps-next-call", c["call_id"],
                                  f"{d.upper()} lag window ends {over_s:.2f} s after the next call "
                                  f"({nxt['api_call']}) started")


@check("api-calls-overlap")
def overlapping_calls(calls):
    """A call that starts before another ended (nested instrumented calls) is counted twice."""
    for group in _by_file(calls):
        for i, c in enumerate(group):
            for other in group[i + 1:]:
                if other["start_time_execution_ns"] >= c["end_time_execution_ns"]:
                    break
                yield Finding("api-calls-overlap", other["call_id"],
                              f"runs inside the window of {c['call_id']} ({c['api_call']}): its "
                              "energy is also part of that call's")


@dataclass
class CheckReport:
    findings: list[Finding] = field(default_factory=list)
    calls: int = 0
    ran: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {cid: 0 for cid in self.ran}
        for f in self.findings:
            out[f.check] += 1
        return out

    def format_text(self, limit: int = 5) -> str:
        lines = [f"API-level checks over {self.calls} calls:"]
        for cid, count in self.counts().items():
            lines.append(f"  {cid} [{CHECKS[cid].spec}]: {count} finding(s) — {CHECKS[cid].doc}")
            for f in [f for f in self.findings if f.check == cid][:limit]:
                lines.append(f"    {f.call_id}: {f.message}")
        return "\n".join(lines)


def run_checks(calls: list[dict], only: Iterable[str] | None = None) -> CheckReport:
    """Run the registered checks (or those in `only`) over api_calls rows."""
    report = CheckReport(calls=len(calls), ran=list(only or CHECKS))
    for cid in report.ran:
        report.findings.extend(CHECKS[cid].func(calls))
    return report
