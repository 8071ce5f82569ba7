"""Import the study's first campaign (CodeCarbon logs only) into a replication package.

Layout read (see the README of the campaign folder): ``results/data/<stack>_combined_data.csv``
(one per stack, 360 rows: 6 configurations x 30 epochs x train/eval) and the per-stack
copies and aggregates they were merged from.

Decisions
=========

* **Source of truth**: the eight ``results/data/<stack>_combined_data.csv`` files.  They
  are the authors' final per-stack merges, the only files that cover all 8 stacks (JAX
  exists only there), and they keep the stacks' original labels (``combined_data.csv``
  holds them after a label normalisation).  Every duplicate is compared with them, cell
  by cell, and the differences are reported (`consistency`): ``combined_data.csv``, the
  per-stack ``*_combined_data.csv`` copies, the 60-row aggregates, the Java per-phase raw
  logs, and the earlier merge in ``results/old_data/``.
* **One run per configuration** (stack x model x dataset), repetition 1; one block per
  CodeCarbon row (epoch ``epoca``, phase ``fase``; ``test`` is the eval phase).
* **Labels** are normalised to the schema's (`ECOSYSTEMS`, `ARCHITECTURES`, `DATASETS`);
  the originals are kept in ``runs.source_labels`` (``language``/``lang``, ``modello``,
  ``dataset``, ``model`` as the source wrote them).  MATLAB is the ecosystem ``matlab``.
* **Energy**: CodeCarbon's kWh are kept in the ``codecarbon_*_kwh`` columns, unchanged;
  ``codecarbon_energy_j`` is derived (x 3.6e6).  The campaign read no hardware counters,
  so the counter cells are empty with ``energy_missing_reason``.  ``duration_s`` (required
  by the schema) holds CodeCarbon's tracker duration, as the reason says: there was no
  counter-bracketed window.  CodeCarbon's methods are ``unknown`` (its logs do not say how
  it obtained power; the audit detects modelled CPU power from the data).
* **Time**: CodeCarbon writes ``timestamp`` at the end of each tracker, as zone-less local
  wall-clock time; the host's zone was not recorded.  The digits are kept unchanged and
  written with a ``Z`` in the ``*_utc`` columns; ``runs.missing_reason`` says they are
  local time of unknown zone (CodeCarbon located the host in Tuscany: if its clock ran on
  Italian time, UTC is 2 hours earlier).  A block starts at its timestamp minus its duration.
* **What the campaign lacks** is empty with a reason, never invented: seeds, process ids,
  schedule positions, the recipe, weight and data hashes, the 1 Hz samples (the samples
  table is empty), samples processed, loss, accuracy, host, driver, CUDA, framework
  versions, the CodeCarbon configuration, counter availability.
* **What CodeCarbon recorded has a place in the tables**: emissions, emissions rate and the
  location it assumed (country, region) per block; RAM size, PUE and the cloud facts per
  run in ``environment`` (they never vary within a legacy run; an import where they do is
  refused, naming the row).  The audit checks them (constancy, identities).
* **Every original value** is kept as written as well: each CodeCarbon row verbatim, with
  the label columns and the source file and line, in ``legacy-source-rows.csv`` beside the
  tables, keyed by (package_run_id, package_epoch, package_phase).  What only it holds:
  CodeCarbon's own project, run and experiment ids, the raw timestamp, country name,
  longitude and latitude (which follow from the country and region).  The consistency
  report and these decisions go to ``legacy-import.json``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths
from deepgreen_audit.package.checked import refuse_invalid
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import TextTable, canonical_text, records_with_lines, rows_from_columns
from deepgreen_audit.package.writer import write_package
from deepgreen_audit.units import J_PER_KWH

CAMPAIGN = "legacy-2025"
#: The licence of the source repository, as the campaign folder's README states it.
LICENCE = ("MIT License, as the repository's README states (its LICENSE file is empty, 0 bytes, "
           "in this snapshot)")
REPORT_FILE = "legacy-import.json"
SOURCE_ROWS_FILE = "legacy-source-rows.csv"

#: The 32 columns of a CodeCarbon emissions.csv row, in order (the README's R32).
R32 = ("timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions",
       "emissions_rate", "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy",
       "ram_energy", "energy_consumed", "country_name", "country_iso_code", "region",
       "cloud_provider", "cloud_region", "os", "python_version", "codecarbon_version",
       "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude",
       "ram_total_size", "tracking_mode", "on_cloud", "pue")
LABEL_COLUMNS = ("language", "lang", "modello", "dataset", "model")

#: Stack -> (ecosystem, framework, stack folder copy of the combined file, aggregate glob).
STACKS = {
    "R": ("r-torch", "torch-r", "R/emissions/R_combined_data.csv", "R/emissions/aggregate_*.csv"),
    "cpp": ("cpp-libtorch", "libtorch", "cpp/emissions/cpp_combined_data.csv",
            "cpp/emissions/aggregate_*.csv"),
    "java": ("java-dl4j", "dl4j", "Java/deepgreen-dl4j/emissions/java_combined_data.csv",
             "Java/deepgreen-dl4j/emissions/aggregate_*.csv"),
    "jax": ("python-jax", "jax", None, None),
    "matlab": ("matlab", "matlab", "matlab/emissions/matlab_combined_data.csv",
               "matlab/emissions/aggregate_*.csv"),
    "pytorch": ("python-pytorch", "torch", "python/pytorch/emissions/pytorch_combined_data.csv",
                "python/pytorch/emissions/aggregate_*.csv*"),
    "rust": ("rust-tch", "tch", "rust/emissions/rust_combined_data.csv",
             "rust/emissions/aggregate_*.csv"),
    "tensorflow": ("python-tensorflow", "tensorflow",
                   "python/tensorflow/emissions/tensorflow_combined_data.csv",
                   "python/tensorflow/emissions/aggregate_*.csv"),
}
#: Ecosystem -> the framework its stack trains with (from STACKS).
FRAMEWORK_OF = {eco: framework for eco, framework, *_ in STACKS.values()}
#: Source labels (lower case) -> normalised labels of the schema.
ECOSYSTEMS = {"r": "r-torch", "cpp": "cpp-libtorch", "c++": "cpp-libtorch", "java": "java-dl4j",
              "jax": "python-jax", "matlab": "matlab", "pytorch": "python-pytorch",
              "rust": "rust-tch", "tensorflow": "python-tensorflow"}
ARCHITECTURES = {"resnet18": "resnet18", "resnet": "resnet18", "vgg16": "vgg16", "vgg": "vgg16"}
DATASETS = {"cifar100": "cifar100", "cifar100_png": "cifar100", "fashion": "fashion-mnist",
            "fashionmnist": "fashion-mnist", "fashion_mnist": "fashion-mnist",
            "fashion_mnist_png": "fashion-mnist", "tiny": "tiny-imagenet",
            "tinyimagenet": "tiny-imagenet", "tiny_imagenet": "tiny-imagenet",
            "tiny_imagenet_png": "tiny-imagenet",
            # the PyTorch aggregates carry their file name's suffix in the dataset column
            "cifar100.csv": "cifar100", "fashion.csv": "fashion-mnist", "tiny.csv": "tiny-imagenet"}
PHASES = {"train": "train", "eval": "eval", "test": "eval"}

RUN_REASON = (
    "legacy campaign, CodeCarbon logs only: no seed, process id or schedule position was "
    "recorded (one run per configuration); the recipe, initial-weight and data hashes were not "
    "recorded, nor the device the frameworks placed the work on (device, device_name, cuDNN and "
    "TF32 state); started_at_utc/ended_at_utc are CodeCarbon's zone-less local timestamps written "
    "unchanged, NOT known to be UTC (host zone unrecorded; if it was Italian time, UTC is 2 h "
    "earlier)")
SLURM_REASON = "legacy campaign: run on one workstation, not through Slurm (no Slurm energy accounting)"
ENERGY_REASON = (
    "no hardware counters in the legacy campaign (CodeCarbon only); duration_s is CodeCarbon's "
    "tracker duration, not a counter-bracketed window; samples processed, loss and accuracy "
    "were not logged")
COUNTERS_REASON = ("the legacy campaign read no hardware counters (CodeCarbon only); whether "
                   "NVML total energy and RAPL were available was not recorded")
ENV_REASON = ("not in the CodeCarbon logs: host name, GPU driver, CUDA, framework version, "
              "CodeCarbon configuration; codecarbon_gpu_count empty because the logs' gpu_count is "
              "CodeCarbon's own, recorded as gpu_count, with no NVML count beside it to compare; "
              "gpu_model normalised from CodeCarbon's 'N x MODEL'; "
              "cloud provider and region empty because CodeCarbon found no cloud (on_cloud N)")


@dataclass
class SourceRow:
    """One CodeCarbon row with its normalised key and where it came from."""

    key: tuple  # (ecosystem, architecture, dataset, phase, epoch)
    cells: dict  # column -> text as written
    path: str
    line: int


def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header of the CSV file `path` and its rows, each with the line it starts on."""
    if not os.path.lexists(path):
        raise UserError("is missing: not the layout of the legacy campaign (see its README)",
                        path=path, code="missing-input")
    text = paths.read_text(path)
    try:
        records = list(records_with_lines(csv.reader(io.StringIO(text, newline=""))))
    except csv.Error as exc:
        raise UserError(f"cannot be parsed as CSV: {exc}", path=path, code="csv-error") from None
    if not records:
        raise UserError("is empty", path=path, row=1)
    return records[0][1], records[1:]


def _label(table: dict, value: str, what: str, path: Path, line: int, column: str) -> str:
    try:
        return table[value.strip().lower()]
    except KeyError:
        raise UserError(f"unknown {what} label {value!r}", path=path, row=line,
                        field=column) from None


def read_rows(root: Path, rel: str, ecosystem: str | None = None, *,
              file_labels: tuple[str, str, str] | None = None) -> list[SourceRow]:
    """Rows of one source file, keyed by normalised labels.

    `ecosystem` is the stack the file belongs to (else read from its language column);
    `file_labels` = (architecture, dataset, phase) for the Java per-phase raw logs, whose
    rows carry no labels (the epoch is the row order).
    """
    path = root / rel
    header, rows = _read_csv(path)
    missing = [c for c in R32 if c not in header]
    if missing:
        raise UserError(f"lacks the CodeCarbon column(s) {', '.join(missing)}", path=path, row=1)
    labels = [c for c in ("modello", "dataset", "fase", "epoca") if c not in header] \
        if not file_labels else []
    if ecosystem is None and "language" not in header and "lang" not in header:
        labels.append("language")
    if labels:
        raise UserError(f"lacks the label column(s) {', '.join(labels)}", path=path, row=1)
    out = []
    for order, (number, row) in enumerate(rows, start=1):
        if len(row) != len(header):
            raise UserError(f"{len(row)} cells, the header has {len(header)}", path=path, row=number)
        cells = dict(zip(header, row))
        if file_labels:
            arch, ds, phase = file_labels
            epoch = order
        else:
            arch = _label(ARCHITECTURES, cells["modello"], "model", path, number, "modello")
            ds = _label(DATASETS, cells["dataset"], "dataset", path, number, "dataset")
            phase = _label(PHASES, cells["fase"], "phase", path, number, "fase")
            try:
                epoch = int(cells["epoca"])
            except ValueError:
                raise UserError(f"epoch {cells['epoca']!r} is not an integer", path=path,
                                row=number, field="epoca") from None
        eco = ecosystem
        if eco is None:
            lang = "language" if "language" in cells else "lang"
            eco = _label(ECOSYSTEMS, cells[lang], "language", path, number, lang)
        out.append(SourceRow((eco, arch, ds, phase, epoch), cells, rel, number))
    return out


def _index(rows: list[SourceRow], where: str) -> dict[tuple, SourceRow]:
    index: dict = {}
    for r in rows:
        if r.key in index:
            raise UserError(f"two rows for {'/'.join(map(str, r.key))} (also line "
                            f"{index[r.key].line})", path=where, row=r.line)
        index[r.key] = r
    return index


def compare(name: str, truth: dict[tuple, SourceRow], other: list[SourceRow]) -> dict:
    """Cell-by-cell comparison of duplicate rows with the source of truth (R32 columns)."""
    differing = 0
    columns: dict[str, int] = {}
    examples: list = []
    for r in other:
        t = truth.get(r.key)
        if t is None:
            continue
        diff = [c for c in R32 if r.cells[c] != t.cells[c]]
        if diff:
            differing += 1
            for c in diff:
                columns[c] = columns.get(c, 0) + 1
            if len(examples) < 3:
                c = diff[0]
                examples.append(f"{r.path}:{r.line} {'/'.join(map(str, r.key))} {c}: "
                                f"{r.cells[c]!r} vs {t.cells[c]!r} ({t.path}:{t.line})")
    keys = [r.key for r in other]
    compared = sum(k in truth for k in keys)
    return {"comparison": name, "rows": len(other), "compared": compared,
            "identical": compared - differing, "differing": differing,
            "differing_columns": dict(sorted(columns.items(), key=lambda kv: -kv[1])),
            "only_in_duplicate": sum(k not in truth for k in keys),
            "repeated_keys": len(keys) - len(set(keys)),
            "missing_from_duplicate": len(set(truth) - set(keys)), "examples": examples}


def _consistency(root: Path, truth: dict[tuple, SourceRow]) -> list[dict]:
    results = [compare("results/data/combined_data.csv", truth,
                       read_rows(root, "results/data/combined_data.csv"))]
    for stack, (eco, _, copy, aggregates) in STACKS.items():
        if copy:
            results.append(compare(copy, truth, read_rows(root, copy, eco)))
        if aggregates:
            rows = []
            for path in sorted(root.glob(aggregates)):
                rows += read_rows(root, path.relative_to(root).as_posix(), eco)
            results.append(compare(f"{aggregates} ({len(rows) // 60} files)", truth, rows))
        old = root / "results" / "old_data" / f"{stack}_combined_data.csv"
        if old.is_file():
            results.append(compare(f"results/old_data/{old.name}", truth,
                                   read_rows(root, f"results/old_data/{old.name}", eco)))
    java_raw = []
    for path in sorted((root / "Java/deepgreen-dl4j/emissions").glob("*_*_t*.csv")):
        if path.stem.startswith("aggregate_"):
            continue
        arch, ds, phase = path.stem.split("_")
        java_raw += read_rows(root, path.relative_to(root).as_posix(), "java-dl4j", file_labels=(
            ARCHITECTURES[arch], DATASETS[ds], PHASES[phase]))
    if java_raw:
        results.append(compare("Java/deepgreen-dl4j/emissions/<model>_<dataset>_<phase>.csv "
                               "(raw per-phase logs, epoch = row order)", truth, java_raw))
    old_all = root / "results" / "old_data" / "all_combined_data.csv"
    if old_all.is_file():
        results.append(compare("results/old_data/all_combined_data.csv", truth,
                               read_rows(root, "results/old_data/all_combined_data.csv")))
    return results


def _num(row: SourceRow, column: str) -> float | None:
    """A CodeCarbon number, or None for an empty cell (CodeCarbon's own "missing").  Text
    that is no number, NaN and infinity are refused, naming the source cell: a NaN says
    CodeCarbon's computation failed, and writing it empty would claim a missing reading the
    importer cannot state a reason for (docs/design.md, "Honesty rules": missing is empty plus a
    reason)."""
    text = row.cells[column].strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{text[:40]!r} is not a number", path=row.path, row=row.line,
                        field=column) from None
    if not math.isfinite(value):
        raise UserError(f"{text!r} is not a finite number (CodeCarbon writes an empty cell for "
                        "a missing value)", path=row.path, row=row.line, field=column)
    return value


def _count(row: SourceRow, column: str) -> int:
    """A CodeCarbon count (cpu_count, gpu_count): a whole number from 0 up."""
    text = row.cells[column].strip()
    if not text.isdigit() or len(text) > 9:
        raise UserError(f"{text[:40]!r} is not a count (a whole number from 0)", path=row.path,
                        row=row.line, field=column)
    return int(text)


def _timestamp(text: str, path: str, line: int) -> dt.datetime:
    """CodeCarbon's zone-less timestamp, its digits kept (see RUN_REASON)."""
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"timestamp {text[:40]!r} is not ISO 8601", path=path, row=line,
                        field="timestamp") from None
    if stamp.tzinfo is not None:
        raise UserError("timestamp carries a zone; the legacy importer expects CodeCarbon's "
                        "zone-less local time", path=path, row=line, field="timestamp")
    # Kept as written: the digits of a local time of unknown zone (see RUN_REASON).
    return stamp.replace(tzinfo=dt.UTC)


#: CodeCarbon's per-row facts about the host that the environment table holds once per run.
HOST_CONTEXT = {"ram_total_size": "ram_total_gb", "pue": "pue", "on_cloud": "on_cloud",
                "cloud_provider": "cloud_provider", "cloud_region": "cloud_region"}


def _host_context(blocks: list[SourceRow], run_id: str) -> dict:
    """The run's RAM size, PUE and cloud facts; a run whose rows disagree is refused (it would
    need a per-block place, and the legacy logs never disagree within a run)."""
    context: dict[str, object] = {}
    for column, name in HOST_CONTEXT.items():
        values = {b.cells[column].strip() for b in blocks}
        if len(values) > 1:
            b = blocks[0]
            raise UserError(f"{column} differs within run {run_id} ({', '.join(sorted(values))}); "
                            "the environment table holds one value a run", path=b.path, row=b.line,
                            field=column)
        text = values.pop()
        if name == "on_cloud":
            context[name] = {"Y": True, "N": False}.get(text)
        elif name in ("ram_total_gb", "pue"):
            context[name] = _num(blocks[0], column)
        else:
            context[name] = text or None
    return context


def build_tables(root: Path) -> tuple[dict[str, TextTable], dict, list[list[str]],
                                      dict[str, list[dict[str, SourceRow]]]]:
    """The four tables, the import report, the verbatim source rows and, per table, the
    source rows each package row came from (field -> row, "*" for the others: a run's first
    block)."""
    root = Path(root)
    rows = _truth_rows(root)
    truth = _index(rows, "results/data/*_combined_data.csv")
    runs_of = _rows_by_run(rows)
    built = _TableBuilder()
    for config in sorted(runs_of, key=lambda k: f"{k[0]}.{k[1]}.{k[2]}.r1"):
        _add_run(built, config, runs_of[config])
    tables = built.tables()
    report = {"source_of_truth": "results/data/<stack>_combined_data.csv (8 files)",
              "runs": len(runs_of), "blocks": len(rows),
              "consistency": _consistency(root, truth)}
    return tables, report, built.source_rows, built.origins


class _TableBuilder:
    """The package's tables as the import fills them, run by run: each table's columns in its
    schema's order, the source rows behind each package row (so that a finding on the staged
    package names the source cell) and the verbatim rows of legacy-source-rows.csv."""

    def __init__(self) -> None:
        self.schemas = {name: load_schema(name) for name in TABLES}
        self.columns: dict[str, dict[str, list]] = {
            name: {f.name: [] for f in self.schemas[name].fields} for name in TABLES}
        self.origins: dict[str, list[dict[str, SourceRow]]] = {name: [] for name in TABLES}
        self.source_rows: list[list[str]] = []

    def put(self, table: str, values: dict, origin: dict[str, SourceRow]) -> None:
        """One row of `table` (a field `values` lacks is empty) and the source rows it came from."""
        for f in self.schemas[table].fields:
            self.columns[table][f.name].append(values.get(f.name))
        self.origins[table].append(origin)

    def tables(self) -> dict[str, TextTable]:
        """The filled tables, each cell in its schema's canonical text."""
        return {name: TextTable(self.schemas[name].field_names,
                                rows_from_columns(self.schemas[name], self.columns[name]))
                for name in TABLES}


def _truth_rows(root: Path) -> list[SourceRow]:
    """The rows of the eight per-stack merges, the source of truth (see Decisions)."""
    if not (root / "results" / "data").is_dir():
        raise UserError("has no results/data/ folder: not the legacy campaign's layout",
                        path=root, code="missing-input")
    rows: list[SourceRow] = []
    for stack, (eco, *_rest) in STACKS.items():
        rows += read_rows(root, f"results/data/{stack}_combined_data.csv", eco)
    return rows


def _rows_by_run(rows: list[SourceRow]) -> dict[tuple, list[SourceRow]]:
    """The rows of each configuration (ecosystem, architecture, dataset): one run's blocks."""
    runs_of: dict[tuple, list[SourceRow]] = {}
    for r in rows:
        runs_of.setdefault(r.key[:3], []).append(r)
    return runs_of


def _add_run(built: _TableBuilder, config: tuple[str, str, str], rows: list[SourceRow]) -> None:
    """One configuration's run, repetition 1: its blocks (by epoch, train before eval), then
    its runs row and its environment row."""
    eco, arch, ds = config
    run_id = f"{eco}.{arch}.{ds}.r1"
    blocks = sorted(rows, key=lambda r: (r.key[4], r.key[3] == "eval"))
    windows = [_add_block(built, b, run_id) for b in blocks]
    starts = [start for start, _end in windows]
    ends = [end for _start, end in windows]
    built.put("runs", {
        "run_id": run_id, "campaign": CAMPAIGN, "ecosystem": eco, "architecture": arch,
        "dataset": ds, "source_labels": _source_labels(blocks), "repetition": 1,
        "started_at_utc": min(starts), "ended_at_utc": max(ends), "status": "completed",
        "epochs": max(b.key[4] for b in blocks), "slurm_energy_missing_reason": SLURM_REASON,
        "missing_reason": RUN_REASON},
        {"*": blocks[0], "started_at_utc": blocks[starts.index(min(starts))],
         "ended_at_utc": blocks[ends.index(max(ends))],
         "epochs": max(blocks, key=lambda b: b.key[4])})
    built.put("environment", _environment_values(blocks, run_id, FRAMEWORK_OF[eco]),
              {"*": blocks[0]})


def _add_block(built: _TableBuilder, b: SourceRow, run_id: str) -> tuple[dt.datetime, dt.datetime]:
    """One source row as a block of run `run_id` and as a verbatim source row; its start and
    end, which bound the run's."""
    start, end, duration = _block_window(b)
    built.put("blocks", _block_values(b, run_id, start, duration), {"*": b})
    built.source_rows.append(_source_row(b, run_id))
    return start, end


def _source_labels(blocks: list[SourceRow]) -> str:
    """The run's labels as the source wrote them (runs.source_labels): column=value, each
    distinct value of each label column once."""
    labels = []
    for c in LABEL_COLUMNS:
        values = sorted({b.cells[c] for b in blocks if c in b.cells})
        labels += [f"{c}={v}" for v in values]
    return ";".join(labels)


def _source_row(b: SourceRow, run_id: str) -> list[str]:
    """A row of legacy-source-rows.csv: the package row it became (run, epoch, phase), where it
    was read, its label columns and its 32 CodeCarbon cells, all as written."""
    return ([run_id, str(b.key[4]), b.key[3], b.path, str(b.line)]
            + [b.cells.get(c, "") for c in LABEL_COLUMNS + ("fase", "epoca")]
            + [b.cells[c] for c in R32])


def _block_window(b: SourceRow) -> tuple[dt.datetime, dt.datetime, float]:
    """A block's start, end and duration: the first campaign's timestamp is the block's end."""
    end = _timestamp(b.cells["timestamp"], b.path, b.line)
    duration = _num(b, "duration")
    if duration is None:
        raise UserError("duration is empty; every block has one", path=b.path, row=b.line,
                        field="duration")
    try:
        start = end - dt.timedelta(seconds=duration)
    except OverflowError:
        raise UserError(f"duration {b.cells['duration']!r} does not end at the row's "
                        "timestamp within years 1 to 9999", path=b.path, row=b.line,
                        field="duration") from None
    return start, end, duration


def _block_values(b: SourceRow, run_id: str, start: dt.datetime, duration: float) -> dict:
    """The blocks table's cells of one source row: CodeCarbon's readings, no counter energy."""
    kwh = {d: _num(b, f"{d}_energy") for d in ("cpu", "gpu", "ram")}
    total = _num(b, "energy_consumed")
    return {
        "run_id": run_id, "epoch": b.key[4], "phase": b.key[3],
        "started_at_utc": start, "duration_s": duration,
        "energy_missing_reason": ENERGY_REASON,
        "codecarbon_duration_s": duration, "codecarbon_energy_kwh": total,
        "codecarbon_energy_j": None if total is None else total * J_PER_KWH,
        "codecarbon_cpu_energy_kwh": kwh["cpu"], "codecarbon_gpu_energy_kwh": kwh["gpu"],
        "codecarbon_ram_energy_kwh": kwh["ram"],
        "codecarbon_cpu_power_w": _num(b, "cpu_power"),
        "codecarbon_gpu_power_w": _num(b, "gpu_power"),
        "codecarbon_ram_power_w": _num(b, "ram_power"),
        "codecarbon_cpu_method": "unknown", "codecarbon_gpu_method": "unknown",
        "codecarbon_emissions_kg": _num(b, "emissions"),
        "codecarbon_emissions_rate_kg_per_s": _num(b, "emissions_rate"),
        "codecarbon_country_iso_code": b.cells["country_iso_code"].strip() or None,
        "codecarbon_region": b.cells["region"].strip() or None}


def _environment_values(blocks: list[SourceRow], run_id: str, framework: str) -> dict:
    """The environment table's cells of one run, from its first block's row."""
    first = blocks[0].cells
    gpu_model = first["gpu_model"]
    if " x " in gpu_model:
        gpu_model = gpu_model.split(" x ", 1)[1]
    return {
        "run_id": run_id, "os": first["os"], "cpu_model": first["cpu_model"],
        "cpu_count": _count(blocks[0], "cpu_count"), "gpu_model": gpu_model,
        "gpu_count": _count(blocks[0], "gpu_count"), "python_version": first["python_version"],
        "framework": framework, "codecarbon_version": first["codecarbon_version"],
        "codecarbon_tracking_mode": first["tracking_mode"],
        **_host_context(blocks, run_id),
        "counters_missing_reason": COUNTERS_REASON, "missing_reason": ENV_REASON}


def import_source(source: Path, out: Path, *, overwrite: bool = False,
                  descriptor_path: Path | None = None) -> tuple[Path, dict]:
    """Import the legacy campaign at `source` into a package at `out`; returns (descriptor, report)."""
    source = Path(source)
    tables, report, source_rows, origins = build_tables(source)
    header = ["package_run_id", "package_epoch", "package_phase", "source_file", "source_line",
              *LABEL_COLUMNS, "fase", "epoca", *R32]
    meta = {
        "name": "deepgreen-legacy-campaign",
        "title": "DeepGreen first campaign (legacy CodeCarbon logs, imported)",
        "description": (
            "The study's first-submission campaign (one NVIDIA L40S server, CodeCarbon only, one "
            "run per configuration, 8 stacks), imported by 'deepgreen import legacy' from the "
            "raw CodeCarbon logs of github.com/Pampaj7/DeepGreen. CodeCarbon's kWh are kept in "
            "the *_kwh columns; joules are derived. What the campaign did not record is empty "
            "with a reason: no hardware counters, seeds, process ids, schedule, recipe, 1 Hz "
            "samples, samples processed, loss or accuracy. Timestamps are local time of an "
            f"unrecorded zone, written unchanged. Original rows: {SOURCE_ROWS_FILE}; import "
            f"decisions and the consistency of the duplicate files: {REPORT_FILE}."),
        "synthetic": False,
        "provenance": {"importer": "deepgreen import legacy", "source": "legacy-campaign",
                       "repository": "https://github.com/Pampaj7/DeepGreen",
                       "commit": "8f9ae83784210d80ba328a55929c503f1d17b51f",
                       "licence": LICENCE},
    }
    extra = {REPORT_FILE: (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode(),
             SOURCE_ROWS_FILE: canonical_text(header, source_rows).encode()}
    path = write_package(tables, Path(out), meta, descriptor_path=descriptor_path,
                         overwrite=overwrite, extra_files=extra, inputs=[source],
                         check=refuse_invalid(lambda finding: _source_cell(finding, origins)))
    return path, report


#: Package column -> the CodeCarbon column it is written from, where one is.
SOURCE_COLUMNS = {
    "epoch": "epoca", "epochs": "epoca", "started_at_utc": "timestamp", "ended_at_utc": "timestamp",
    "duration_s": "duration", "codecarbon_duration_s": "duration", "codecarbon_energy_kwh": "energy_consumed",
    "codecarbon_energy_j": "energy_consumed", "codecarbon_cpu_energy_kwh": "cpu_energy",
    "codecarbon_gpu_energy_kwh": "gpu_energy", "codecarbon_ram_energy_kwh": "ram_energy",
    "codecarbon_cpu_power_w": "cpu_power", "codecarbon_gpu_power_w": "gpu_power",
    "codecarbon_ram_power_w": "ram_power", "codecarbon_emissions_kg": "emissions",
    "codecarbon_emissions_rate_kg_per_s": "emissions_rate",
    "codecarbon_country_iso_code": "country_iso_code", "codecarbon_region": "region",
    "ram_total_gb": "ram_total_size", "codecarbon_tracking_mode": "tracking_mode",
    **{c: c for c in ("pue", "cloud_provider", "cloud_region", "os", "cpu_model", "cpu_count",
                      "gpu_model", "gpu_count", "python_version", "codecarbon_version")}}


def _source_cell(finding, origins: dict[str, list[dict[str, SourceRow]]]):
    """The source file, line and column behind a finding on the staged package."""
    rows = origins.get(finding.resource, [])
    if not 2 <= finding.row < len(rows) + 2:
        return None
    cells = rows[finding.row - 2]
    row = cells.get(finding.field, cells["*"])
    return row.path, row.line, SOURCE_COLUMNS.get(finding.field, finding.field), ""
