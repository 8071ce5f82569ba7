"""What every check reads: the package, its typed tables (read once), the specification."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepgreen_audit.package.beside import Beside
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import RoundTrip
from deepgreen_audit.resources import shipped_root
from deepgreen_audit.spec import load_spec

CONFIG_COLUMNS = ("ecosystem", "architecture", "dataset")
#: Integer and boolean columns keep their missing cells (not floats / objects).
_NULLABLE = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
#: Columns the checks read as pandas categoricals (categories in text order): the samples'
#: run_id repeats a run's id on each of its 1 Hz samples (14 M rows at 100x the study), and the
#: one check that reads it (S5.sampler) groups and compares by it, which a categorical does alike.
CATEGORICAL = {"samples": ("run_id",)}


class AuditContext:
    """The package under audit; each table is typed once and shared by all checks."""

    def __init__(self, package: Package, spec: dict | None = None,
                 sources_root: Path | None = None, integrity=None,
                 typed_tables: dict[str, pa.Table] | None = None):
        self.package = package
        self.spec = spec or load_spec()
        self.sources_root = Path(sources_root) if sources_root else shipped_root()
        #: the integrity report (deepgreen_audit.package.validate), set by the driver
        self.integrity = integrity
        #: the typed tables validation already read (the same types `Package.table` gives)
        self._typed_tables = dict(typed_tables or {})
        self._frames: dict[str, pd.DataFrame] = {}
        #: the round-trip proof computed beside the checks (set by the driver), or None: the
        #: check computes it itself
        self.round_trip: Beside[RoundTrip] | None = None

    @property
    def tolerances(self) -> dict:
        return self.spec["audit"]

    def table(self, name: str) -> pd.DataFrame:
        """Table `name` as a pandas frame with the schema's types (cached).

        A text column is pandas' text (arrow-backed), also where validation kept it dictionary-
        encoded (a key of a large table), except the CATEGORICAL columns."""
        if name not in self._frames:
            typed = self._typed_tables.pop(name, None)
            if typed is None:
                typed = self.package.table(name)
            for i, field in enumerate(typed.schema):
                categorical = field.name in CATEGORICAL.get(name, ())
                if categorical and not pa.types.is_dictionary(field.type):
                    typed = typed.set_column(i, field.name, pc.dictionary_encode(typed.column(i)))
                elif pa.types.is_dictionary(field.type) and not categorical:
                    typed = typed.set_column(i, field.name, typed.column(i).cast(field.type.value_type))
            frame = typed.to_pandas(types_mapper=_NULLABLE.get, self_destruct=True)
            del typed  # its buffers go as their columns are converted (self_destruct)
            for column in CATEGORICAL.get(name, ()):
                frame[column] = frame[column].cat.reorder_categories(sorted(frame[column].cat.categories))
            self._frames[name] = frame
        return self._frames[name]

    runs = property(lambda self: self.table("runs"), doc="The runs table, typed.")
    blocks = property(lambda self: self.table("blocks"), doc="The blocks table, typed.")
    environment = property(lambda self: self.table("environment"), doc="The environment table, typed.")
    samples = property(lambda self: self.table("samples"), doc="The samples table, typed.")

    @cached_property
    def config_of_run(self) -> pd.Series:
        """run_id -> 'ecosystem/architecture/dataset'."""
        runs = self.runs
        labels = runs["ecosystem"] + "/" + runs["architecture"] + "/" + runs["dataset"]
        return pd.Series(labels.to_numpy(), index=runs["run_id"].to_numpy())

    @cached_property
    def block_runs(self) -> pd.DataFrame:
        """The blocks with their run's configuration, repetition and environment columns."""
        blocks = self.blocks
        joined = blocks.copy(deep=False)  # the blocks' columns shared, not copied
        for table, columns in ((self.runs, [*CONFIG_COLUMNS, "repetition"]),
                               (self.environment, ["gpu_model", "gpu_count", "codecarbon_version"])):
            # validation proved every block's run in both tables, once each
            row = pd.Index(table["run_id"]).get_indexer(blocks["run_id"])
            for column in columns:
                joined[column] = table[column].array.take(row, allow_fill=True)
        return joined


def rows_by_run(frame: pd.DataFrame) -> list[np.ndarray]:
    """The positions of each run's rows in `frame` (by its run_id column), runs in run_id
    order, each run's rows in frame order: what `frame.groupby("run_id").groups` gives, as
    numpy positions (indexing a numpy column by them costs microseconds, a pandas one tens)."""
    codes, _ = pd.factorize(frame["run_id"], sort=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    return [rows for rows in np.split(order, bounds) if len(rows) and codes[rows[0]] >= 0]


def describe_counts(series: pd.Series, limit: int = 8) -> str:
    """'a: 3, b: 1' from a Series of labels, most frequent first."""
    counts = series.value_counts()
    text = ", ".join(f"{k}: {v}" for k, v in counts.head(limit).items())
    return text + (f", ... ({len(counts) - limit} more)" if len(counts) > limit else "")


def labels_in_spec(runs: pd.DataFrame, column: str, allowed, section: str):
    """Outcome of 'every run's <column> is one the specification names'."""
    from deepgreen_audit.registry import Outcome

    allowed = set(allowed)
    bad = runs[~runs[column].isin(allowed)]
    if len(bad):
        return Outcome.failed(f"{len(bad)} run(s) with {column} outside {section}: "
                              + describe_counts(bad[column]), rows=len(bad))
    return Outcome.passed(f"every run's {column} is one of {', '.join(sorted(allowed))}")


def relative_difference(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, np.abs(a - b) / scale, 0.0)


def evidence(frame: pd.DataFrame) -> dict:
    """A finding's evidence for the JSON report: every row of `frame` as plain JSON values (the
    runs or configurations it names and the figures that convicted them), so a reader can check
    each one; the HTML page shows the first rows and links the rest as CSV.  `evidence_total`
    (the count) is kept for readers of older reports, which carried 50 rows at most."""
    rows = json_records(frame, digits=6)
    return {"evidence": rows, "evidence_total": len(rows)}


def json_records(frame: pd.DataFrame, digits: int | None = None) -> list[dict]:
    """The rows of `frame` as plain JSON values (the audit's evidence, a comparison's tables)."""
    return [{k: plain_value(v, digits) for k, v in record.items()}
            for record in frame.to_dict(orient="records")]


def plain_value(value, digits: int | None = None):
    """One cell as a JSON value: numpy scalars as Python's, a missing or non-finite number as
    null (JSON has no NaN or Infinity), floats rounded to `digits` when given."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        if not np.isfinite(value):
            return None
        return float(value) if digits is None else round(float(value), digits)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value if isinstance(value, (int, bool, str)) else str(value)


def run_block_energy_j(blocks: pd.DataFrame) -> pd.Series:
    """Each run's summed block energy_j, NaN where a block lacks it: what a whole-run reading
    (Slurm's) is set against, by the audit's check and by the paper alike."""
    grouped = blocks.groupby("run_id")["energy_j"].agg(["sum", "count", "size"])
    return grouped["sum"].where(grouped["count"] == grouped["size"])


def per_run_evidence(ctx, blocks: pd.DataFrame, figures: dict | None = None) -> dict:
    """Evidence of a block-level finding, one row per run: its ecosystem, how many of its
    blocks the finding concerns, and `figures` ({column: aggregation}) of those blocks."""
    grouped = blocks.groupby("run_id")
    frame = grouped.size().rename("blocks").to_frame()
    for column, how in (figures or {}).items():
        frame[column] = grouped[column].agg(how)
    frame = frame.reset_index()
    frame.insert(1, "ecosystem", frame["run_id"].map(ctx.runs.set_index("run_id")["ecosystem"]))
    return evidence(frame.sort_values("blocks", ascending=False))
