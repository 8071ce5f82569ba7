"""The analysis's view of a package: the design it expects and the typed tables it reads.

The *design* (ecosystems, architectures, datasets, phases, the LibTorch
control group, the CodeCarbon sampling interval, class counts) comes from the
experiment specification, never from the data: a configuration that the
specification plans and the package lacks is a missing value that stops the
render, not a row that silently drops out of a median.

Columns are read by name from the package's own header and typed with the
Table Schema, so a package that lacks a column the analysis needs is refused
with the table and column named (before anything is computed).
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import load_schema, pandera_schema, phases
from deepgreen_audit.spec import load_spec, master_seed

PHASES = phases()

#: What the analysis reads from each table (and nothing more).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id", "ecosystem", "architecture", "dataset", "repetition", "status",
             "started_at_utc", "ended_at_utc", "epochs"),
    "blocks": ("run_id", "epoch", "phase", "started_at_utc", "duration_s", "energy_j",
               "energy_missing_reason", "codecarbon_duration_s", "codecarbon_energy_j",
               "codecarbon_cpu_method", "codecarbon_gpu_method", "loss", "test_accuracy"),
    "samples": ("run_id", "t_s", "gpu_utilization_pct", "cpu_utilization_pct"),
    "environment": ("run_id", "host"),
}


#: Columns read when the package has them: Slurm's whole-run reading (campaign-level energy).
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("slurm_consumed_energy_j", "slurm_energy_missing_reason"),
}


class MissingValue(UserError):
    """A value the paper quotes cannot be computed from the package."""

    def __init__(self, message: str, **where):
        super().__init__(message, code="missing-value", **where)


def _count(section: dict, key: str) -> int:
    """An [analysis] count: an integer >= 0, or a clear error naming the key."""
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"[analysis] {key} must be an integer >= 0, not {value!r}")
    return value


def _susceptible(section: dict, architectures: tuple[str, ...],
                 datasets: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """[analysis] collapse_susceptible_cells ("architecture/dataset") that the design holds, in
    its order, as (architecture, dataset) pairs; a value that is not such a list is a clear
    error naming the key."""
    value = section["collapse_susceptible_cells"]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.count("/") == 1
                                              for v in value):
        raise UserError("[analysis] collapse_susceptible_cells must be a list of "
                        f"\"architecture/dataset\" cells, not {value!r}")
    named = {tuple(v.split("/")) for v in value}
    return tuple((a, d) for a in architectures for d in datasets if (a, d) in named)


@dataclass(frozen=True)
class Design:
    """The planned campaign and the analysis constants, from the experiment specification."""

    ecosystems: tuple[str, ...]
    architectures: tuple[str, ...]
    datasets: tuple[str, ...]
    control_group: tuple[str, ...]
    classes: dict
    codecarbon_interval_s: float
    repetitions: int
    #: [analysis]: family-wise significance level, bootstrap resamples and confidence, the
    #: collapse margin above chance (accuracy fraction) and the confidence of its bound
    alpha: float
    bootstrap_resamples: int
    bootstrap_confidence: float
    collapse_margin_fraction: float
    collapse_confidence: float
    #: [analysis]: the first epochs the phase totals leave out as warm-up (0: none)
    warmup_epochs_excluded: int
    #: S6_replication.master_seed: the seed of every bootstrap
    bootstrap_seed: int
    #: [analysis]: the (architecture, dataset) cells susceptible to training collapses, as far
    #: as the design holds them (empty: the declared scope leaves every one of them out)
    collapse_susceptible: tuple[tuple[str, str], ...] = ()
    #: [analysis]: a phase whose median block is shorter than this many sampler intervals
    #: names no cheapest stack
    cheapest_min_sampler_intervals: int = 0
    #: S5_measurement: seconds between two samples of the 1 Hz sampler
    sampler_interval_s: float = 1.0
    #: S4_backend.device (as the scope declares it): where every run placed its work
    device: str = "cuda"

    @classmethod
    def from_spec(cls, spec: dict | None = None, **narrow) -> Design:
        """The specification's design; `narrow` replaces ecosystems/architectures/datasets."""
        spec = spec or load_spec()
        ecosystems = tuple(narrow.get("ecosystems") or spec["S6_replication"]["ecosystems"])
        architectures = tuple(narrow.get("architectures") or spec["S1_model"]["architectures"])
        constants = spec["analysis"]
        datasets = tuple(narrow.get("datasets") or spec["S3_data"]["datasets"])
        return cls(
            ecosystems=ecosystems,
            architectures=architectures,
            datasets=datasets,
            control_group=tuple(e for e in spec["S6_replication"]["libtorch_control_group"]
                                if e in ecosystems),
            classes=dict(spec["S3_data"]["classes"]),
            codecarbon_interval_s=float(spec["S5_measurement"]["codecarbon_interval_s"]),
            repetitions=int(narrow.get("repetitions") or spec["S6_replication"]["repetitions"]),
            alpha=float(constants["alpha"]),
            bootstrap_resamples=int(constants["bootstrap_resamples"]),
            bootstrap_confidence=float(constants["bootstrap_confidence"]),
            collapse_margin_fraction=float(constants["collapse_margin_fraction"]),
            collapse_confidence=float(constants["collapse_confidence"]),
            warmup_epochs_excluded=_count(constants, "warmup_epochs_excluded"),
            bootstrap_seed=master_seed(spec),
            collapse_susceptible=_susceptible(constants, architectures, datasets),
            cheapest_min_sampler_intervals=_count(constants, "cheapest_min_sampler_intervals"),
            sampler_interval_s=1.0 / float(spec["S5_measurement"]["sampler_rate_hz"]),
            device=str(spec["S4_backend"]["device"]),
        )

    @property
    def cells(self) -> list[tuple[str, str]]:
        """(architecture, dataset) pairs, in specification order."""
        return list(itertools.product(self.architectures, self.datasets))

    @property
    def configurations(self) -> list[tuple[str, str, str]]:
        """(ecosystem, architecture, dataset) triples, in specification order."""
        return [(e, a, d) for e in self.ecosystems for a, d in self.cells]


@dataclass(frozen=True)
class CampaignTables:
    """The columns the analysis needs, as typed pandas frames."""

    runs: pd.DataFrame
    blocks: pd.DataFrame
    samples: pd.DataFrame
    environment: pd.DataFrame
    #: the optional columns the package holds (OPTIONAL_COLUMNS), one frame a table, keyed
    #: by run_id; empty frames where it holds none
    optional: dict[str, pd.DataFrame] = field(default_factory=dict)


def typed_columns(package, table: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """Columns of `table` by header name, typed from the Table Schema; names a missing one.

    Cells are read as text (pyarrow's CSV reader, no type inference) and cast
    with the schema's types, empty cells becoming nulls, as `package.tables.typed` does.
    """
    path = package.table_path(table)
    if not path.is_file():
        raise MissingValue(f"table {table!r} is missing; the analysis needs it", path=path)
    with open(path, encoding="utf-8", newline="") as handle:
        header = next(csv.reader([handle.readline()]), [])
    for name in columns:
        if name not in header:
            raise MissingValue(f"column {name!r} is missing from table {table!r}; the analysis "
                               "needs it", path=path, field=name)
    schema = load_schema(table)
    with open(path, "rb") as handle:  # (pyarrow cannot open a name that is not UTF-8)
        text = pacsv.read_csv(handle, convert_options=pacsv.ConvertOptions(
            include_columns=list(columns), column_types={c: pa.string() for c in columns},
            strings_can_be_null=False, quoted_strings_can_be_null=False))
    arrays = {}
    for name in columns:
        raw = text.column(name)
        raw = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
        kind = schema.field(name)
        arrays[name] = pc.equal(raw, "true") if kind.type == "boolean" \
            else _cast(raw, kind, path)
    frame = pa.table(arrays).to_pandas()
    for name in columns:
        if schema.field(name).type == "datetime":
            # one resolution for every datetime the analysis computes with: pandas makes the
            # timedeltas it adds to them (seconds as floats) in nanoseconds, and a join of
            # microsecond against nanosecond keys is refused (real clocks have fractions)
            frame[name] = frame[name].astype("datetime64[ns, UTC]")
    _check_constraints(frame, schema, path)
    return frame


def _cast(raw: pa.ChunkedArray, field, path) -> pa.ChunkedArray:
    """`raw` cast to the field's type; a cell that is not of it (a 30 February, a number
    beyond its range) is a UserError naming its row and column, as the validator would."""
    try:
        return pc.cast(raw, field.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for row, text in enumerate(raw.to_pylist(), start=2):
            try:
                pc.cast(pa.array([text], pa.string()), field.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise UserError(f"{text[:60]!r} is not a valid {field.type}; run 'deepgreen "
                                "validate' on the package", path=path, row=row,
                                field=field.name, code="type-error") from None
        raise


def _check_constraints(frame: pd.DataFrame, schema, path) -> None:
    """The Table Schema's constraints on the columns the analysis reads, checked with the
    pandera schema derived from it: a package that was never validated cannot feed a
    negative energy or an unplanned ecosystem into a median."""
    import pandera.errors

    ordered = [name for name in schema.field_names if name in frame.columns]
    try:
        pandera_schema(schema).select_columns(ordered).validate(frame[ordered], lazy=True)
    except pandera.errors.SchemaErrors as exc:
        cases = exc.failure_cases
        case = cases.iloc[0]
        index = case.get("index")
        row = None if index is None or pd.isna(index) else int(index) + 2
        raise UserError(f"{case.get('failure_case')!r} breaks the Table Schema's constraint "
                        f"{case.get('check')} ({len(cases):,} cell(s) in all); run 'deepgreen "
                        "validate' for the full report", path=path, row=row,
                        field=case.get("column"), code="constraint-error") from None


def _header(package, table: str) -> list[str]:
    """The header row of `table` (empty when the table is missing)."""
    path = package.table_path(table)
    if not path.is_file():
        return []
    with open(path, encoding="utf-8", newline="") as handle:
        return next(csv.reader([handle.readline()]), [])


def load_tables(package) -> CampaignTables:
    """The typed columns of runs, blocks, samples and environment that the analysis reads,
    and those of `OPTIONAL_COLUMNS` the package holds."""
    optional = {}
    for name, cols in OPTIONAL_COLUMNS.items():
        present = tuple(c for c in cols if c in _header(package, name))
        optional[name] = typed_columns(package, name, ("run_id", *present)) if present \
            else pd.DataFrame(columns=["run_id"])
    return CampaignTables(**{name: typed_columns(package, name, cols)
                             for name, cols in REQUIRED_COLUMNS.items()}, optional=optional)
