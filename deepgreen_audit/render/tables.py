"""The contexts of the generated booktabs tables, built from the analysis frames.

Every cell is a `Number` whose description names what it is, so a NaN that
reached a table is refused by the template's finalize hook with its name.
"""

from __future__ import annotations

from deepgreen_audit.analysis import Design, MissingValue, Number, Results
from deepgreen_audit.analysis.data import PHASES
from deepgreen_audit.analysis.values import SCALES, decimals_for, scaled

#: What the first table ranks, by the column the analysis ranked, in the caption's words.
QUANTITIES = {"energy_j": ("energy", "energy_j"), "duration_s": ("duration", "duration_s")}


def _table_unit(kind: str, values) -> tuple[str, float, int]:
    """(siunitx unit, its factor from the base unit, decimals) for a table of `values`: the
    unit in which the smallest prints as 1 or more, to three significant figures there (at
    most two decimals, so a column stays readable)."""
    smallest = min(v for v in values if v > 0) if any(v > 0 for v in values) else 1.0
    unit = scaled(kind, smallest, "").unit or ""
    factor = dict(SCALES[kind])[unit]
    return unit, factor, min(2, decimals_for(smallest / factor))


def energy_context(results: Results, design: Design) -> dict:
    """Median phase energy per ecosystem and cell, both phases, with spreads; the median
    phase duration where the package measured no energy (the caption says which, and why)."""
    column = results.column
    word, _ = QUANTITIES[column]
    med = results.medians.set_index(["ecosystem", "architecture", "dataset", "phase"])
    spreads = results.spreads.set_index(["architecture", "dataset", "phase"])
    unit, factor, decimals = _table_unit(column, med[column].dropna().to_list())
    cells = [{"architecture": a, "dataset": d} for a, d in design.cells]
    panels = []
    for phase in PHASES:
        rows = []
        for eco in design.ecosystems:
            values = []
            for a, d in design.cells:
                value = med.loc[(eco, a, d, phase), column] / factor
                # bold only where the phase may name a cheapest stack ([analysis]
                # cheapest_min_sampler_intervals)
                values.append({"number": Number(value, decimals,
                                                f"median {phase} {word} of {eco}/{a}/{d}"),
                               "cheapest": bool(spreads.loc[(a, d, phase), "names_cheapest"])
                               and spreads.loc[(a, d, phase), "cheapest"] == eco})
            rows.append({"ecosystem": eco, "entries": values})
        panels.append({"phase": phase, "rows": rows,
                       "names_cheapest": bool(results.cheapest_rule[phase]["names_cheapest"]),
                       "spreads": [
            Number(spreads.loc[(a, d, phase), "spread"], 2, f"{phase} spread of {a}/{d}")
            for a, d in design.cells]})
    architectures, rules, column_index = [], [], 2
    for arch in design.architectures:
        n = sum(1 for a, _ in design.cells if a == arch)
        architectures.append((arch, n))
        rules.append((column_index, column_index + n - 1))
        column_index += n
    coverage = results.coverage
    return {"cells": cells, "panels": panels, "architectures": architectures, "rules": rules,
            "ncols": 1 + len(cells), "quantity": word, "unit": unit,
            "energy_measured": column == "energy_j",
            "not_measured_reason": None if coverage is None or coverage.energy.measured
            else coverage.energy.reason}


def cells_context(results: Results, design: Design) -> dict:
    """One row per (architecture, dataset, phase): spreads, intervals, tests, accuracy."""
    acc = results.accuracy_spreads.set_index(["architecture", "dataset"])
    pw = results.pairwise
    rows = []
    for _, s in results.spreads.iterrows():
        key = f"{s['architecture']}/{s['dataset']}/{s['phase']}"
        tests = pw[(pw["architecture"] == s["architecture"]) & (pw["dataset"] == s["dataset"])
                   & (pw["phase"] == s["phase"])]
        rows.append({
            "architecture": s["architecture"], "dataset": s["dataset"], "phase": s["phase"],
            "spread": Number(s["spread"], 2, f"spread of {key}"),
            "low": Number(s["spread_low"], 2, f"bootstrap lower end of the spread of {key}"),
            "high": Number(s["spread_high"], 2, f"bootstrap upper end of the spread of {key}"),
            # a design with fewer than two control-group ecosystems has no control spread
            "control": Number(s["control_spread"], 2, f"control-group spread of {key}")
            if len(design.control_group) >= 2 else None,
            # None: the phase's blocks are too short to rank its stacks (printed as --)
            "cheapest": s["cheapest"] if s["names_cheapest"] else None,
            "most_expensive": s["most_expensive"] if s["names_cheapest"] else None,
            "uncorrected": Number(int((tests["p"] < design.alpha).sum()), 0, f"p<alpha count of {key}"),
            "pairs": Number(len(tests), 0, f"comparisons in {key}"),
            "survive": Number(int(tests["survives"].sum()), 0, f"Holm survivors of {key}"),
            "accuracy_pp": Number(acc.loc[(s["architecture"], s["dataset"]), "spread_pp"], 1,
                                  f"final-accuracy spread of {s['architecture']}/{s['dataset']}"),
        })
    return {"rows": rows, "control_group": len(design.control_group) >= 2,
            "energy_measured": results.column == "energy_j",
            "confidence_pct": f"{100 * design.bootstrap_confidence:g}"}


def utilisation_context(results: Results, design: Design) -> dict:
    """Median GPU and CPU utilisation per stack and architecture, both phases, with the runs
    the sampler covered in each."""
    if results.utilisation_by_architecture is None:
        raise MissingValue("the utilisation per stack and architecture was not computed")
    frame = results.utilisation_by_architecture.set_index(["ecosystem", "architecture", "phase"])
    devices = [(column, device) for column, device in (("gpu_utilization_pct", "GPU"),
                                                       ("cpu_utilization_pct", "CPU"))
               if column in frame.columns]
    rows = []
    for eco in design.ecosystems:
        for arch in design.architectures:
            row: dict = {"ecosystem": eco, "architecture": arch, "phases": []}
            for phase in PHASES:
                v = frame.loc[(eco, arch, phase)]
                key = f"{eco}/{arch}/{phase}"
                row["phases"].append({
                    # "--": the phase's blocks are shorter than the sampler's interval
                    "values": [Number(v[column], 0, f"median {device} utilisation of {key}")
                               if v[column] == v[column] else "--" for column, device in devices],
                    "runs": Number(v["runs"], 0, f"runs sampled in {key}")})
            rows.append(row)
    coverage = results.coverage
    gpu_reason = None if coverage is None or coverage.gpu_utilisation.measured \
        else coverage.gpu_utilisation.how
    return {"rows": rows, "phases": list(PHASES), "devices": [d for _, d in devices],
            "gpu_not_measured_reason": gpu_reason,
            "unsampled": [(p, results.unsampled[p]) for p in PHASES if p in results.unsampled]}


#: Generated table files and the functions that build their contexts.
TABLES = {"table-energy.tex": energy_context, "table-cells.tex": cells_context,
          "table-utilisation.tex": utilisation_context}
