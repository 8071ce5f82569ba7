"""The published per-API summaries, recomputed from raw records and compared.

Aggregation follows FECoM's `fecom/experiment/analysis.py`
(`init_project_energy_data`, `create_summary`,
`prepare_total_energy_and_size_from_project`):

* per experiment, records are keyed by signature (data-size: signature_i by
  position); a signature that repeats inside one experiment keeps its first
  position and its *last* record (FECoM builds a dict);
* a call listed in skip_calls.json, or whose execution window is empty in
  any domain, is left out of that experiment;
* a function is summarised only if it has data in every experiment of its
  project; rows keep first-seen order; the name drops bracketed arguments;
* a summary cell is the mean (or median) over experiments of the per-call
  figure; "stdev power" / "avg power" are over window samples in the
  source's unit (J per sample for CPU/RAM, W for GPU).

Published files understood: `<domain>_summary_<mean|median>.csv`
(create_summary, rounded to 2 decimals) and FECoM's `rq2_analysis.csv`
(full precision, one row per project and function).  A summary file is
compared, function by function, with the projects whose raw records came
from the same repository folder.  Every difference gets a reason
(`explain`); "unexplained" would be a defect of the recomputation.
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.greenlight.fecom import DomainFigures, call_figures, execution_time_s, has_energy_data
from deepgreen_audit.greenlight.records import CallRecord, function_name
from deepgreen_audit.package import paths

#: create_summary's columns: (published header, per-call figure); None = execution time.
SUMMARY_COLUMNS = (
    ("exec time (s)", None),
    ("total", "total_j"),
    ("total (normalised)", "total_normalised_j"),
    ("lag time (s)", "lag_time_s"),
    ("lag", "lag_j"),
    ("lag (normalised)", "lag_normalised_j"),
    ("total + lag (normalised)", "total_lag_normalised_j"),
    ("stdev power", "value_stdev"),
    ("avg power", "value_mean"),   # the median summary uses the median of value_median
)
MB_BYTES = 1_048_576
#: |recomputed - published| allowed for 2-decimal files: half a unit in the last place
#: plus float noise.
ROUNDED_TOLERANCE = 0.005 + 1e-6
#: relative (and absolute) tolerance for full-precision files: JSON float parsing differs
#: between pandas and Python in the last bits only.
FULL_PRECISION_RTOL = 1e-9
SUMMARY_FILE_RE = re.compile(r"(cpu|ram|gpu)_summary_(mean|median)\.csv\Z")
RQ2_FILE = "rq2_analysis.csv"


@dataclass
class FunctionSeries:
    """One function of one project: per-experiment figures, in experiment order."""

    key: str
    name: str
    execution_time_s: list[float] = field(default_factory=list)
    figures: list[dict[str, DomainFigures]] = field(default_factory=list)
    args_size_mb: list[float] = field(default_factory=list)

    def values(self, domain: str, attribute: str | None) -> list[float]:
        if attribute is None:
            return list(self.execution_time_s)
        out = []
        for figures in self.figures:
            value = getattr(figures[domain], attribute)
            out.append(math.nan if value is None else float(value))
        return out


@dataclass
class ProjectSummary:
    source: str
    experiment_kind: str
    project: str
    experiments: list[int]
    functions: list[FunctionSeries]
    left_out: dict[str, str]   # signature key -> why it is not summarised

    @property
    def label(self) -> str:
        return f"{self.source}/{self.experiment_kind}/{self.project}"


def project_summaries(records: list[CallRecord]) -> list[ProjectSummary]:
    """Recompute every project's per-function series from its records (FECoM's rules)."""
    groups: dict[tuple, list[CallRecord]] = {}
    for record in records:
        groups.setdefault((record.source, record.experiment_kind, record.project), []).append(record)
    out = []
    for (source, kind, project), group in groups.items():
        experiments = sorted({r.experiment for r in group})
        functions: dict[str, FunctionSeries] = {}
        left_out: dict[str, str] = {}
        for experiment in experiments:
            by_key: dict[str, CallRecord] = {}
            for record in sorted((r for r in group if r.experiment == experiment),
                                 key=lambda r: r.position):
                key = f"{record.api_call}_{record.position}" if kind == "data-size" else record.api_call
                by_key[key] = record
            for key, record in by_key.items():
                figures = call_figures(record)
                if record.in_skip_calls:
                    left_out[key] = "listed in skip_calls.json"
                    continue
                if not has_energy_data(figures):
                    left_out.setdefault(key, f"no sample inside its execution window in "
                                             f"experiment {experiment}")
                    continue
                series = functions.setdefault(key, FunctionSeries(key, function_name(key)))
                series.execution_time_s.append(execution_time_s(record))
                series.figures.append(figures)
                sizes = record.input_sizes
                series.args_size_mb.append(sum((sizes.get(k) or 0) / MB_BYTES
                                               for k in ("args_size", "kwargs_size")))
        complete = []
        for key, series in functions.items():
            if len(series.figures) == len(experiments):
                complete.append(series)
            else:
                left_out.setdefault(key, f"energy data in {len(series.figures)} of "
                                         f"{len(experiments)} experiments")
        out.append(ProjectSummary(source, kind, project, experiments, complete,
                                  {k: v for k, v in left_out.items()
                                   if k not in {s.key for s in complete}}))
    return out


def summary_rows(project: ProjectSummary, domain: str, statistic: str) -> list[dict]:
    """create_summary's rows (unrounded) for one domain and statistic, without the sum row."""
    aggregate = statistics.mean if statistic == "mean" else statistics.median
    rows = []
    for series in project.functions:
        row: dict[str, object] = {"function": series.name, "key": series.key}
        for header, attribute in SUMMARY_COLUMNS:
            if statistic == "median" and attribute == "value_mean":
                attribute = "value_median"
            row[header] = aggregate(series.values(domain, attribute))
        rows.append(row)
    return rows


# ---------------------------------------------------------------- comparison


@dataclass(frozen=True)
class RowComparison:
    published_file: str
    project: str
    function: str
    outcome: str                     # match | differs | absent
    published_row: int | None = None  # 1-based, header = row 1
    differences: tuple[str, ...] = ()
    reason: str = ""


@dataclass
class Comparison:
    rows: list[RowComparison] = field(default_factory=list)
    not_compared: dict[str, str] = field(default_factory=dict)   # file -> why

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.rows if r.outcome == outcome)

    def format_text(self, verbose: bool = False) -> str:
        lines = [f"published summaries: {self.count('match')} rows match, "
                 f"{self.count('differs')} differ, {self.count('absent')} absent from the file"]
        reasons: dict[str, int] = {}
        for r in self.rows:
            if r.outcome == "differs":
                reasons[r.reason] = reasons.get(r.reason, 0) + 1
        for reason, count in reasons.items():
            lines.append(f"  {count} differ because {reason}")
        for r in self.rows:
            if verbose and r.outcome != "match" or r.reason == REASON_UNEXPLAINED:
                lines.append(f"  [{r.outcome}] {r.published_file}: {r.project}: {r.function}: "
                             + "; ".join(r.differences) + (f" ({r.reason})" if r.reason else ""))
        for path, why in self.not_compared.items():
            lines.append(f"  [not compared] {path}: {why}")
        return "\n".join(lines)


#: Reasons a published row differs, in the order they are tried.
REASON_OTHER_RECORDS = ("the published row was computed from other raw records: its execution "
                        "time, which is end - start timestamps with no processing, differs")
REASON_GPU_METHOD = ("only GPU columns differ while run time, CPU, RAM and input size match to "
                     "1e-9: same raw records, GPU figures computed by an earlier FECoM GPU method "
                     "(not reproduced)")
REASON_UNEXPLAINED = "unexplained"


def explain(differences: tuple[str, ...]) -> str:
    """The reason for a differing row, from which columns differ."""
    columns = [d.split(":", 1)[0] for d in differences]
    if any(c in ("exec time (s)", "run time") for c in columns):
        return REASON_OTHER_RECORDS
    if all(c.startswith("GPU") for c in columns):
        return REASON_GPU_METHOD
    return REASON_UNEXPLAINED


def _close(ours: float, theirs: float, *, rounded: bool) -> bool:
    if math.isnan(ours) or math.isnan(theirs):
        return math.isnan(ours) and math.isnan(theirs)
    if rounded:
        return abs(ours - theirs) <= ROUNDED_TOLERANCE
    return math.isclose(ours, theirs, rel_tol=FULL_PRECISION_RTOL, abs_tol=FULL_PRECISION_RTOL)


def _number(text: str, path: Path, row: int, column: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{text!r} is not a number", path=path, row=row, field=column) from None


def read_published(path: Path) -> tuple[list[str], list[dict]]:
    reader = csv.DictReader(io.StringIO(paths.read_text(path), newline=""))
    return list(reader.fieldnames or []), list(reader)


def compare_summary_file(path: Path, label: str, projects: list[ProjectSummary],
                         comparison: Comparison) -> None:
    """Compare one create_summary file with the projects' recomputed rows."""
    named = SUMMARY_FILE_RE.match(path.name)
    assert named is not None  # the caller picks the files by this name
    domain, statistic = named.groups()
    header, published = read_published(path)
    missing = [h for h, _ in SUMMARY_COLUMNS if h not in header] + \
        ([] if "function" in header else ["function"])
    if missing:
        raise UserError(f"lacks columns {missing}", path=path, row=1)
    parsed = [(i + 2, row["function"], {h: _number(row[h], path, i + 2, h)
                                        for h, _ in SUMMARY_COLUMNS})
              for i, row in enumerate(published) if row["function"] != "method-level (sum)"]
    used: set[int] = set()
    for project in projects:
        for ours in summary_rows(project, domain, statistic):
            candidates = [(n, vals) for n, name, vals in parsed if name == ours["function"]]
            if not candidates:
                comparison.rows.append(RowComparison(label, project.label, ours["key"], "absent",
                                                     reason="no published row of this function"))
                continue
            scored = []
            for n, vals in candidates:
                diffs = tuple(f"{h}: ours {ours[h]:.4f}, published {vals[h]}"
                              for h, _ in SUMMARY_COLUMNS
                              if not _close(ours[h], vals[h], rounded=True))
                scored.append((len(diffs), n in used, n, diffs))
            scored.sort()
            ndiff, _, n, diffs = scored[0]
            if ndiff == 0:
                used.add(n)
                comparison.rows.append(RowComparison(label, project.label, ours["key"], "match", n))
            else:
                comparison.rows.append(RowComparison(label, project.label, ours["key"], "differs",
                                                     n, diffs, explain(diffs)))


RQ2_COLUMNS: dict[str, tuple[str | None, str, str | None]] = {  # column -> (domain or None, statistic, attribute)
    "run time": (None, "mean", None),
    "Args Size (mean)": ("args", "mean", None), "Args Size (median)": ("args", "median", None),
}
for _label, _domain in (("CPU", "cpu"), ("RAM", "ram"), ("GPU", "gpu")):
    for _stat in ("mean", "median", "max", "min"):
        RQ2_COLUMNS[f"{_label} ({_stat})"] = (_domain, _stat, "total_normalised_j")
_AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "mean": statistics.mean, "median": statistics.median, "max": max, "min": min}


def compare_rq2_file(path: Path, label: str, projects: list[ProjectSummary],
                     comparison: Comparison) -> None:
    """Compare FECoM's rq2_analysis.csv (full precision) with the method-level projects."""
    header, published = read_published(path)
    for required in ("Project Name", "function"):
        if required not in header:
            raise UserError(f"lacks column {required!r}", path=path, row=1)
    columns = [c for c in header if c in RQ2_COLUMNS]
    for project in projects:
        if project.experiment_kind != "method-level":
            continue
        rows = [(i + 2, r) for i, r in enumerate(published) if r["Project Name"] == project.project]
        if not rows:
            continue
        for series in project.functions:
            ours = {}
            for column in columns:
                domain, stat, attribute = RQ2_COLUMNS[column]
                values = (series.args_size_mb if domain == "args"
                          else series.values(domain or "cpu", attribute))
                ours[column] = _AGGREGATES[stat](values)
            candidates = [(n, r) for n, r in rows if r["function"] == series.name]
            if not candidates:
                comparison.rows.append(RowComparison(label, project.label, series.key, "absent",
                                                     reason="no published row of this function"))
                continue
            n, row = candidates[0]
            diffs = tuple(f"{c}: ours {ours[c]!r}, published {row[c]}" for c in columns
                          if not _close(ours[c], _number(row[c], path, n, c), rounded=False))
            comparison.rows.append(RowComparison(label, project.label, series.key,
                                                 "differs" if diffs else "match", n, diffs,
                                                 explain(diffs) if diffs else ""))


def compare_published(root: Path, records: list[CallRecord]) -> Comparison:
    """Find the published summaries under `root` and compare them with the recomputation.

    A file is compared with every project whose records came from the same
    repository folder (the first folder below `root`), function by function.
    """
    root = Path(root)
    projects = project_summaries(records)
    repository_of = {}
    for r in records:
        parts = Path(r.source_file or "").parts
        repository_of[(r.source, r.experiment_kind, r.project)] = parts[0] if len(parts) > 1 else ""
    comparison = Comparison()
    for path in sorted(root.rglob("*.csv")):
        rel = path.relative_to(root)
        is_summary = SUMMARY_FILE_RE.match(path.name) is not None
        if not is_summary and path.name != RQ2_FILE:
            continue
        repository = rel.parts[0] if len(rel.parts) > 1 else ""
        mine = [p for p in projects
                if repository_of[(p.source, p.experiment_kind, p.project)] == repository]
        if not mine:
            comparison.not_compared[rel.as_posix()] = "no raw records from the same repository folder"
            continue
        (compare_summary_file if is_summary else compare_rq2_file)(path, rel.as_posix(), mine,
                                                                   comparison)
    return comparison
