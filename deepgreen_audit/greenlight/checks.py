"""Audit checks of API-level data: the suite `api-audit` of the one check registry.

Each check has a stable id, the section of the experiment specification it
serves (S5: measurement) and a docstring saying why it matters; it reads
`api_calls` rows (dicts, typed) and names the calls it concerns as evidence.
They are properties of the data a user must know before trusting a per-call
figure, not integrity errors of the package (that is `validate_api_package`),
so a check that finds something warns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from deepgreen_audit.greenlight.fecom import ENERGY_DOMAINS
from deepgreen_audit.report import Report
from deepgreen_audit.suite.registry import Check, CheckFunc, Outcome, check, registered_checks, run_check

SUITE = "api-audit"


def api_checks() -> list[Check[list]]:
    """The checks of the suite `api-audit`, all of them in this module, in definition order."""
    return registered_checks(SUITE, (sys.modules[__name__],), list)


def api_check(id_: str) -> Callable[[CheckFunc], CheckFunc]:
    """Register an API-level check: section S5, a warning, rows of api_calls."""
    return check(id_, "S5", suite=SUITE, severity="warning", table="api_calls")


def _outcome(problems: list[tuple[str, str]], what: str) -> Outcome:
    """Passed when no call has the problem; otherwise each (call, problem) is evidence."""
    if not problems:
        return Outcome.passed(f"no call {what}")
    calls = len({call_id for call_id, _ in problems})
    return Outcome.failed(f"{calls} call(s) {what}", rows=calls, details={
        "evidence": [{"call_id": call_id, "problem": message} for call_id, message in problems],
        "evidence_total": len(problems)})


@api_check("S5.api-call-shorter-than-interval")
def short_calls(calls: list[dict]) -> Outcome:
    """A call shorter than the sampling interval has no (or one) sample in its window: no energy."""
    problems = []
    for c in calls:
        interval = c["measurement_interval_s"]
        window_s = c["execution_time_s"] * (c["repetitions"] or 1)  # profile-api repeats calls
        if interval is not None and window_s < interval:
            problems.append((c["call_id"], f"window of {window_s:.3g} s < the {interval} s sampling "
                             "interval; " + ("its energy cells are empty" if c["energy_missing_reason"]
                                             else "its energy rests on at most one sample")))
    return _outcome(problems, "shorter than the sampling interval")


@api_check("S5.api-baseline-unstable")
def unstable_baselines(calls: list[dict]) -> Outcome:
    """The idle baseline subtracted is less stable than the stable-state criterion, or short."""
    problems = []
    for c in calls:
        interval, loop = c["measurement_interval_s"], c["wait_per_stable_check_loop_s"]
        expected = int(loop / interval) if interval and loop else None
        for d in ENERGY_DOMAINS:
            cv, limit, n = c[f"{d}_baseline_std_to_mean"], c[f"{d}_std_to_mean"], c[f"{d}_baseline_samples"]
            if n is not None and expected is not None and n < expected:
                problems.append((c["call_id"], f"{d.upper()} baseline has {n} samples, the window "
                                               f"needs {expected}"))
            elif cv is not None and limit is not None and cv > limit:
                problems.append((c["call_id"], f"{d.upper()} baseline stdev/mean {cv:.4f} exceeds "
                                               f"the stable-state criterion {limit}"))
    return _outcome(problems, "with an unstable or short baseline")


@api_check("S5.api-negative-normalised-energy")
def negative_normalised(calls: list[dict]) -> Outcome:
    """Energy below the idle baseline means the baseline was higher than the call's draw."""
    problems = []
    for c in calls:
        for d in ENERGY_DOMAINS:
            value = c[f"{d}_total_normalised_j"]
            if value is not None and value < 0:
                problems.append((c["call_id"], f"{d.upper()} normalised energy {value:.4g} J < 0 "
                                               f"(total {c[f'{d}_total_j']:.4g} J)"))
    return _outcome(problems, "with negative normalised energy")


def _each_with_later_calls(calls):
    """Each call with the calls of its experiment file that start after it, in start order."""
    groups: dict[tuple, list[dict]] = {}
    for c in calls:
        groups.setdefault((c["source"], c["experiment_kind"], c["project"], c["experiment"]),
                          []).append(c)
    for group in groups.values():
        group.sort(key=lambda c: c["start_time_execution_ns"])
        for i, c in enumerate(group):
            yield c, group[i + 1:]


@api_check("S5.api-lag-overlaps-next-call")
def lag_overlaps(calls: list[dict]) -> Outcome:
    """A lag window that runs past the next call's start charges one call's tail to both."""
    problems = []
    for c, later in _each_with_later_calls(calls):
        nxt = next((n for n in later if n["start_time_execution_ns"] >= c["end_time_execution_ns"]),
                   None)
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
                problems.append((c["call_id"], f"{d.upper()} lag window ends {over_s:.2f} s "
                                               f"after the next call ({nxt['api_call']}) started"))
    return _outcome(problems, "whose lag window runs into the next call")


@api_check("S5.api-calls-overlap")
def overlapping_calls(calls: list[dict]) -> Outcome:
    """A call that starts before another ended (nested instrumented calls) is counted twice."""
    problems = []
    for c, later in _each_with_later_calls(calls):
        for other in later:
            if other["start_time_execution_ns"] >= c["end_time_execution_ns"]:
                break
            problems.append((other["call_id"], f"runs inside the window of {c['call_id']} "
                                               f"({c['api_call']}): its energy is also part "
                                               "of that call's"))
    return _outcome(problems, "inside another call's window")


def run_checks(calls: list[dict], subject: str) -> Report:
    """Run the API-level checks over the api_calls rows of the package `subject`."""
    report = Report(subject, SUITE, notes=[f"API-level checks over {len(calls):,} calls"],
                    stats={"calls": len(calls)})
    for c in api_checks():
        report.findings.append(run_check(c, calls))
    return report
