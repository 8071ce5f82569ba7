"""FECoM and Greenlight experiment records, parsed strictly into `CallRecord`s.

An experiment file (`experiment-N.json`) is a list of one-key objects
`{"<api call signature>": {energy_data, times, settings, input_sizes,
cpu_temperatures?, project_metadata?}}` in the order the calls ran (FECoM's
`fecom/experiment/data.py`).  `energy_data.{cpu,ram,gpu}` and
`cpu_temperatures` are pandas DataFrames serialised with `orient="split"`
(as JSON text).  A project-level record has the key `"project-level"`.
Greenlight (CodeGreen) records add `project_metadata`.

Every problem raises a `UserError` naming the file, the record number and
the call, so a malformed record is found without a debugger.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths

#: times.* keys the method needs; the other FECoM times are kept when present.
REQUIRED_TIMES = ("start_time_execution", "end_time_execution", "start_time_perf",
                  "end_time_perf", "start_time_nvidia", "end_time_nvidia")
OPTIONAL_TIMES = ("sys_start_time_perf", "sys_start_time_nvidia", "begin_stable_check_time",
                  "begin_temperature_check_time")
#: settings.* keys the method needs.  FECoM: data gathered before 4 May 2023 has no
#: measurement_interval_s; its value then was 0.5 s, which FECoM's loader assumes.
#: times.* keys in epoch nanoseconds (integers).
NANOSECOND_TIMES = ("start_time_execution", "end_time_execution") + OPTIONAL_TIMES
REQUIRED_SETTINGS = ("wait_per_stable_check_loop_s",)
DEFAULT_SETTINGS = {"measurement_interval_s": 0.5}
OPTIONAL_SETTINGS = ("max_wait_s", "wait_after_run_s", "tolerance", "cpu_std_to_mean",
                     "ram_std_to_mean", "gpu_std_to_mean", "check_last_n_points", "cpu_max_temp",
                     "gpu_max_temp", "cpu_temperature_interval_s")
INPUT_SIZES = ("args_size", "kwargs_size", "object_size")
#: Source column -> package column, per series; the first two of each are required.
SERIES_COLUMNS = {
    "cpu": {"time_elapsed": "time_elapsed_s", "energy (J)": "energy_j"},
    "ram": {"time_elapsed": "time_elapsed_s", "energy (J)": "energy_j"},
    "gpu": {"time_elapsed": "time_elapsed_s", "power_draw (W)": "power_w",
            "timestamp": "timestamp_epoch_s", "temperature": "temperature_c"},
    "cpu_temperature": {"time_elapsed": "time_elapsed_s", "temperature": "temperature_c",
                        "timestamp": "timestamp_epoch_ns"},
}
#: The value column of each energy series (what FECoM sums).
VALUE_COLUMN = {"cpu": "energy_j", "ram": "energy_j", "gpu": "power_w"}
PROJECT_LEVEL_KEY = "project-level"
#: The first epoch nanosecond after 9999-12-31, the end of what a datetime holds.
LAST_NS = 253_402_300_800 * 10**9
EXPERIMENT_RE = re.compile(r"experiment-([1-9][0-9]*)\.json\Z")


def function_name(signature: str) -> str:
    """FECoM's function name: the signature with bracketed text removed (non-greedy)."""
    return re.sub(r"\(.*?\)", "", signature)


@dataclass(frozen=True)
class Series:
    """One recorded series: sample numbers and columns named as in api_samples."""

    sample: np.ndarray
    columns: dict[str, np.ndarray]

    @property
    def time_s(self) -> np.ndarray:
        return self.columns["time_elapsed_s"]

    def __len__(self) -> int:
        return len(self.sample)


@dataclass(frozen=True)
class CallRecord:
    """One measured call (or script) of one experiment, as recorded."""

    source: str
    experiment_kind: str
    project: str
    experiment: int
    position: int
    api_call: str
    source_file: str | None
    times: dict
    settings: dict
    input_sizes: dict
    series: dict[str, Series]
    metadata: dict = field(default_factory=dict)
    in_skip_calls: bool = False
    #: the file it was read from, as given, for a message that names it (None: from a package)
    read_from: str | None = field(default=None, compare=False)

    @property
    def call_id(self) -> str:
        return (f"{self.source}/{self.experiment_kind}/{self.project}/"
                f"experiment-{self.experiment:03d}/call-{self.position:04d}")

    @property
    def function(self) -> str:
        return function_name(self.api_call)

    @property
    def interval_s(self) -> float:
        return float(self.settings["measurement_interval_s"])


def short(signature: str) -> str:
    """A call signature as a message quotes it: it can be megabytes, the message is one line."""
    return signature if len(signature) <= 60 else signature[:57] + "..."


class RecordError(UserError):
    """A record that does not follow the FECoM/Greenlight format."""

    def __init__(self, path, index: int | None, call: str | None, message: str):
        where = "" if index is None else f"record {index + 1}"
        if call is not None:
            where += f" (call {short(call)!r})"
        super().__init__(f"{where}: {message}" if where else message, path=path,
                         code="malformed-record")


def read_experiment(path: Path, *, source: str, experiment_kind: str, project: str,
                    source_file: str | None = None, skip_calls: frozenset = frozenset()
                    ) -> list[CallRecord]:
    """All records of one experiment file, in order; a RecordError for the first bad one."""
    match = EXPERIMENT_RE.match(path.name)
    if not match:
        raise RecordError(path, None, None, "is not named experiment-N.json (N from 1)")
    try:
        data = json.loads(paths.read_bytes(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RecordError(path, None, None, f"is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, None, None, f"is not valid JSON: {exc.msg} at line {exc.lineno} "
                          f"column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # an integer of more digits than Python parses
        raise RecordError(path, None, None, f"is not readable JSON: {exc}") from None
    if not isinstance(data, list):
        raise RecordError(path, None, None, "must hold a JSON list of records")
    return [parse_record(path, i, item, source=source, experiment_kind=experiment_kind,
                         project=project, experiment=int(match.group(1)),
                         source_file=source_file, skip_calls=skip_calls)
            for i, item in enumerate(data)]


def parse_record(path, index: int, item, *, source: str, experiment_kind: str, project: str,
                 experiment: int, source_file: str | None, skip_calls: frozenset) -> CallRecord:
    if not isinstance(item, dict) or len(item) != 1:
        raise RecordError(path, index, None, "a record must be an object with exactly one key, "
                          "the call signature")
    (call, body), = item.items()
    if not isinstance(body, dict):
        raise RecordError(path, index, call, "the record's value must be an object")

    def fail(message: str):
        return RecordError(path, index, call, message)

    for key in ("energy_data", "times", "settings"):
        if not isinstance(body.get(key), dict):
            raise fail(f"{key} is missing or not an object")
    times = {}
    for key in REQUIRED_TIMES + OPTIONAL_TIMES:
        value = body["times"].get(key)
        if value is None and key in OPTIONAL_TIMES:
            continue
        if not _is_number(value):
            raise fail(f"times.{key} is missing or not a number")
        times[key] = value
    for key in NANOSECOND_TIMES:
        if key not in times:
            continue
        if not (isinstance(times[key], int) or float(times[key]).is_integer()):
            raise fail(f"times.{key} must be whole epoch nanoseconds, not {times[key]!r}")
        times[key] = int(times[key])
        if not 0 <= times[key] < LAST_NS:
            raise fail(f"times.{key} {times[key]} is not an epoch time in nanoseconds "
                       "(1970 to 9999)")
    if times["end_time_execution"] < times["start_time_execution"]:
        raise fail("times.end_time_execution is before times.start_time_execution")
    settings = dict(DEFAULT_SETTINGS)
    for key in REQUIRED_SETTINGS + tuple(DEFAULT_SETTINGS) + OPTIONAL_SETTINGS:
        value = body["settings"].get(key)
        if value is None and key not in REQUIRED_SETTINGS:
            continue
        if not _is_number(value):
            raise fail(f"settings.{key} is missing or not a number")
        settings[key] = value
    if not settings["measurement_interval_s"] > 0:
        raise fail("settings.measurement_interval_s must be positive")
    sizes = body.get("input_sizes") or {}
    if not isinstance(sizes, dict):
        raise fail("input_sizes must be an object")
    for key, value in sizes.items():
        if key in INPUT_SIZES and value is not None and (not _is_number(value) or value < 0):
            raise fail(f"input_sizes.{key} must be a non-negative number or null, not {value!r}")
    series = {}
    for name in ("cpu", "ram", "gpu"):
        series[name] = _series(body["energy_data"].get(name), name, f"energy_data.{name}", fail)
    if body.get("cpu_temperatures") is not None:
        series["cpu_temperature"] = _series(body["cpu_temperatures"], "cpu_temperature",
                                            "cpu_temperatures", fail)
    metadata = body.get("project_metadata") or {}
    if not isinstance(metadata, dict):
        raise fail("project_metadata must be an object")
    return CallRecord(source=source, experiment_kind=experiment_kind, project=project,
                      experiment=experiment, position=index, api_call=call,
                      source_file=source_file, times=times, settings=settings,
                      input_sizes={k: sizes.get(k) for k in INPUT_SIZES}, series=series,
                      metadata=metadata, in_skip_calls=call in skip_calls, read_from=str(path))


def _is_number(value) -> bool:
    """A JSON number that a double holds: not NaN, not infinite, not an integer beyond
    1.8e308 (which json parses exactly, and float() then refuses)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= sys.float_info.max if isinstance(value, int) else math.isfinite(value)


def _series(raw, name: str, label: str, fail) -> Series:
    """A pandas 'split' frame (JSON text or object) as a Series, every cell checked."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise fail(f"{label} is not valid JSON text: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise fail(f"{label} is not readable JSON text: {exc}") from None
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), list)
                                            for k in ("columns", "index", "data")):
        raise fail(f"{label} must be a pandas 'split' frame with columns, index and data")
    columns, index, data = raw["columns"], raw["index"], raw["data"]
    wanted = SERIES_COLUMNS[name]
    for required in list(wanted)[:2]:
        if required not in columns:
            raise fail(f"{label} lacks column {required!r} (has {columns})")
    if len(index) != len(data):
        raise fail(f"{label} has {len(index)} index entries but {len(data)} rows")
    if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 2**63 for i in index) \
            or len(set(index)) != len(index):
        raise fail(f"{label}: the index must be distinct integers from 0 to 2^63 - 1")
    out = {}
    for source_name, column in wanted.items():
        if source_name not in columns:
            continue
        j = columns.index(source_name)
        values = []
        for row_number, row in enumerate(data):
            if not isinstance(row, list) or len(row) != len(columns):
                raise fail(f"{label} row {row_number} has {len(row) if isinstance(row, list) else 'no'}"
                           f" cells, the frame has {len(columns)} columns")
            cell = row[j]
            if cell is None and column not in ("time_elapsed_s",):
                values.append(np.nan)
            elif _is_number(cell):
                values.append(float(cell))
            else:
                raise fail(f"{label} row {row_number} column {source_name!r}: {cell!r} is not a number")
        out[column] = np.asarray(values, dtype=float)
    time = out["time_elapsed_s"]
    if len(time) > 1 and np.any(np.diff(time) < 0):
        raise fail(f"{label}: time_elapsed goes backwards at row {int(np.argmax(np.diff(time) < 0)) + 1}")
    return Series(sample=np.asarray(index, dtype=np.int64), columns=out)
