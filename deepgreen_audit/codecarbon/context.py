"""What the checks of a CodeCarbon log read: its rows (typed once), how each component's power
of each row was obtained (`components`), and the frame under the campaign audit's column names
that lets its S5 checks run unchanged (`blocks`, `block_runs`: a `Frame`, as the campaign
audit's; the log's own checks read pandas, being off the audit's fast path)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from deepgreen_audit.audit.rows import LOG_WORDS
from deepgreen_audit.codecarbon import hardware
from deepgreen_audit.codecarbon.layout import COMPONENTS, major, release
from deepgreen_audit.columnar.frame import Frame, joined
from deepgreen_audit.errors import UserError
from deepgreen_audit.package import paths
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.spec import AuditTolerances, load_spec
from deepgreen_audit.units import J_PER_KWH

TABLE = "codecarbon_log"
_NULLABLE = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}

#: The status of a component's power in one row.
MEASURED, MODELLED, UNVERIFIED, NOT_TRACKED, ABSENT, UNKNOWN = (
    "measured", "modelled", "measured or modelled", "not tracked", "absent", "not logged")


def _f(value) -> float:
    try:
        return float(value) if value is not None and value is not pd.NA else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def _joules(kwh: np.ndarray) -> np.ndarray:
    """kWh in joules.  A cell beyond 5e301 kWh is inf in joules: said by S5.cc-magnitudes,
    which fails it as no possible energy, so numpy's overflow warning is not printed too."""
    with np.errstate(over="ignore"):
        return kwh * J_PER_KWH


def _with_pue(row, power: float, models_of) -> list[str]:
    """The CodeCarbon models that give `power`, or, where the row's pue is above 1, that give it
    once the PUE is divided out (CodeCarbon 3 multiplies the power by it, e.g. a 20 W RAM model
    at pue 1.5 logs 30 W)."""
    found = models_of(power)
    pue = _f(row.get("pue"))
    if found or not (np.isfinite(pue) and pue > 1):
        return found
    return [f"{model}, x PUE {pue:g}" for model in models_of(power / pue)]


def frame_of(data: list[dict] | dict[str, list], columns: list[str] | None = None) -> pd.DataFrame:
    """A pandas frame of rows (dicts) or columns (lists) whose texts stay the Python objects
    given (object dtype): pandas' own strings make a new object each time a cell is read, and
    a long log's evidence reads every cell.  Numbers and booleans are inferred as pandas does."""
    if isinstance(data, list):
        names = columns or list(dict.fromkeys(k for row in data for k in row))
        data = {name: [row.get(name) for row in data] for name in names}
    names = columns or list(data)

    def column(values: list) -> pd.Series:
        texts = any(isinstance(v, str) for v in values)
        return pd.Series(values, dtype=object if texts else None)
    return pd.DataFrame({name: column(data[name]) for name in names}, columns=names)


class Row:
    """One row of a log: its cells by column name, read from columns shared by every row."""

    __slots__ = ("_columns", "_position")

    def __init__(self, columns: dict[str, Any], position: int):
        self._columns = columns
        self._position = position

    def __getitem__(self, name: str):
        return self._columns[name][self._position]

    def get(self, name: str, default=None):
        column = self._columns.get(name)
        return default if column is None else column[self._position]


class Records:
    """Each row's cells by name, by the row's label in `rows` (its position: a RangeIndex)."""

    __slots__ = ("_columns", "_length")

    def __init__(self, columns: dict[str, Any], length: int):
        self._columns = columns
        self._length = length

    def __getitem__(self, label: int) -> Row:
        if not 0 <= label < self._length:
            raise KeyError(label)
        return Row(self._columns, label)


def _cells(column: pd.Series):
    """A column's cells as the checks read them: floats and texts as numpy arrays (whose items
    are floats, or the texts' shared objects), anything else as Python values."""
    if column.dtype == np.float64 or column.dtype == object:
        return column.to_numpy()
    return column.tolist()


def _each_distinct(values, of: Callable[[Any], Any], dtype: type = bool) -> np.ndarray:
    """`of` each value, computed once per distinct value, one result object for the values
    alike (a long log repeats a few)."""
    found: dict = {}
    out: np.ndarray = np.empty(len(values), dtype=dtype)
    out[:] = [found[v] if v in found else found.setdefault(v, of(v)) for v in values]
    return out


#: The words that mark a CPU row the load model decides (context._load_model_reading).
_LOAD_MODEL_DECIDED = ("load model at its floor", "load model at its ceiling")


def _same_cpu_source(components: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """CodeCarbon picks its CPU source once, when a tracker starts on a machine (a readable
    counter, else its load model): where some runs of a log on one CPU and version sit at the
    load model's floor or ceiling and none lies outside the model, that log's runs between the
    two are the model too, and say which runs show it."""
    cpu = components[components["component"] == "cpu"]
    if cpu.empty:
        return components
    keys = rows.loc[cpu["index"], ["source_file", "cpu_model", "cpu_count", "codecarbon_version"]]
    machine = keys.groupby(list(keys.columns), dropna=False, sort=False).ngroup().to_numpy()
    how = cpu["how"].to_numpy(dtype=object)
    decided = _each_distinct(how, lambda h: h.startswith(_LOAD_MODEL_DECIDED))
    counter = _each_distinct(how, lambda h: "outside what CodeCarbon's load model gives" in h)
    between = ((cpu["status"] == UNVERIFIED).to_numpy()
               & _each_distinct(how, lambda h: "between the load model's floor" in h))
    for key in set(machine[between]):
        same = machine == key
        if counter[same].any() or not decided[same].any():
            continue
        lines = cpu["source_line"].to_numpy()[same & decided]
        shown = ", ".join(str(int(n)) for n in sorted(lines)[:3]) + (" ..." if len(lines) > 3 else "")
        for i in cpu.index[same & between]:
            components.loc[i, "status"] = MODELLED
            components.loc[i, "how"] = (f"load model: {components.loc[i, 'how'].split('; ')[-1]}; "
                                        f"runs of this log on the same CPU and version sit at the "
                                        f"model's floor or ceiling (line {shown}), and CodeCarbon "
                                        "picks its CPU source once per machine")
    return components


#: The columns the import keeps for the package's readers that no check reads: left out of
#: `rows`, which is most of a long log's audit's memory.
UNREAD = ("water_consumed_l", "wue", "country_name", "longitude", "latitude", "on_cloud",
          "cpu_utilization_percent", "gpu_utilization_percent", "ram_utilization_percent",
          "ram_used_gb", "extra_columns")
COMPONENT_COLUMNS = ["index", "source_file", "source_line", "run_key", "final_row", "component",
                     "power_w", "energy_kwh", "status", "how", "constant"]


class LogContext:
    """A CodeCarbon-log package under audit."""

    def __init__(self, package: Package, spec: dict | None = None, integrity=None,
                 typed_tables: dict | None = None):
        self.package = package
        self.spec = spec or load_spec()
        #: the specification's [audit] tolerances, typed once (a fault in them stops the audit)
        self.tolerances = AuditTolerances.of(self.spec)
        #: the nouns of its findings: a log's rows are rows
        self.words = LOG_WORDS
        self.integrity = integrity
        typed = (typed_tables or {}).get(TABLE) or package.table(TABLE)
        # the table is read once, into `rows`, which every check reads from then on
        columns = Frame.from_arrow(typed)
        text = {f.name for f in typed.schema if pa.types.is_string(f.type)}
        read = [name for name in typed.column_names if name not in UNREAD]
        others = typed.select([n for n in read if n not in text]).to_pandas(
            types_mapper=_NULLABLE.get)
        # Python strings, not pandas' Arrow-backed `str`: the checks read cells one by one, which
        # costs an Arrow scalar each time (a third of the audit's time on a thousand logs); one
        # object per distinct text, as a long log repeats its host's in every row
        rows = pd.DataFrame({name: pd.Series(columns[name], dtype=object, copy=False,
                                             index=others.index)
                             if name in text else others[name] for name in read})
        rows["final_row"] = rows["final_row"].astype(bool)
        rows["major"] = [major(v) if isinstance(v, str) else
                         (1 if lay == "1.x" else (2 if lay.startswith("2") else 3))
                         for v, lay in zip(rows["codecarbon_version"], rows["layout"])]
        self.rows = rows

    @cached_property
    def sources(self) -> list[dict]:
        """What the import recorded of each log it read (codecarbon-sources.json); none for a
        package without the file (or with a damaged one)."""
        path = self.package.descriptor_path.parent / "codecarbon-sources.json"
        with contextlib.suppress(UserError, ValueError, KeyError, TypeError):
            found = json.loads(paths.read_bytes(path))["sources"]
            if isinstance(found, list) and all(isinstance(s, dict) for s in found):
                return found
        return []

    @cached_property
    def source_files(self) -> list[str]:
        """Every log the import read, those without rows too."""
        names = set(self.rows["source_file"]) | {str(s.get("source_file")) for s in self.sources
                                                 if s.get("source_file") is not None}
        return sorted(names)

    @cached_property
    def rejected_rows(self) -> pd.DataFrame:
        """The rows the import could not read (another number of cells than the header: a torn
        row), one per row: its log, line, cell counts and text."""
        rows = [{"source_file": s.get("source_file"), "source_line": r.get("line"),
                 "cells": r.get("cells"), "header_cells": r.get("header_cells"),
                 "last_row": r.get("last_row") is True, "text": r.get("text")}
                for s in self.sources for r in (s.get("rejected_rows") or []) if isinstance(r, dict)]
        return pd.DataFrame(rows, columns=["source_file", "source_line", "cells", "header_cells",
                                           "last_row", "text"])


    @cached_property
    def records(self) -> Records:
        """Each row's cells by name, by its label in `rows`: what the checks that read a row's
        cells one by one read (a frame's `.at` costs tens of microseconds a cell).  The cells
        are held column by column, a text once however many rows repeat it, so a long log's
        rows cost nothing more than its columns."""
        r = self.rows
        return Records({str(name): _cells(r[name]) for name in r.columns}, len(r))

    @property
    def finals(self) -> pd.DataFrame:
        """One row per CodeCarbon run: its last (cumulative) row."""
        return self.rows[self.rows["final_row"]]

    @cached_property
    def components(self) -> pd.DataFrame:
        """One row per (source row, component): power, energy, status (measured, modelled,
        measured or modelled, not tracked, absent, not logged), how, and whether the power is a
        model's constant (then energy must be power x duration)."""
        r = self.rows
        repeated = self._repeated_powers()
        out: dict[str, list] = {name: [] for name in COMPONENT_COLUMNS}
        words: dict[str, str] = {}   # one object per distinct `how`: a long log repeats a few
        for i in r.index:
            row = self.records[i]
            for comp in COMPONENTS:
                power, energy = _f(row[f"{comp}_power_w"]), _f(row[f"{comp}_energy_kwh"])
                status, how, constant = self._classify(row, comp, power, energy, repeated)
                if comp == "cpu" and status == UNVERIFIED:
                    status, how = self._load_model_reading(row, power, energy, how)
                for name, value in (("index", i), ("source_file", row["source_file"]),
                                    ("source_line", int(row["source_line"])),
                                    ("run_key", row["run_key"]), ("final_row", bool(row["final_row"])),
                                    ("component", comp), ("power_w", power), ("energy_kwh", energy),
                                    ("status", status), ("how", words.setdefault(how, how)),
                                    ("constant", constant)):
                    out[name].append(value)
        return _same_cpu_source(frame_of(out, COMPONENT_COLUMNS), r)

    def _load_model_reading(self, row, power_w: float, energy_kwh: float,
                            how: str) -> tuple[str, str]:
        """A 3.x CPU power that varies, judged by the run's energy over its duration (from 3.1.2
        the power column is the unweighted mean of its readings, start()'s near-empty one
        included; before, the last reading): at the load model's floor (where the log's
        release and tracking mode have one) or ceiling for a guessed TDP it is the model,
        outside the two a counter; between, the log cannot tell (`how` gains the reason)."""
        if row["major"] is None or row["major"] < 3:
            return UNVERIFIED, how
        duration, pue = _f(row["duration_s"]), _f(row.get("pue"))
        factor = pue if np.isfinite(pue) and pue > 1 else 1.0
        if not (np.isfinite(duration) and duration > 0):
            return UNVERIFIED, how
        reading = hardware.load_model_reading(
            energy_kwh * J_PER_KWH / duration / factor, power_w / factor, row["cpu_model"],
            _f(row["cpu_count"]), float(self.tolerances.load_model_bound_relative_tolerance),
            hardware.load_model(release(row["codecarbon_version"]), row["tracking_mode"]))
        if reading is None:
            return UNVERIFIED, how
        pue_note = f", PUE {factor:g} divided out" if factor > 1 else ""
        if reading.position in ("floor", "ceiling"):
            return MODELLED, reading.how + pue_note
        if reading.position == "outside":
            return MEASURED, reading.how + pue_note
        return UNVERIFIED, f"{how}; {reading.how}{pue_note}"

    def _repeated_powers(self) -> set:
        """(file, component, hardware, power) that one log reports for two or more runs, and
        for at least load_model_mode_share of that hardware's runs: a measured power never
        repeats to every digit like that, a model's constant does.  Below
        repeated_power_min_w a repeat is a sensor at its resolution (an idle GPU's NVML reading,
        powermetrics' milliwatts), not a model."""
        f = self.finals
        found = set()
        for comp in COMPONENTS:
            hw = f["gpu_model"] if comp == "gpu" else f["cpu_model"]
            power = f[f"{comp}_power_w"].astype(float)
            frame = pd.DataFrame({"file": f["source_file"], "hw": hw.fillna(""), "p": power,
                                  "run": f["run_key"]}).dropna(subset=["p"])
            frame = frame[frame["p"] >= self.tolerances.repeated_power_min_w]
            counts = frame.groupby(["file", "hw", "p"])["run"].nunique()
            runs = frame.groupby(["file", "hw"])["run"].nunique()
            share = float(self.tolerances.load_model_mode_share)
            found |= {(file, comp, hw, p) for (file, hw, p), n in counts.items()
                      if n >= 2 and n >= share * runs[(file, hw)]}
        return found

    def _classify(self, row, comp, power, energy, repeated):
        if np.isnan(power) and np.isnan(energy):
            return (UNKNOWN, "CodeCarbon 1.x logs no per-component power or energy", False) \
                if row["layout"] == "1.x" else (ABSENT, "empty cells", False)
        if (np.isnan(power) or power == 0) and (np.isnan(energy) or energy == 0):
            if comp == "cpu":
                return NOT_TRACKED, "0 W and 0 kWh: CodeCarbon did not track the CPU, so the " \
                                    "total leaves it out", False
            return ABSENT, f"no {comp.upper()} tracked", False
        hw = row["gpu_model"] if comp == "gpu" else row["cpu_model"]
        key = (row["source_file"], comp, hw if isinstance(hw, str) else "", power)
        constant_runs = key in repeated
        m = row["major"]
        if comp == "cpu":
            models = _with_pue(row, power, lambda p: hardware.cpu_models(
                p, row["cpu_model"], _f(row["cpu_count"]), m))
            # a constant's energy is power x duration; in process mode the power is the
            # process's share of it, sample by sample, and the load model varies
            steady = row["tracking_mode"] != "process"
            if models:
                load_floor = all(x.startswith("load-model floor") for x in models)
                return MODELLED, " or ".join(models), steady and not load_floor
            if constant_runs:
                return MODELLED, f"one constant {power:g} W in several runs (a measured power " \
                                 "never repeats to every digit); no CodeCarbon model of this CPU " \
                                 "in its table gives it", steady
            version = release(row["codecarbon_version"])
            if (m is not None and m >= 3) or (version is not None
                                              and version >= hardware.LOAD_MODEL_SINCE):
                model = hardware.load_model(version, row["tracking_mode"])
                return UNVERIFIED, ("varies: a power counter (RAPL, powermetrics) or CodeCarbon's "
                                    f"load model ({model.formula}); the log does not say which"), False
            return MEASURED, "varies: a power counter (RAPL, Power Gadget, powermetrics); " \
                             "CodeCarbon before 2.8.5 has no load model", False
        if comp == "ram":
            models = _with_pue(row, power, lambda p: hardware.ram_models(
                p, row["ram_total_size_gb"], row["cpu_model"], row["os"], m, row["tracking_mode"]))
            if models:
                return MODELLED, " or ".join(models), not models[0].startswith("process")
            return MODELLED, "no RAM model of its version gives this power; CodeCarbon never " \
                             "measures RAM power", constant_runs
        if constant_runs:
            return MODELLED, f"one constant {power:g} W in several runs: not a GPU reading", True
        name = str(hw or "")
        source = "powermetrics" if "Apple" in name else "NVML" if ("NVIDIA" in name or " x " in name) \
            else "the GPU's driver"
        return MEASURED, f"varies: read from {source}", False

    # ------------------------------------------------ the campaign audit's column names

    @cached_property
    def blocks(self) -> Frame:
        """The rows under the names the campaign audit's S5 checks read: a row is a 'block',
        its log the 'ecosystem', its line the 'epoch' (the reused checks' evidence is renamed
        back by the driver)."""
        rows = self.rows

        def r(name: str) -> np.ndarray:
            column = rows[name]
            if pd.api.types.is_numeric_dtype(column.dtype):
                return column.to_numpy(dtype=float, na_value=np.nan)
            return column.to_numpy(dtype=object)
        source, kwh = r("source_file"), r("energy_consumed_kwh")
        columns = {
            "run_id": joined(source, ":", r("run_key")), "ecosystem": source,
            "epoch": r("source_line"), "phase": np.where(rows["final_row"].to_numpy(dtype=bool),
                                                         "final", "flush").astype(object),
            **{name: np.full(len(rows), np.nan) for name in ("energy_j", "gpu_energy_j",
                                                             "cpu_energy_j")},
            "duration_s": r("duration_s"), "codecarbon_duration_s": r("duration_s"),
            "codecarbon_energy_kwh": kwh, "codecarbon_energy_j": _joules(kwh),
            "codecarbon_emissions_kg": r("emissions_kg"),
            "codecarbon_emissions_rate_kg_per_s": r("emissions_rate_kg_per_s"),
            # one intensity per location of one log: logs of other years and versions use
            # other intensity data for the same place
            "codecarbon_country_iso_code": _each_distinct(
                list(zip(source, r("country_iso_code"))),
                lambda pair: f"{pair[0]}:{'?' if pair[1] is None else pair[1]}", object),
            "codecarbon_region": _each_distinct(
                r("region"), lambda v: None if v is None else v.lower(), object),
            "codecarbon_version": _each_distinct(
                list(zip(r("codecarbon_version"), r("layout"))),
                lambda pair: pair[1] + " (no version column)" if pair[0] is None else pair[0], object),
        }
        for comp in COMPONENTS:
            columns[f"codecarbon_{comp}_energy_kwh"] = r(f"{comp}_energy_kwh")
            columns[f"codecarbon_{comp}_power_w"] = r(f"{comp}_power_w")
        return Frame.of(columns, integer=["epoch"])

    @property
    def block_runs(self) -> Frame:
        """The same frame: a log has no runs table to join."""
        return self.blocks

