r"""A comparison in the manuscript: its numbers as numbers.tex macros, its section's context.

`deepgreen render PKG --compare BASELINE` compares PKG (B) with BASELINE (A), adds the
macros below to the `Results` (so they reach numbers.tex like every other number, and a value
that cannot be computed stops the render by name), sets the conditional ``\\ifComparison``
that paper.tex tests before it inputs generated/comparison.tex, and renders that section from
paper/templates/comparison.tex.j2 with `section_context`.
"""

from __future__ import annotations

import math

from deepgreen_audit.analysis import Number, Results
from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.compare.core import METRICS, Comparison

#: The flag paper.tex tests before it inputs generated/comparison.tex.
FLAG = "Comparison"


def _word(label: str) -> str:
    return label[:1].upper() + label[1:]


def add_numbers(results: Results, comparison: Comparison | None) -> None:
    """The comparison's macros (all named Compare...) and flags; only the flag (false) when
    no comparison was asked for."""
    results.flags[FLAG] = comparison is not None
    if comparison is None:
        return
    c, r = comparison, results
    r.text("CompareBaselineTitle", c.a.title or c.a.path, "title of the baseline package (A)")
    r.number("CompareConfigurations", len(c.configurations), 0,
             "configuration-phases both packages hold, compared")
    r.number("CompareStacksCount", len(c.stacks), 0, "stacks both packages hold")
    r.number("CompareDifferences", len(c.differences), 0,
             "recorded values that differ between the packages")
    r.number("CompareConfidencePct", 100 * c.confidence, 0,
             "confidence of the ratios' bootstrap intervals", r"\percent")
    r.flags["CompareControl"] = bool(c.control)
    if c.control:
        r.text("CompareControlList", ";".join(c.control), "the control group's stacks",
               kind="labels")
        r.number("CompareControlCount", len(c.control), 0, "stacks in the control group")
    for band in c.drift:
        name = f"CompareDrift{_word(band.phase)}{_word(band.metric)}"
        what = f"drift band of the control group, {band.phase} {band.metric} ratio B/A"
        r.number(name + "Low", band.low, 3, what + ", lower end")
        r.number(name + "High", band.high, 3, what + ", upper end")
    beyond = c.beyond_stacks("energy")
    r.flags["CompareBeyond"] = bool(beyond)
    r.number("CompareBeyondCount", len(beyond), 0,
             "stacks whose energy ratio lies beyond the drift in every configuration of a phase")
    if beyond:
        r.text("CompareBeyondList", ";".join(beyond), "stacks beyond the drift (energy)",
               kind="labels")
    table = c.configurations.dropna(subset=["energy_ratio"])
    if not table.empty:
        far = table.loc[table["energy_ratio"].map(lambda v: abs(math.log(v)) if v > 0
                                                  else math.inf).idxmax()]
        r.number("CompareLargestRatio", far["energy_ratio"], 2,
                 "energy ratio B/A farthest from 1 over the configurations")
        r.number("CompareLargestLow", far["energy_low"], 2, "its bootstrap interval, lower end")
        r.number("CompareLargestHigh", far["energy_high"], 2, "its bootstrap interval, upper end")
        for key, word in (("ecosystem", "Stack"), ("architecture", "Architecture"),
                          ("dataset", "Dataset"), ("phase", "Phase")):
            r.text(f"CompareLargest{word}", far[key], f"{key} of that configuration",
                   kind="label")


def section_context(comparison: Comparison | None) -> dict:
    """What paper/templates/comparison.tex.j2 draws: the differences and, per stack and
    phase, the energy ratios' range, the configurations beyond the drift, and the verdict."""
    if comparison is None:
        return {"comparison": None}
    c = comparison
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    rows = []
    for stack in c.stacks:
        for phase in PHASES:
            if (stack, phase, "energy") not in v.index:
                continue
            row = {"stack": stack, "phase": phase, "control": stack in c.control}
            for metric in METRICS:
                got = v.loc[(stack, phase, metric)]
                key = f"{stack}/{phase} {metric}"
                row[metric] = {
                    "low": Number(got["ratio_min"], 3, f"lowest {key} ratio B/A"),
                    "high": Number(got["ratio_max"], 3, f"highest {key} ratio B/A"),
                    "beyond": Number(got["beyond"], 0, f"{key} configurations beyond the drift"),
                    "configurations": Number(got["configurations"], 0, f"{key} configurations"),
                    "verdict": str(got["verdict"])}
            rows.append(row)
    return {"comparison": {"differences": [d.to_dict() for d in c.differences], "rows": rows,
                           "level": Number(100 * c.confidence, 0, "bootstrap confidence",
                                           r"\percent")}}
