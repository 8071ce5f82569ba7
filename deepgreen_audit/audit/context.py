"""What every check reads: the package, its typed tables (read once), the specification."""

from __future__ import annotations

from functools import cached_property, partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from deepgreen_audit.audit.rows import CAMPAIGN_WORDS
from deepgreen_audit.columnar.evidence import describe_counts
from deepgreen_audit.columnar.frame import Frame, factorize, isin
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.beside import Beside
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import RoundTrip
from deepgreen_audit.resources import shipped_root
from deepgreen_audit.spec import AuditTolerances, load_spec
from deepgreen_audit.trial import initialiser_of, trial_initialisers

CONFIG_COLUMNS = ("ecosystem", "architecture", "dataset")


class AuditContext:
    """The package under audit; each table is typed once and shared by all checks."""

    def __init__(self, package: Package, spec: dict | None = None,
                 sources_root: Path | None = None, integrity=None,
                 typed_tables: dict[str, pa.Table] | None = None):
        self.package = package
        self.spec = spec or load_spec()
        #: the specification's [audit] tolerances, typed once (a fault in them stops the audit)
        self.tolerances = AuditTolerances.of(self.spec)
        #: the nouns of its findings: a campaign's rows are blocks
        self.words = CAMPAIGN_WORDS
        self.sources_root = Path(sources_root) if sources_root else shipped_root()
        #: the integrity report (deepgreen_audit.package.validate), set by the driver
        self.integrity = integrity
        #: the typed tables validation already read (the same types `Package.table` gives)
        self._typed_tables = dict(typed_tables or {})
        self._frames: dict[str, Frame] = {}
        #: the round-trip proof computed beside the checks (set by the driver), or None: the
        #: check computes it itself
        self.round_trip: Beside[RoundTrip] | None = None
        #: the between-window calibration package the campaign is audited with (set by the
        #: driver: `audit --calibration CAL`), or None (S6.calibration-window)
        self.calibration: Path | None = None


    def table(self, name: str) -> Frame:
        """Table `name` as numpy columns (columnar/frame.py), each converted when first read."""
        if name not in self._frames:
            typed = self._typed_tables.pop(name, None)
            self._frames[name] = Frame.from_arrow(typed if typed is not None else self.package.table(name))
        return self._frames[name]

    runs = property(lambda self: self.table("runs"), doc="The runs table, typed.")
    blocks = property(lambda self: self.table("blocks"), doc="The blocks table, typed.")
    environment = property(lambda self: self.table("environment"), doc="The environment table, typed.")
    samples = property(lambda self: self.table("samples"), doc="The samples table, typed.")

    @cached_property
    def _run_row(self) -> dict[str, int]:
        return {run_id: i for i, run_id in enumerate(self.runs["run_id"])}

    def of_runs(self, column: str, run_ids) -> np.ndarray:
        """The runs table's `column` for each of `run_ids` (None or NaN for a run it lacks)."""
        return _at(self.runs[column], np.fromiter((self._run_row.get(r, -1) for r in run_ids),
                                                  dtype=np.intp))

    @cached_property
    def initialisers(self) -> tuple[str, ...]:
        """The initialisers an initialiser trial's scope compares (empty: no trial)."""
        return trial_initialisers(self.spec.get("scope"))

    @cached_property
    def initialiser_of_run(self) -> dict[str, str]:
        """run_id -> the trial's initialiser its id names ("" outside a trial, "?" for a trial
        run whose id names none, which the completeness check then counts as surplus)."""
        def arm(run_id: str) -> str:
            try:
                return initialiser_of(run_id, self.initialisers)
            except UserError:
                return "?"
        return {r: arm(r) if self.initialisers else "" for r in self.runs["run_id"]}

    @cached_property
    def config_of_run(self) -> dict[str, str]:
        """run_id -> 'ecosystem/architecture/dataset' (in an initialiser trial, '/initialiser'
        after it: each initialiser's runs are a configuration of their own)."""
        runs, arm = self.runs, self.initialiser_of_run
        return {run_id: f"{e}/{a}/{d}" + (f"/{arm[run_id]}" if arm[run_id] else "")
                for run_id, e, a, d in zip(runs["run_id"], *(runs[c] for c in CONFIG_COLUMNS))}

    @cached_property
    def block_runs(self) -> Frame:
        """The blocks with their run's configuration, repetition and environment columns."""
        blocks = self.blocks
        # validation proved every block's run in both tables, once each
        added: dict[str, np.ndarray] = {}
        for table, columns in ((self.runs, [*CONFIG_COLUMNS, "repetition"]),
                               (self.environment, ["gpu_model", "gpu_count", "codecarbon_version",
                                                   "nvml_energy_available", "rapl_available",
                                                   "counters_missing_reason"])):
            row_of = {run_id: i for i, run_id in enumerate(table["run_id"])}
            codes, run_ids = factorize(blocks["run_id"])  # each run looked up once
            rows = np.array([*(row_of.get(r, -1) for r in run_ids), -1], dtype=np.intp)[codes]
            for column in columns:
                added[column] = _at(table[column], rows)
        integer = set(blocks.integer) | {"repetition", "gpu_count"}
        return Frame({**{n: partial(blocks.__getitem__, n) for n in blocks.columns}, **added},
                     len(blocks), integer, blocks.source)


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows], empty (None, NaN or NaT) where a row is -1."""
    empty = np.array([None if values.dtype == object else
                      np.datetime64("NaT") if values.dtype.kind == "M" else np.nan],
                     dtype=values.dtype)
    return np.concatenate([values, empty])[rows]


def labels_in_spec(runs: Frame, column: str, allowed, section: str):
    """Outcome of 'every run's <column> is one the specification names'."""
    from deepgreen_audit.suite.registry import Outcome

    allowed = set(allowed)
    values = runs[column]
    bad = ~isin(values, allowed)
    if bad.any():
        return Outcome.failed(f"{int(bad.sum())} run(s) with {column} outside {section}: "
                              + describe_counts(values[bad]), rows=int(bad.sum()))
    return Outcome.passed(f"every run's {column} is one of {', '.join(sorted(allowed))}")
