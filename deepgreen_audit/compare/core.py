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
  or ``no-band`` (no control stack to judge it against).
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
from deepgreen_audit.analysis.data import (
    PHASES,
    REQUIRED_COLUMNS,
    CampaignTables,
    Design,
    typed_columns,
)
from deepgreen_audit.analysis.energy import phase_totals
from deepgreen_audit.audit.context import json_records
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.spec import RECIPE_SECTIONS, load_spec

#: The version of the JSON document `Comparison.to_dict` returns.
SCHEMA = "deepgreen-compare/1"
#: Metric name -> phase-total column whose ratio B/A is reported.
METRICS: dict[str, str] = {"energy": "energy_j", "duration": "duration_s"}
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
VERDICTS = ("beyond", "partly", "within", "no-band")
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

    @property
    def stacks(self) -> set[str]:
        return set(self.totals["ecosystem"])

    def summary(self) -> dict:
        """The side as the JSON document and the text report name it."""
        return {"path": self.path, "title": self.title, "synthetic": self.synthetic,
                "scope": self.scope, "runs": self.runs,
                "configurations": len(self.totals.groupby(_KEYS))}


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
    notes: list[str] = field(default_factory=list)

    def band(self, phase: str, metric: str) -> Band | None:
        """The whole control group's band of `phase` and `metric` (None: no control stack)."""
        return next((b for b in self.drift if (b.phase, b.metric) == (phase, metric)), None)

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
                recorded=_recorded(package))


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


def ratios(a: Side, b: Side, stacks: Sequence[str], design: Design) -> pd.DataFrame:
    """One row per configuration both packages hold: runs per side and, per metric, the
    ratio B/A of the medians with its bootstrap interval."""
    rows = []
    # iter(): a GroupBy has a `keys` attribute, which dict() would take for a mapping's
    groups_a = dict(iter(a.totals.groupby(_KEYS)))
    groups_b = dict(iter(b.totals.groupby(_KEYS)))
    order = {s: i for i, s in enumerate(stacks)}
    keys = sorted((k for k in set(groups_a) & set(groups_b) if k[0] in order),
                  key=lambda k: (order[k[0]], k[1], k[2], PHASES.index(k[3])))
    for key in keys:
        row: dict = dict(zip(_KEYS, key))
        for metric, column in METRICS.items():
            x = groups_a[key][column].dropna().to_numpy(dtype=float)
            y = groups_b[key][column].dropna().to_numpy(dtype=float)
            row.setdefault("n_a", len(x))
            row.setdefault("n_b", len(y))
            if len(x) == 0 or len(y) == 0:
                row.update({f"{metric}_ratio": np.nan, f"{metric}_low": np.nan,
                            f"{metric}_high": np.nan})
                continue
            low, high = stats.bootstrap_interval(
                _median_ratio, [x, y], seed=pair_seed(design, "compare", metric, *key),
                n_resamples=design.bootstrap_resamples, confidence=design.bootstrap_confidence)
            row.update({f"{metric}_ratio": float(np.median(y) / np.median(x)),
                        f"{metric}_low": low, f"{metric}_high": high})
        rows.append(row)
    columns = [*_KEYS, "n_a", "n_b"] + [f"{m}_{p}" for m in METRICS
                                         for p in ("ratio", "low", "high")]
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
                judged = rows[rows[f"{metric}_beyond"].notna()]
                hits = int(judged[f"{metric}_beyond"].astype(bool).sum())
                verdict = ("no-band" if judged.empty else "beyond" if hits == len(rows)
                           else "partly" if hits else "within")
                verdicts.append({"stack": stack, "phase": phase, "metric": metric,
                                 "control": stack in control, "configurations": len(rows),
                                 "beyond": hits,
                                 "ratio_min": float(rows[f"{metric}_ratio"].min()),
                                 "ratio_max": float(rows[f"{metric}_ratio"].max()),
                                 "verdict": verdict})
    columns = ["stack", "phase", "metric", "control", "configurations", "beyond", "ratio_min",
               "ratio_max", "verdict"]
    return table, bands, pd.DataFrame(verdicts, columns=columns)


# ---------------------------------------------------------------- the comparison


def compare_packages(a_location: str | Path, b_location: str | Path,
                     control: Sequence[str] | None = None,
                     progress: Callable[[str], None] | None = None) -> Comparison:
    """Compare package B with package A (the baseline); see the module docstring.

    Both are validated first; the same package given twice, a control stack that one of
    them lacks, and two packages without a stack in common are UserErrors."""
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
    if not stacks:
        raise UserError("the two packages have no stack in common, so nothing can be compared",
                        path=package_b.descriptor_path, code="usage-error")
    notes = []
    unchanged = unchanged_stacks(a, b, stacks)
    if control:
        named = list(dict.fromkeys(control))
        missing = [s for s in named if s not in stacks]
        if missing:
            raise UserError(f"--control names {', '.join(missing)}, not a stack both packages "
                            f"hold ({', '.join(stacks)})", field="--control", code="usage-error")
        changed = [s for s in named if s not in unchanged]
        if changed:
            notes.append(f"control stack(s) {', '.join(changed)} recorded a changed precision "
                         "policy or version; they were kept in the control group as named")
        chosen, rule = tuple(s for s in stacks if s in named), "named"
    else:
        chosen, rule = tuple(unchanged), "unchanged"
    if not chosen:
        notes.append("no control stack: every stack recorded a changed precision policy or "
                     "version, so there is no drift band to judge against")
    say(f"bootstrapping ratios ({design.bootstrap_resamples} resamples per interval)")
    with np.errstate(divide="ignore", invalid="ignore"):
        table = ratios(a, b, stacks, design)
    table, bands, verdicts = judge(table, stacks, chosen)
    return Comparison(a=a, b=b, differences=differences(a, b, stacks), stacks=stacks,
                      control=chosen, control_rule=rule, confidence=design.bootstrap_confidence,
                      resamples=design.bootstrap_resamples, configurations=table, drift=bands,
                      verdicts=verdicts, notes=notes)
