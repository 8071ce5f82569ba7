"""FECoM/Greenlight records <-> the API-level package.

`import_greenlight(PATH, OUT)` reads every experiment file under PATH
(`discover`), computes each call's figures with FECoM's method (`fecom`),
and writes `api_calls` (one row per record) and `api_samples` (every
sample of every series, as recorded).  `records_from_package` turns a
package back into `CallRecord`s, so the summaries can be recomputed from
the package alone.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import numpy as np

from deepgreen_audit.errors import UserError, path_text
from deepgreen_audit.greenlight.discover import read_tree
from deepgreen_audit.greenlight.fecom import call_figures, execution_time_s
from deepgreen_audit.greenlight.package import open_api_package, text_table, write_api_package
from deepgreen_audit.greenlight.records import INPUT_SIZES, NANOSECOND_TIMES, SERIES_COLUMNS, CallRecord, Series, short
from deepgreen_audit.package.checked import refuse_invalid
from deepgreen_audit.package.kinds import API_PROFILES
from deepgreen_audit.package.schema import load_schema

#: api_calls column <- times.<key> (the raw times, unit in the column name).
TIME_COLUMNS = {
    "start_time_execution_ns": "start_time_execution", "end_time_execution_ns": "end_time_execution",
    "start_time_perf_s": "start_time_perf", "end_time_perf_s": "end_time_perf",
    "sys_start_time_perf_ns": "sys_start_time_perf", "start_time_nvidia_s": "start_time_nvidia",
    "end_time_nvidia_s": "end_time_nvidia", "sys_start_time_nvidia_ns": "sys_start_time_nvidia",
    "begin_stable_check_time_ns": "begin_stable_check_time",
    "begin_temperature_check_time_ns": "begin_temperature_check_time",
}
#: api_calls column <- settings.<key>.
SETTING_COLUMNS = {
    "max_wait_s": "max_wait_s", "wait_after_run_s": "wait_after_run_s",
    "wait_per_stable_check_loop_s": "wait_per_stable_check_loop_s", "tolerance": "tolerance",
    "measurement_interval_s": "measurement_interval_s", "cpu_std_to_mean": "cpu_std_to_mean",
    "ram_std_to_mean": "ram_std_to_mean", "gpu_std_to_mean": "gpu_std_to_mean",
    "check_last_n_points": "check_last_n_points", "cpu_max_temp_c": "cpu_max_temp",
    "gpu_max_temp_c": "gpu_max_temp", "cpu_temperature_interval_s": "cpu_temperature_interval_s",
}
#: api_calls column <- project_metadata.<key>.
METADATA_COLUMNS = {"project_repository": "project_repository", "project_commit": "project_commit",
                    "script_path": "script_path", "api_call_line": "api_call_line"}
#: per-domain api_calls column suffix <- DomainFigures attribute.
FIGURE_COLUMNS = {
    "samples_in_execution": "samples_in_execution", "baseline_samples": "baseline_samples",
    "baseline_power_w": "baseline_power_w", "baseline_std_to_mean": "baseline_std_to_mean",
    "total_j": "total_j", "total_normalised_j": "total_normalised_j",
    "lag_time_s": "lag_time_s", "lag_j": "lag_j", "lag_normalised_j": "lag_normalised_j",
    "total_lag_normalised_j": "total_lag_normalised_j", "power_mean_w": "power_mean_w",
    "power_stdev_w": "power_stdev_w",
}
SHORT_CALL_REASON = ("no {domains} sample inside the execution window: the call ran {duration:.3g} s, "
                     "shorter than about one {interval} s sampling interval")


def utc(ns: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ns // 1_000_000_000, _dt.UTC).replace(
        microsecond=(ns % 1_000_000_000) // 1000)


def call_row(record: CallRecord) -> dict:
    """The api_calls row of one imported record (figures by FECoM's method)."""
    figures = call_figures(record)
    t = record.times
    row: dict[str, object] = {f.name: None for f in load_schema("api_calls").fields}
    row.update({
        "call_id": record.call_id, "source": record.source,
        "experiment_kind": record.experiment_kind, "project": record.project,
        "experiment": record.experiment, "position": record.position,
        "api_call": record.api_call, "function": record.function,
        "source_file": record.source_file, "in_skip_calls": record.in_skip_calls,
        "started_at_utc": utc(t["start_time_execution"]), "ended_at_utc": utc(t["end_time_execution"]),
        "execution_time_s": execution_time_s(record), "repetitions": 1,
    })
    for column, key in TIME_COLUMNS.items():
        row[column] = t.get(key)
    if "begin_stable_check_time" in t:
        row["stable_check_wait_s"] = max(0, t["start_time_execution"] - t["begin_stable_check_time"]) / 1e9
    for column, key in SETTING_COLUMNS.items():
        row[column] = record.settings.get(key)
    for column, key in METADATA_COLUMNS.items():
        row[column] = record.metadata.get(key)
    for key in INPUT_SIZES:
        row[f"{key}_bytes"] = record.input_sizes.get(key)
    for domain, fig in figures.items():
        for suffix, attribute in FIGURE_COLUMNS.items():
            row[f"{domain}_{suffix}"] = getattr(fig, attribute)
    empty = [d for d, f in figures.items() if f.samples_in_execution == 0]
    if empty:
        row["energy_missing_reason"] = SHORT_CALL_REASON.format(
            domains="/".join(d.upper() for d in empty), duration=execution_time_s(record),
            interval=record.interval_s)
    return row


def sample_columns(records: list[CallRecord]) -> dict[str, list]:
    names = load_schema("api_samples").field_names
    parts: dict[str, list] = {n: [] for n in names}
    for record in records:
        for series_name, series in record.series.items():
            n = len(series)
            parts["call_id"].append(np.full(n, record.call_id, dtype=object))
            parts["series"].append(np.full(n, series_name, dtype=object))
            parts["sample"].append(series.sample)
            for column in ("time_elapsed_s", "energy_j", "power_w", "temperature_c"):
                parts[column].append(series.columns.get(column, np.full(n, np.nan)))
            stamp = series.columns.get("timestamp_epoch_s")
            if stamp is None and "timestamp_epoch_ns" in series.columns:
                stamp = series.columns["timestamp_epoch_ns"] / 1e9
            parts["timestamp_epoch_s"].append(stamp if stamp is not None else np.full(n, np.nan))
    out = {}
    for name, chunks in parts.items():
        values = np.concatenate(chunks) if chunks else np.array([])
        if values.dtype.kind == "f":
            out[name] = [None if np.isnan(v) else float(v) for v in values.tolist()]
        elif values.dtype.kind in "iu":
            out[name] = [int(v) for v in values.tolist()]
        else:
            out[name] = list(values)
    return out


def tables_from_records(records: list[CallRecord]) -> dict:
    rows = [call_row(r) for r in records]
    calls = {name: [row[name] for row in rows] for name in load_schema("api_calls").field_names}
    return {"api_calls": text_table("api_calls", calls),
            "api_samples": text_table("api_samples", sample_columns(records))}


def import_greenlight(source: Path, out: Path, *, overwrite: bool = False,
                      records: list[CallRecord] | None = None) -> dict:
    """Import every record under `source` (`records`, where the caller has read them already)
    into a package at `out`; returns counts and records."""
    source = Path(source)
    records = read_tree(source) if records is None else records
    tables = tables_from_records(records)
    meta = {"name": "api-profiles", "title": "API-level energy profiles imported from "
                                                f"{path_text(source.name)}",
            "provenance": {"importer": "deepgreen import greenlight", "source": path_text(source),
                           "method": "FECoM (docs/greenlight.md)"}}
    by_id = {r.call_id: r for r in records}
    descriptor = write_api_package(
        tables, Path(out), meta, overwrite=overwrite, inputs=[source],
        check=refuse_invalid(lambda finding: _source_cell(finding, tables, by_id, source),
                             API_PROFILES))
    return {"descriptor": descriptor, "calls": len(tables["api_calls"].rows),
            "samples": len(tables["api_samples"].rows),
            "without_energy": sum(1 for r in tables["api_calls"].rows
                                  if r[tables["api_calls"].header.index("energy_missing_reason")]),
            "projects": len({(r.source, r.experiment_kind, r.project) for r in records}),
            "records": records}


#: api_calls column -> where in a record (or its folder) the value came from.
SOURCE_FIELDS = {
    "call_id": "its folder's path (the project)", "project": "its folder's path (the project)",
    "api_call": "the call signature", "function": "the call signature",
    "started_at_utc": "times.start_time_execution", "ended_at_utc": "times.end_time_execution",
    **{column: f"times.{key}" for column, key in TIME_COLUMNS.items()},
    **{column: f"settings.{key}" for column, key in SETTING_COLUMNS.items()},
    **{column: f"project_metadata.{key}" for column, key in METADATA_COLUMNS.items()},
    **{f"{key}_bytes": f"input_sizes.{key}" for key in INPUT_SIZES}}


def _source_cell(finding, tables: dict, by_id: dict[str, CallRecord], source: Path):
    """The record file, record and field behind a finding on the staged package."""
    table = tables.get(finding.resource)
    if table is None or not 2 <= finding.row < len(table.rows) + 2:
        return None
    record = by_id.get(table.rows[finding.row - 2][table.header.index("call_id")])
    if record is None or record.source_file is None:
        return None
    field = SOURCE_FIELDS.get(finding.field, "energy_data" if finding.resource == "api_samples"
                              else finding.field)
    return (str(source / record.source_file), None, None,
            f"record {record.position + 1} (call {short(record.api_call)!r}), {field}: ")


def records_from_package(location: Path) -> list[CallRecord]:
    """The imported records of a (validated) package, back as CallRecords."""
    package = open_api_package(location)
    calls = package.table("api_calls").to_pylist()
    samples = package.table("api_samples").to_pandas()
    # iter(): a GroupBy has a `keys` attribute, which dict() would take for a mapping's
    by_call = dict(iter(samples.groupby("call_id", sort=False)))
    records = []
    for row in calls:
        if row["source"] == "deepgreen":
            continue  # profile-api rows carry counter readings, not FECoM series
        times = {key: row[col] for col, key in TIME_COLUMNS.items() if row[col] is not None}
        for key in NANOSECOND_TIMES:
            if key in times:
                times[key] = int(times[key])
        series = {}
        frame = by_call.get(row["call_id"])
        if frame is None:
            raise UserError(f"call {row['call_id']} has no samples", path=location)
        for name, part in frame.groupby("series", sort=False, observed=True):
            wanted = set(SERIES_COLUMNS[name].values()) | {"timestamp_epoch_s"}
            series[name] = Series(sample=part["sample"].to_numpy(np.int64), columns={
                c: part[c].to_numpy(float) for c in part.columns
                if c in wanted and c not in ("call_id", "series", "sample")})
        records.append(CallRecord(
            source=row["source"], experiment_kind=row["experiment_kind"], project=row["project"],
            experiment=row["experiment"], position=row["position"], api_call=row["api_call"],
            source_file=row["source_file"], times=times,
            settings={key: row[col] for col, key in SETTING_COLUMNS.items() if row[col] is not None},
            input_sizes={k: row[f"{k}_bytes"] for k in INPUT_SIZES}, series=series,
            metadata={k: row[c] for c, k in METADATA_COLUMNS.items() if row[c] is not None},
            in_skip_calls=bool(row["in_skip_calls"])))
    return records
