r"""A comparison in the manuscript: its numbers as numbers.tex macros, its section's context.

`deepgreen render PKG --compare BASELINE` compares PKG (B) with BASELINE (A), adds the
macros below to the `Results` (so they reach numbers.tex like every other number, and a value
that cannot be computed stops the render by name), sets the conditional ``\ifComparison``
that paper.tex tests before it inputs generated/comparison.tex, and renders that section from
paper/templates/comparison.tex.j2 with `section_context`.
"""

from __future__ import annotations

import math
import re

from deepgreen_audit.analysis import NotMeasured, Number, Results
from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.compare.core import METRICS, Comparison, Difference, no_shared_configuration
from deepgreen_audit.safe import latex_text

#: The flag paper.tex tests before it inputs generated/comparison.tex.
FLAG = "Comparison"


def _word(label: str) -> str:
    return label[:1].upper() + label[1:]


def add_numbers(results: Results, comparison: Comparison | None) -> None:
    """The comparison's macros (all named Compare...) and flags; only the flag (false) when
    no comparison was asked for.  The summaries judge the primary metric (energy where it was
    compared, else duration); a metric not compared gets its reason, never a number."""
    results.flags[FLAG] = comparison is not None
    if comparison is None:
        return
    c, r = comparison, results
    r.text("CompareBaselineTitle", c.a.title or c.a.path, "title of the baseline package (A)")
    r.number("CompareDifferences", len(c.differences), 0,
             "recorded values that differ between the packages")
    r.flags["CompareShared"] = c.shared
    if not c.shared:
        r.text("CompareNoSharedReason", no_shared_configuration(c.a, c.b), "why no ratio B/A exists: the packages "
               "share no configuration")
        return
    r.number("CompareConfigurations", len(c.configurations), 0,
             "configuration-phases both packages hold, compared")
    r.number("CompareStacksCount", len(c.stacks), 0, "stacks both packages hold")
    r.number("CompareConfidencePct", 100 * c.confidence, 0,
             "confidence of the ratios' bootstrap intervals", r"\percent")
    energy = "energy" in c.compared_metrics
    r.flags["CompareEnergy"] = energy
    if not energy:
        r.text("CompareEnergyNotComparedReason",
               c.not_compared["energy"] or "no configuration has energy in both packages",
               "why the comparison holds no energy ratio")
    r.flags["CompareControl"] = all(c.band(phase, c.primary) for phase in PHASES)
    if c.control:
        r.text("CompareControlList", ";".join(c.control), "the control group's stacks",
               kind="labels")
        r.number("CompareControlCount", len(c.control), 0, "stacks in the control group")
    else:
        r.text("CompareNoControlReason", c.no_control(), "why there is no control group")
    for band in c.drift:
        name = f"CompareDrift{_word(band.phase)}{_word(band.metric)}"
        what = f"drift band of the control group, {band.phase} {band.metric} ratio B/A"
        r.number(name + "Low", band.low, 3, what + ", lower end")
        r.number(name + "High", band.high, 3, what + ", upper end")
    beyond = c.beyond_stacks(c.primary)
    r.flags["CompareBeyond"] = bool(beyond)
    r.number("CompareBeyondCount", len(beyond), 0,
             f"stacks whose {c.primary} ratio lies beyond the drift in every configuration of "
             "a phase")
    if beyond:
        r.text("CompareBeyondList", ";".join(beyond), f"stacks beyond the drift ({c.primary})",
               kind="labels")
    _largest(r, c)


def _largest(r: Results, c: Comparison) -> None:
    """The primary metric's ratio farthest from one, with its interval and configuration."""
    column = f"{c.primary}_ratio"
    table = c.configurations.dropna(subset=[column])
    far = table.loc[table[column].map(lambda v: abs(math.log(v)) if v > 0
                                      else math.inf).idxmax()]
    r.number("CompareLargestRatio", far[column], 2,
             f"{c.primary} ratio B/A farthest from 1 over the configurations")
    r.number("CompareLargestLow", far[f"{c.primary}_low"], 2, "its bootstrap interval, lower end")
    r.number("CompareLargestHigh", far[f"{c.primary}_high"], 2,
             "its bootstrap interval, upper end")
    for key, word in (("ecosystem", "Stack"), ("architecture", "Architecture"),
                      ("dataset", "Dataset"), ("phase", "Phase")):
        r.text(f"CompareLargest{word}", far[key], f"{key} of that configuration", kind="label")


def _cells(got, key: str) -> dict:
    """One stack's cells of one phase and metric: its ratio range and configurations beyond
    the drift, or "not measured" where it has no ratio (the section states the reason)."""
    if got["verdict"] == "not-compared":
        missing = NotMeasured(str(got["reason"]), f"{key} ratio B/A")
        return {"low": missing, "high": missing, "beyond": missing,
                "configurations": Number(got["configurations"], 0, f"{key} configurations"),
                "verdict": str(got["verdict"])}
    return {"low": Number(got["ratio_min"], 3, f"lowest {key} ratio B/A"),
            "high": Number(got["ratio_max"], 3, f"highest {key} ratio B/A"),
            "beyond": Number(got["beyond"], 0, f"{key} configurations beyond the drift"),
            "configurations": Number(got["configurations"], 0, f"{key} configurations"),
            "verdict": str(got["verdict"])}


#: The items of a listed value the differences table shows (`deepgreen compare` lists all).
SHOWN_ITEMS = 4


def _shown(value: str) -> str:
    """A recorded value as the differences table prints it (LaTeX), so that the table fits
    the page: a list shows its first `SHOWN_ITEMS` with the count
    of the rest, a SHA-256 its first 12 digits."""
    items = [f"{item[:12]}\\ldots{{}}" if re.fullmatch(r"[0-9a-f]{64}", item) else latex_text(item)
             for item in value.split(";")]
    rest = len(items) - SHOWN_ITEMS
    if rest > 1:
        items = [*items[:SHOWN_ITEMS], f"and {rest} more"]
    return "; ".join(items)


def _difference(d: Difference, stacks: tuple[str, ...]) -> dict:
    """A difference as the table prints it: its values shown, "every stack" for all of them."""
    every = len(stacks) > 1 and set(d.stacks) == set(stacks)
    return {**d.to_dict(), "stacks": [] if every else list(d.stacks),
            "who": "every stack" if every else "package" if not d.stacks else None,
            "a": _shown(d.a), "b": _shown(d.b)}


def section_context(comparison: Comparison | None) -> dict:
    """What paper/templates/comparison.tex.j2 draws: whether the packages share a
    configuration, the metric the summaries judge, the differences and, per stack and phase,
    each metric's ratios' range, the configurations beyond the drift, and the verdict."""
    if comparison is None:
        return {"comparison": None}
    c = comparison
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    rows = []
    for stack in c.stacks:
        for phase in PHASES:
            if (stack, phase, "energy") not in v.index:
                continue
            row = {"stack": stack, "phase": phase, "control": stack in c.control,
                   "verdict": str(v.loc[(stack, phase, c.primary), "verdict"])}
            for metric in METRICS:
                row[metric] = _cells(v.loc[(stack, phase, metric)], f"{stack}/{phase} {metric}")
            rows.append(row)
    return {"comparison": {"shared": c.shared, "control": bool(c.control), "metric": c.primary,
                           "metrics": list(c.compared_metrics),
                           "metric_macro": _word(c.primary),
                           "differences": [_difference(d, c.stacks) for d in c.differences],
                           "rows": rows,
                           "level": Number(100 * c.confidence, 0, "bootstrap confidence",
                                           r"\percent")}}
