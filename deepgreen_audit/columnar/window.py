"""The interleaved window of a campaign, and where each run lies against it.

A campaign runs its plan's interleaved schedule in order; a run retried by a later collect (or
resubmitted by Slurm) starts after runs scheduled behind it, at another time. A run ran *in its
turn* when it started before every run scheduled after it. The runs that ran in their turn,
in order of start, break into stretches wherever one started more than `max_run_gap_s` (the
audit's limit on a wait between runs, S6.schedule-gaps) after the one before ended; the
*interleaved window* is the stretch with the most runs (of two alike, the first), from its
first start to its last end. A run lies
*outside* the window when it started before it or ended after it: it was measured in another
time window than the rest (another load, room temperature, driver state), which the schedule's
interleaving does not spread over the configurations. What that is worth is what a
between-window calibration bounds (collect/calibration.toml, analysis/calibration.py).

Without schedule positions every run counts as in its turn (no schedule to compare with), and
only a long wait sets runs apart. A retry of the schedule's last run is in its turn, but the
wait before it (hours, as a later collect's) puts it outside.

Both the audit (S6.calibration-window) and the analysis read this one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The fewest calibration runs a side of the comparison needs (inside the window, and outside
#: it): one run has no spread to bound, so fewer leaves the drift unbounded.
MIN_CALIBRATION_RUNS_PER_SIDE = 2

#: Where a run lies against a window.
BEFORE, INSIDE, AFTER = "before", "inside", "after"


@dataclass(frozen=True)
class Window:
    """The interleaved window of a campaign (datetime64[ns] bounds) and its runs' places."""

    start: np.datetime64
    end: np.datetime64
    #: per run, in the order given: BEFORE, INSIDE or AFTER the window
    places: np.ndarray

    @property
    def outside(self) -> np.ndarray:
        """Per run: whether it lies outside the window."""
        return self.places != INSIDE

    def place(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Where runs (of this campaign or another, a calibration) lie against this window."""
        return places_against(self.start, self.end, starts, ends)


def places_against(start: np.datetime64, end: np.datetime64, starts: np.ndarray,
                   ends: np.ndarray) -> np.ndarray:
    """BEFORE (started before `start`), AFTER (ended after `end`) or INSIDE, per run."""
    starts, ends = _ns(starts), _ns(ends)
    return np.where(starts < start, BEFORE, np.where(ends > end, AFTER, INSIDE)).astype(object)


def in_turn(positions: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per run: whether it started before every run scheduled after it (all True when any
    schedule position is missing: there is no schedule to compare with)."""
    positions = np.asarray(positions, dtype=float)
    starts = _ns(starts)
    if len(starts) == 0 or np.isnan(positions).any():
        return np.ones(len(starts), dtype=bool)
    by_position = np.argsort(positions, kind="stable")
    ordered = starts[by_position]
    # the earliest start among the runs scheduled after each one (the last: none, so +inf)
    later_min = np.minimum.accumulate(ordered[::-1])[::-1]
    later_min = np.r_[later_min[1:], np.datetime64("NaT")]
    turn_sorted = np.isnat(later_min) | (ordered < later_min)
    turn = np.empty(len(starts), dtype=bool)
    turn[by_position] = turn_sorted
    return turn


def interleaved_window(positions: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                       max_run_gap_s: float) -> Window:
    """The interleaved window of a campaign's runs (see the module docstring); at least one
    run."""
    starts, ends = _ns(starts), _ns(ends)
    turn = np.flatnonzero(in_turn(positions, starts))
    turn = turn[np.argsort(starts[turn], kind="stable")]
    waits_s = (starts[turn][1:] - ends[turn][:-1]) / np.timedelta64(1, "s")
    stretch = np.r_[0, np.cumsum(waits_s > max_run_gap_s)]
    longest = int(np.argmax(np.bincount(stretch)))
    members = turn[stretch == longest]
    start, end = starts[members].min(), ends[members].max()
    return Window(start, end, places_against(start, end, starts, ends))


def _ns(values) -> np.ndarray:
    return np.asarray(values).astype("datetime64[ns]")


@dataclass(frozen=True)
class Coverage:
    """Whether a calibration's runs cover a campaign's runs outside its window: at least
    MIN_CALIBRATION_RUNS_PER_SIDE calibration runs inside the window, and as many on each side
    (before, after) where the campaign has runs outside it."""

    #: calibration runs before, inside and after the campaign's window
    counts: dict[str, int]
    #: the sides (BEFORE, AFTER) where the campaign has runs outside its window
    sides: tuple[str, ...]
    #: the calibration's hosts when it shares none with the campaign (its drift is another
    #: machine's), else ()
    other_hosts: tuple[str, ...] = ()

    @property
    def short(self) -> list[str]:
        """The places (INSIDE, and each side needed) with too few calibration runs."""
        needed = (INSIDE, *self.sides) if self.sides else ()
        return [p for p in needed if self.counts.get(p, 0) < MIN_CALIBRATION_RUNS_PER_SIDE]

    @property
    def covered(self) -> bool:
        return not self.short and not self.other_hosts

    def why_not(self) -> str:
        """Why the calibration does not cover the runs outside the window ("" when it does)."""
        reasons = [f"{self.counts.get(p, 0)} calibration run(s) {p} the window, fewer than "
                   f"{MIN_CALIBRATION_RUNS_PER_SIDE}" for p in self.short]
        if self.other_hosts:
            reasons.append(f"measured on another host ({', '.join(self.other_hosts)}) than the "
                           "campaign")
        return "; ".join(reasons)

    def describe(self) -> str:
        """'1 before, 7 inside, 2 after the window' (the calibration's runs)."""
        return ", ".join(f"{self.counts.get(p, 0)} {p}" for p in (BEFORE, INSIDE, AFTER)) + \
            " the window"


def coverage(campaign_places: np.ndarray, calibration_places: np.ndarray,
             campaign_hosts, calibration_hosts) -> Coverage:
    """How a calibration's runs (their places against the campaign's window, the hosts its
    environment table records) cover the campaign's runs outside it."""
    counts = {p: int((calibration_places == p).sum()) for p in (BEFORE, INSIDE, AFTER)}
    sides = tuple(p for p in (BEFORE, AFTER) if (campaign_places == p).any())
    mine, theirs = {str(h) for h in campaign_hosts}, {str(h) for h in calibration_hosts}
    return Coverage(counts, sides, () if mine & theirs else tuple(sorted(theirs)))
