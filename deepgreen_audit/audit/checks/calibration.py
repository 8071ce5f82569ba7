"""S6 between-window calibration: the runs outside a campaign's interleaved window, and whether
a calibration package (collect/calibration.toml) covers them."""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit import figures
from deepgreen_audit.audit.checks.replication import is_calibration
from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.columnar.evidence import evidence
from deepgreen_audit.columnar.frame import Frame, utc
from deepgreen_audit.columnar.window import coverage, interleaved_window
from deepgreen_audit.package.validate import validate_tables
from deepgreen_audit.suite.registry import NotApplicable, Outcome, Skip, check

#: The runs outside the window a message names (the evidence holds every one).
NAMED_RUNS = 6


@check("S6.calibration-window", "S6", table="runs", figure=figures.TIMELINE,
       remedy="collect a between-window calibration (collect/calibration.toml) beside the runs "
              "outside the window and inside it, and audit with --calibration CAL")
def calibration_window(ctx: AuditContext) -> Outcome:
    """Every run lies inside the campaign's interleaved window (columnar/window.py: the runs
    that ran in their scheduled turn, without a wait over max_run_gap_s); a run outside it (a
    retry a later collect made) was measured in another time window than the rest, and passes
    only when a between-window calibration package (`audit --calibration CAL`) covers it: at
    least MIN_CALIBRATION_RUNS_PER_SIDE (2) of the calibration's runs inside the window and as
    many on each side where runs lie outside, on a host the campaign's environment records.
    Names the runs outside and where the calibration's runs lie."""
    if is_calibration(ctx):
        raise NotApplicable("the package is a between-window calibration itself")
    runs = ctx.runs
    if not len(runs):
        raise NotApplicable("the package holds no run")
    window = interleaved_window(runs["schedule_position"], runs["started_at_utc"],
                                runs["ended_at_utc"], float(ctx.tolerances.max_run_gap_s))
    span = f"{utc(window.start):%Y-%m-%d %H:%M} to {utc(window.end):%Y-%m-%d %H:%M} UTC"
    calibration = ctx.calibration
    cover = None
    if calibration is not None:
        cal, cal_hosts = _calibration_runs(calibration)
        cover = coverage(window.places, window.place(cal["started_at_utc"], cal["ended_at_utc"]),
                         ctx.environment["host"], cal_hosts)
    cal_note = "" if cover is None else f"; the calibration {calibration}: {cover.describe()}"
    outside = window.outside
    if not outside.any():
        return Outcome.passed(f"all {len(runs):,} runs inside the interleaved window ({span})"
                              + cal_note)
    ids = sorted(runs["run_id"][outside])
    names = ", ".join(ids[:NAMED_RUNS]) + (f" and {len(ids) - NAMED_RUNS} more (evidence)"
                                           if len(ids) > NAMED_RUNS else "")
    found = runs.take(outside).select(["run_id", "ecosystem", "schedule_position",
                                       "started_at_utc", "ended_at_utc"]).assign(
        side=window.places[outside].astype(str),
        covered=np.full(int(outside.sum()), bool(cover and cover.covered)))
    head = f"{int(outside.sum())} of {len(runs):,} run(s) outside the interleaved window ({span}): {names}"
    if cover is not None and cover.covered:
        return Outcome.passed(f"{head}; covered by the calibration {calibration} "
                              f"({cover.describe()})")
    why = ("no between-window calibration was given (deepgreen audit PKG --calibration CAL)"
           if cover is None else
           f"the calibration {calibration} does not cover them ({cover.describe()}: "
           f"{cover.why_not()})")
    return Outcome.failed(f"{head}; {why}, so what their window is worth is not bounded",
                          rows=int(outside.sum()), details=evidence(found))


def _calibration_runs(calibration) -> tuple[Frame, object]:
    """The calibration package's runs and their hosts, read as the audit reads its own package:
    validated first (a calibration that does not validate covers nothing)."""
    integrity, typed = validate_tables(calibration, ("runs", "environment"))
    if not integrity.valid:
        raise Skip(f"the calibration {calibration} does not validate "
                   f"({integrity.error_count} error(s); deepgreen validate {calibration})")
    return Frame.from_arrow(typed["runs"]), Frame.from_arrow(typed["environment"])["host"]
