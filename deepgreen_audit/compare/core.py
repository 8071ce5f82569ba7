"""The comparison of two packages: what differs, the ratios B/A, and the control group's drift.

Definitions (docs/compare.md states them for readers):

* A *configuration* is (ecosystem, architecture, dataset, phase), as the analysis groups
  phase energies (`analysis.energy.phase_totals`: a completed run's blocks of one phase,
  summed, the warm-up rule of `[analysis] warmup_epochs_excluded` applied).  Only the
  configurations both packages hold are compared; the others are scope differences.
* Its *ratio* for a metric (energy: ``energy_j``; duration: ``duration_s``) is the median over
  B's runs over the median over A's runs, with a percentile bootstrap interval that resamples
  each package's runs on its own (`analysis.stats.bootstrap_interval`, the specification's
  resamples and confidence, a seed per configuration and metric derived from the master seed
  as the analysis derives its own, so the output is the same on every run).
* The *control group* is the stacks the user names as unchanged (``--control``) or, by
  default, every stack both packages hold whose recorded precision policy, TF32 and cuDNN
  state, device, framework, framework version and backend (`STACK_RECORDS`) are the same in
  both.
* The *drift band* of a phase and metric is the range the control configurations' ratio
  intervals cover: from the lowest lower end to the highest upper end.  A configuration lies
  *beyond the drift* when its whole interval lies outside the band of its phase and metric.
  A stack of the control group is judged against the band of the other control stacks
  (leave one out), so that it never vouches for itself.  Per stack, phase and metric the
  verdict is ``beyond`` (every configuration beyond), ``partly`` (some), ``within`` (none),
  ``no-band`` (no control stack to judge it against), or ``not-compared`` (no configuration
  of the stack in that phase has the metric in both packages; `reason` says why).
* A metric a package did not measure is not compared, and every place its number would stand
  says so with the reason the package records (`blocks.energy_missing_reason`, the
  descriptor's `measured.counters_missing`): counter energy may be missing (a host without
  RAPL or NVML), the durations never are (the harness's clock times every block), so they are
  still compared, and the *primary* metric the summaries judge is energy where any
  configuration has an energy ratio, else duration, named as such.
* Two packages that share no configuration are still compared: what differs between them is
  reported, and a note says in words that no ratio exists and on which axis (stack,
  architecture, dataset) they do not meet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.comparisons import pair_seed
from deepgreen_audit.analysis.coverage import Quantity, energy_coverage
from deepgreen_audit.analysis.data import (
    PHASES,
    REQUIRED_COLUMNS,
    CampaignTables,
    Design,
    MissingValue,
    typed_columns,
)
from deepgreen_audit.analysis.energy import phase_totals
from deepgreen_audit.columnar.evidence import json_records
from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.spec import RECIPE_SECTIONS, load_spec

#: The version of the JSON document `Comparison.to_dict` returns.
SCHEMA = "deepgreen-compare/2"
#: Metric name -> phase-total column whose ratio B/A is reported.
METRICS: dict[str, str] = {"energy": "energy_j", "duration": "duration_s"}
#: Axes of a configuration besides its phase, with the words the notes use for them.
AXES: dict[str, str] = {"ecosystem": "stack", "architecture": "architecture",
                        "dataset": "dataset"}
#: Runs-table columns that record the specification a run followed.
SPEC_COLUMNS: tuple[str, ...] = (*(c for cols in RECIPE_SECTIONS.values() for c in cols),
                                 "tf32_enabled", "cudnn_enabled", "device")
#: Environment columns that are bookkeeping, not environment.
_ENV_SKIPPED = ("run_id", "missing_reason", "counters_missing_reason")
#: What makes a stack "unchanged" by default (the control group): these recorded values.
STACK_RECORDS: dict[str, tuple[str, ...]] = {
    "runs": ("precision_policy", "tf32_enabled", "cudnn_enabled", "device"),
    "environment": ("framework", "framework_version", "framework_backend"),
}
#: Verdicts of a stack, per phase and metric, against the drift band.
VERDICTS = ("beyond", "partly", "within", "no-band", "not-compared")
_KEYS = ["ecosystem", "architecture", "dataset", "phase"]


@dataclass(frozen=True)
class Side:
    """One of the two packages: where it is, what it declares, and what it recorded."""

    label: str
    path: str
    title: str
    synthetic: bool
    scope: dict | None
    runs: int
    totals: pd.DataFrame
    #: {table: {column: {ecosystem: distinct cell texts, sorted}}}
    recorded: dict[str, dict[str, dict[str, tuple[str, ...]]]]
    #: whether its blocks hold counter energy, and why not (`analysis.coverage`)
    energy: Quantity

    @property
    def stacks(self) -> set[str]:
        return set(self.totals["ecosystem"])

    def summary(self) -> dict:
        """The side as the JSON document and the text report name it."""
        return {"path": self.path, "title": self.title, "synthetic": self.synthetic,
                "scope": self.scope, "runs": self.runs,
                "configurations": len(self.totals.groupby(_KEYS)),
                "energy_measured": self.energy.measured,
                "energy_missing_reason": None if self.energy.measured else self.energy.how}


@dataclass(frozen=True)
class Difference:
    """One recorded value that differs: in which section, which item, for which stacks."""

    section: str
    item: str
    stacks: tuple[str, ...]
    a: str
    b: str

    def to_dict(self) -> dict:
        return {"section": self.section, "item": self.item, "stacks": list(self.stacks),
                "a": self.a, "b": self.b}


@dataclass(frozen=True)
class Band:
    """The control group's drift band of one phase and metric."""

    phase: str
    metric: str
    low: float
    high: float
    stacks: tuple[str, ...]
    configurations: int

    def to_dict(self) -> dict:
        return {"phase": self.phase, "metric": self.metric, "low": self.low, "high": self.high,
                "stacks": list(self.stacks), "configurations": self.configurations}


@dataclass
class Comparison:
    """Everything `deepgreen compare` reports (see the module docstring for definitions)."""

    a: Side
    b: Side
    differences: list[Difference]
    stacks: tuple[str, ...]
    control: tuple[str, ...]
    control_rule: str
    confidence: float
    resamples: int
    #: one row per configuration: keys, n_a, n_b, and per metric the ratio, its interval,
    #: the band it was judged against and whether it lies beyond it
    configurations: pd.DataFrame
    drift: list[Band]
    #: one row per (stack, phase, metric): configurations, beyond, ratio range, verdict
    verdicts: pd.DataFrame
    #: per metric: why the packages cannot compare it at all (None: they can)
    not_compared: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def shared(self) -> bool:
        """Whether the packages share a configuration, so that any ratio exists."""
        return not self.configurations.empty

    @property
    def compared_metrics(self) -> tuple[str, ...]:
        """The metrics with a ratio in at least one configuration."""
        return tuple(m for m in METRICS if self.configurations[f"{m}_ratio"].notna().any())

    @property
    def primary(self) -> str:
        """The metric the summaries judge: energy where it was compared, else duration."""
        return "energy" if "energy" in self.compared_metrics else "duration"

    def band(self, phase: str, metric: str) -> Band | None:
        """The whole control group's band of `phase` and `metric` (None: see `no_band`)."""
        return next((b for b in self.drift if (b.phase, b.metric) == (phase, metric)), None)

    def no_band(self, phase: str, metric: str) -> str:
        """Why `phase` and `metric` have no drift band, in words."""
        if self.not_compared.get(metric):
            return f"{metric} is not compared: {self.not_compared[metric]}"
        if not self.shared:
            return "the packages share no configuration"
        if not self.control:
            return f"no control stack ({self.no_control()})"
        return (f"no configuration of the control group ({', '.join(self.control)}) has a "
                f"{phase} {metric} ratio in both packages")

    def no_control(self) -> str:
        """Why the control group is empty, in words."""
        if not self.stacks:
            return "the packages hold no stack in common"
        return ("every stack both packages hold recorded a changed precision policy, device or "
                "framework version")

    def beyond_stacks(self, metric: str = "energy") -> list[str]:
        """Stacks whose `metric` ratio lies beyond the drift in every configuration of at
        least one phase."""
        v = self.verdicts
        hit = v[(v["metric"] == metric) & (v["verdict"] == "beyond")]["stack"]
        return [s for s in self.stacks if s in set(hit)]

    def to_dict(self) -> dict:
        """The JSON document (`SCHEMA`): keys and their order are stable."""
        return {
            "schema": SCHEMA,
            "a": self.a.summary(), "b": self.b.summary(),
            "differences": [d.to_dict() for d in self.differences],
            "stacks": list(self.stacks),
            "control": {"stacks": list(self.control), "rule": self.control_rule},
            "bootstrap": {"confidence": self.confidence, "resamples": self.resamples},
            "metrics": {m: {"compared": m in self.compared_metrics,
                            "not_compared_reason": self.not_compared.get(m)
                            or (None if m in self.compared_metrics
                                else "the packages share no configuration")}
                        for m in METRICS},
            "primary": self.primary,
            "drift": [b.to_dict() for b in self.drift],
            "configurations": json_records(self.configurations),
            "verdicts": json_records(self.verdicts),
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------- reading


def open_validated(location: str | Path, label: str) -> Package:
    """The package at `location`, refused unless it is a replication package that validates
    (as `export` and `restore` refuse one)."""
    from deepgreen_audit.package.dispatch import check_verb, validate_package

    package = Package.open(location)
    check_verb(location, "compare")
    validate_package(location).refuse_invalid(f"package {label}")
    return package


def _recorded(package: Package) -> dict[str, dict[str, dict[str, tuple[str, ...]]]]:
    """Per table and column, each ecosystem's distinct cell texts (canonical, so equal values
    are equal texts)."""
    runs = package.text("runs").columns()
    stack_of = dict(zip(runs["run_id"], runs["ecosystem"]))
    env = package.text("environment").columns()
    env_columns = [c for c in load_schema("environment").field_names if c not in _ENV_SKIPPED]
    out: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {"runs": {}, "environment": {}}
    for table, columns, cells, owners in (
            ("runs", SPEC_COLUMNS, runs, runs["ecosystem"]),
            ("environment", tuple(env_columns), env, [stack_of[r] for r in env["run_id"]])):
        for column in columns:
            values: dict[str, set[str]] = {}
            for stack, cell in zip(owners, cells[column]):
                values.setdefault(stack, set()).add(cell)
            out[table][column] = {s: tuple(sorted(v)) for s, v in values.items()}
    return out


def read_side(package: Package, label: str, design: Design) -> Side:
    """What the comparison reads of one package: its phase totals and recorded values."""
    tables = CampaignTables(
        runs=typed_columns(package, "runs", REQUIRED_COLUMNS["runs"]),
        blocks=typed_columns(package, "blocks", REQUIRED_COLUMNS["blocks"]),
        samples=pd.DataFrame(), environment=pd.DataFrame())
    scope = package.descriptor.get("scope")
    return Side(label=label, path=str(package.descriptor_path),
                title=str(package.descriptor.get("title", package.descriptor.get("name", ""))),
                synthetic=package.synthetic, scope=scope if isinstance(scope, dict) else None,
                runs=len(tables.runs), totals=phase_totals(tables, design),
                recorded=_recorded(package), energy=_energy(package, tables.blocks))


def _energy(package: Package, blocks: pd.DataFrame) -> Quantity:
    """Whether the package measured counter energy, and why not in its own words."""
    measured = package.descriptor.get("measured")
    try:
        return energy_coverage(blocks, measured if isinstance(measured, dict) else None)
    except MissingValue:  # neither energy nor a reason: say that, rather than refuse
        return Quantity("energy at the measurement boundary", False,
                        "its blocks record no counter energy and no reason why "
                        "(blocks.energy_missing_reason is empty)")


# ---------------------------------------------------------------- differences


def _text(values: Sequence[str] | None) -> str:
    if values is None:
        return "(absent)"
    return ";".join(v if v != "" else "(empty)" for v in values) or "(none)"


def differences(a: Side, b: Side, stacks: Sequence[str]) -> list[Difference]:
    """What differs between the two packages: the recorded specification (runs' recipe,
    precision, device) and environment per stack, the declared scope and the stacks and
    configurations each holds.  One entry per item and change, naming its stacks."""
    found: list[Difference] = []
    for section, table in (("specification", "runs"), ("environment", "environment")):
        for column, per_a in a.recorded[table].items():
            per_b = b.recorded[table][column]
            changes: dict[tuple[str, str], list[str]] = {}
            for stack in stacks:
                if per_a.get(stack) != per_b.get(stack):
                    changes.setdefault((_text(per_a.get(stack)), _text(per_b.get(stack))),
                                       []).append(stack)
            found.extend(Difference(section, column, tuple(s), va, vb)
                         for (va, vb), s in changes.items())
    scope_a, scope_b = a.scope or {}, b.scope or {}
    for key in sorted(set(scope_a) | set(scope_b)):
        if scope_a.get(key) != scope_b.get(key):
            found.append(Difference("scope", f"scope.{key}", (),
                                    _scope_text(scope_a.get(key)), _scope_text(scope_b.get(key))))
    only_a, only_b = sorted(a.stacks - b.stacks), sorted(b.stacks - a.stacks)
    if only_a or only_b:
        found.append(Difference("scope", "stacks", (), ";".join(only_a) or "(none)",
                                ";".join(only_b) or "(none)"))
    keys_a = {tuple(k) for k in a.totals[_KEYS[:3]].drop_duplicates().to_numpy()}
    keys_b = {tuple(k) for k in b.totals[_KEYS[:3]].drop_duplicates().to_numpy()}
    common = set(stacks)
    lone_a = sorted(".".join(k) for k in keys_a - keys_b if k[0] in common)
    lone_b = sorted(".".join(k) for k in keys_b - keys_a if k[0] in common)
    if lone_a or lone_b:
        found.append(Difference("scope", "configurations", (), ";".join(lone_a) or "(none)",
                                ";".join(lone_b) or "(none)"))
    return found


def _scope_text(value: object) -> str:
    if value is None:
        return "(not declared)"
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return str(value)


def unchanged_stacks(a: Side, b: Side, stacks: Sequence[str]) -> list[str]:
    """The stacks whose `STACK_RECORDS` are the same in both packages (the default control
    group)."""
    return [s for s in stacks
            if all(a.recorded[t][c].get(s) == b.recorded[t][c].get(s)
                   for t, columns in STACK_RECORDS.items() for c in columns)]


# ---------------------------------------------------------------- ratios and drift


def _median_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Median of B's resamples over median of A's, per resample (for `bootstrap_interval`)."""
    return np.median(b, axis=1) / np.median(a, axis=1)


def not_compared(a: Side, b: Side, metric: str) -> str | None:
    """Why `metric` cannot be compared in any configuration, in words naming the package(s)
    that lack it and the reason each records (None: it can be, where both hold it)."""
    if metric != "energy":
        return None  # the harness's clock times every block of every collection
    lacking = [side for side in (a, b) if not side.energy.measured]
    if not lacking:
        return None
    if len(lacking) == 1:
        return f"{lacking[0].label} measured no energy ({lacking[0].energy.reason})"
    if a.energy.reason == b.energy.reason:
        return f"neither package measured energy ({a.energy.reason})"
    return (f"neither package measured energy (A: {a.energy.reason}; "
            f"B: {b.energy.reason})")


def no_shared_configuration(a: Side, b: Side) -> str:
    """The note that says in words that A and B share no configuration, and where they part."""
    empty = [side.label for side in (a, b) if side.totals.empty]
    if empty:
        return (f"{' and '.join(empty)} hold{'s' if len(empty) == 1 else ''} no completed run, "
                "so the packages share no configuration and no ratio B/A exists")
    apart = []
    for column, word in AXES.items():
        held_a, held_b = sorted(set(a.totals[column])), sorted(set(b.totals[column]))
        if not set(held_a) & set(held_b):
            apart.append(f"no {word} (A: {', '.join(held_a)}; B: {', '.join(held_b)})")
    why = (f"they have {' and '.join(apart)} in common" if apart else
           "every (stack, architecture, dataset) one of them holds, the other lacks")
    return (f"A and B share no configuration, so no ratio B/A exists: {why}; only what differs "
            "between them is reported")


def ratios(a: Side, b: Side, stacks: Sequence[str], design: Design,
           missing: dict[str, str | None] | None = None) -> pd.DataFrame:
    """One row per configuration both packages hold: completed runs per side and, per metric,
    the ratio B/A of the medians with its bootstrap interval, or (`{metric}_not_compared`) why
    there is none: `missing`'s package-level reason, else the side whose runs lack it."""
    missing = missing or {}
    rows = []
    # iter(): a GroupBy has a `keys` attribute, which dict() would take for a mapping's
    groups_a = dict(iter(a.totals.groupby(_KEYS)))
    groups_b = dict(iter(b.totals.groupby(_KEYS)))
    order = {s: i for i, s in enumerate(stacks)}
    keys = sorted((k for k in set(groups_a) & set(groups_b) if k[0] in order),
                  key=lambda k: (order[k[0]], k[1], k[2], PHASES.index(k[3])))
    for key in keys:
        row: dict = {**dict(zip(_KEYS, key)), "n_a": len(groups_a[key]), "n_b": len(groups_b[key])}
        for metric, column in METRICS.items():
            x = groups_a[key][column].dropna().to_numpy(dtype=float)
            y = groups_b[key][column].dropna().to_numpy(dtype=float)
            lacking = [label for label, values in (("A", x), ("B", y)) if len(values) == 0]
            if lacking or (x <= 0).any():
                why = missing.get(metric) or (
                    f"no completed run of {' or '.join(lacking)} has {metric} in every block "
                    "of this phase" if lacking else
                    f"a run of A has {metric} 0, so a ratio B/A can be undefined")
                row.update({f"{metric}_ratio": np.nan, f"{metric}_low": np.nan,
                            f"{metric}_high": np.nan, f"{metric}_not_compared": why})
                continue
            # medians beyond a float's range (1e300 / 1e-300) overflow to inf: not a ratio, so
            # not warned about here but said below as the reason there is none
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                low, high = stats.bootstrap_interval(
                    _median_ratio, [x, y], seed=pair_seed(design, "compare", metric, *key),
                    n_resamples=design.bootstrap_resamples,
                    confidence=design.bootstrap_confidence)
                ratio = float(np.median(y) / np.median(x))
            if not all(np.isfinite([ratio, low, high])):
                row.update({f"{metric}_ratio": np.nan, f"{metric}_low": np.nan,
                            f"{metric}_high": np.nan, f"{metric}_not_compared": (
                                f"the ratio B/A of the medians ({np.median(y):g} / "
                                f"{np.median(x):g}) or its interval is beyond a float's range")})
                continue
            row.update({f"{metric}_ratio": ratio, f"{metric}_low": low, f"{metric}_high": high,
                        f"{metric}_not_compared": None})
        rows.append(row)
    columns = [*_KEYS, "n_a", "n_b"] + [f"{m}_{p}" for m in METRICS
                                         for p in ("ratio", "low", "high", "not_compared")]
    return pd.DataFrame(rows, columns=columns)


def _band(table: pd.DataFrame, phase: str, metric: str,
          control: Sequence[str]) -> tuple[float, float, int] | None:
    """(low, high, configurations) of the control configurations' intervals, or None."""
    rows = table[(table["phase"] == phase) & table["ecosystem"].isin(list(control))]
    rows = rows.dropna(subset=[f"{metric}_low", f"{metric}_high"])
    if rows.empty:
        return None
    return float(rows[f"{metric}_low"].min()), float(rows[f"{metric}_high"].max()), len(rows)


def judge(table: pd.DataFrame, stacks: Sequence[str], control: Sequence[str]
          ) -> tuple[pd.DataFrame, list[Band], pd.DataFrame]:
    """The configurations with the band each was judged against and whether it lies beyond
    it; the control group's bands; and each stack's verdict per phase and metric."""
    table = table.copy()
    bands = []
    for phase in PHASES:
        for metric in METRICS:
            found = _band(table, phase, metric, control)
            if found:
                present = sorted(set(table[(table["phase"] == phase)
                                           & table["ecosystem"].isin(list(control))]["ecosystem"]),
                                 key=list(stacks).index)
                bands.append(Band(phase, metric, found[0], found[1], tuple(present), found[2]))
    verdicts = []
    for metric in METRICS:
        lows: list[float] = []
        highs: list[float] = []
        beyond: list[bool | None] = []
        for _, row in table.iterrows():
            others = [s for s in control if s != row["ecosystem"]]
            found = _band(table, row["phase"], metric, others)
            low, high = (found[0], found[1]) if found else (np.nan, np.nan)
            lows.append(low)
            highs.append(high)
            if found is None or not np.isfinite(row[f"{metric}_low"]):
                beyond.append(None)
            else:
                beyond.append(bool(row[f"{metric}_low"] > high or row[f"{metric}_high"] < low))
        table[f"{metric}_band_low"] = lows
        table[f"{metric}_band_high"] = highs
        table[f"{metric}_beyond"] = pd.Series(beyond, index=table.index, dtype=object)
    for stack in stacks:
        for phase in PHASES:
            rows = table[(table["ecosystem"] == stack) & (table["phase"] == phase)]
            if rows.empty:
                continue
            for metric in METRICS:
                verdicts.append(_verdict(rows, metric, stack, phase, control))
    columns = ["stack", "phase", "metric", "control", "configurations", "beyond", "ratio_min",
               "ratio_max", "verdict", "reason"]
    return table, bands, pd.DataFrame(verdicts, columns=columns)


def _verdict(rows: pd.DataFrame, metric: str, stack: str, phase: str,
             control: Sequence[str]) -> dict:
    """One stack's verdict in one phase and metric over its configurations `rows`, with the
    reason where it has no ratio (`not-compared`) or nothing to be judged against
    (`no-band`)."""
    compared = rows[rows[f"{metric}_ratio"].notna()]
    judged = rows[rows[f"{metric}_beyond"].notna()]
    hits = int(judged[f"{metric}_beyond"].astype(bool).sum())
    reason = None
    if compared.empty:
        verdict = "not-compared"
        reason = str(rows[f"{metric}_not_compared"].dropna().iloc[0])
    elif judged.empty:
        verdict = "no-band"
        others = [s for s in control if s != stack]
        reason = (f"no other control stack ({', '.join(others)}) has a {phase} {metric} ratio"
                  if others else "no other control stack to judge it against")
    else:
        verdict = ("beyond" if hits == len(rows) else "partly" if hits else "within")
    return {"stack": stack, "phase": phase, "metric": metric, "control": stack in control,
            "configurations": len(rows), "beyond": hits,
            "ratio_min": float(compared[f"{metric}_ratio"].min()) if len(compared) else None,
            "ratio_max": float(compared[f"{metric}_ratio"].max()) if len(compared) else None,
            "verdict": verdict, "reason": reason}


# ---------------------------------------------------------------- the comparison


def compare_packages(a_location: str | Path, b_location: str | Path,
                     control: Sequence[str] | None = None,
                     progress: Callable[[str], None] | None = None) -> Comparison:
    """Compare package B with package A (the baseline); see the module docstring.

    Both are validated first; the same package given twice and a control stack that one of
    them lacks are UserErrors.  Two packages that share no configuration are compared all the
    same: what differs, and a note that says where they part."""
    say = progress or (lambda _line: None)
    package_a = open_validated(a_location, "A")
    package_b = open_validated(b_location, "B")
    if os.path.realpath(package_a.descriptor_path) == os.path.realpath(package_b.descriptor_path):
        raise UserError("A and B are the same package; compare two packages (a copy of one "
                        "compares equal)", path=package_b.descriptor_path, code="usage-error")
    say("validated both packages")
    spec = load_spec()
    design = Design.from_spec(spec)
    a, b = read_side(package_a, "A", design), read_side(package_b, "B", design)
    order = list(spec["S6_replication"]["ecosystems"])
    rank = {s: i for i, s in enumerate(order)}
    stacks = tuple(sorted(a.stacks & b.stacks, key=lambda s: (rank.get(s, len(rank)), s)))
    notes = []
    unchanged = unchanged_stacks(a, b, stacks)
    if control:
        named = list(dict.fromkeys(control))
        refuse_unknown(named, stacks, "a stack both packages hold", field="--control")
        changed = [s for s in named if s not in unchanged]
        if changed:
            notes.append(f"control stack(s) {', '.join(changed)} recorded a changed precision "
                         "policy or version; they were kept in the control group as named")
        chosen, rule = tuple(s for s in stacks if s in named), "named"
    else:
        chosen, rule = tuple(unchanged), "unchanged"
    missing = {metric: not_compared(a, b, metric) for metric in METRICS}
    say(f"bootstrapping ratios ({design.bootstrap_resamples} resamples per interval)")
    with np.errstate(divide="ignore", invalid="ignore"):
        table = ratios(a, b, stacks, design, missing)
    if table.empty:
        notes.insert(0, no_shared_configuration(a, b))
    else:
        if not chosen:
            notes.append("no control stack: every stack both packages hold recorded a changed "
                         "precision policy, device or framework version, so there is no drift "
                         "band to judge against")
        if table["energy_ratio"].isna().all():
            why = missing["energy"] or "no configuration has it in both packages"
            notes.insert(0, f"energy is not compared: {why}; the durations, which every "
                            "collection measures, are compared, and the verdicts judge them")
    table, bands, verdicts = judge(table, stacks, chosen)
    return Comparison(a=a, b=b, differences=differences(a, b, stacks), stacks=stacks,
                      control=chosen, control_rule=rule, confidence=design.bootstrap_confidence,
                      resamples=design.bootstrap_resamples, configurations=table, drift=bands,
                      verdicts=verdicts, not_compared=missing, notes=notes)
