"""CodeCarbon's emissions.csv layouts, 1.x to 3.x, and how their columns map to the package's.

CodeCarbon writes one row per tracker stop (and per flush) with the columns of its
`EmissionsData` dataclass (codecarbon/output_methods/emissions_data.py), in the dataclass's
order; the set grew over the versions and the order moved when columns were added:

* 1.x: timestamp, experiment_id, project_name, duration, emissions, energy_consumed, the
  location and cloud columns; no run_id, no per-component power or energy.
* early 2.x (2.0, 2.1): run_id and cpu/gpu/ram power and energy, the hardware columns, no
  codecarbon_version (and no pue).
* 2.x: codecarbon_version, pue; experiment_id returns in 2.4+.
* 3.x: water_consumed and wue, cpu/gpu/ram utilisation and ram_used_gb (3.1+); older rows of
  an appended file keep their own layout, so one file can hold several.
* task files (2.5+, `start_task`/`stop_task`): at stop, CodeCarbon writes
  `emissions_<experiment>_<run_id>.csv` beside the run's row, one row per task
  (`TaskEmissionsData`: task_name first, no experiment_id, pue or wue), each the task's own
  delta over its window; all share the run's run_id.

Units are CodeCarbon's documented ones (docs.codecarbon.io, "Output"): duration s,
emissions kg CO2eq, emissions_rate kg/s, *_power W, *_energy and energy_consumed kWh,
ram_total_size GB, water_consumed L, wue L/kWh.  The package's column names carry them.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.version import InvalidVersion, Version

#: CodeCarbon's column -> the package's column (codecarbon_log.json).
COLUMNS = {
    "timestamp": "timestamp", "project_name": "project_name", "run_id": "run_id",
    "experiment_id": "experiment_id", "task_name": "task_name", "duration": "duration_s", "emissions": "emissions_kg",
    "emissions_rate": "emissions_rate_kg_per_s", "cpu_power": "cpu_power_w",
    "gpu_power": "gpu_power_w", "ram_power": "ram_power_w", "cpu_energy": "cpu_energy_kwh",
    "gpu_energy": "gpu_energy_kwh", "ram_energy": "ram_energy_kwh",
    "energy_consumed": "energy_consumed_kwh", "water_consumed": "water_consumed_l",
    "country_name": "country_name", "country_iso_code": "country_iso_code", "region": "region",
    "cloud_provider": "cloud_provider", "cloud_region": "cloud_region", "os": "os",
    "python_version": "python_version", "codecarbon_version": "codecarbon_version",
    "cpu_count": "cpu_count", "cpu_model": "cpu_model", "gpu_count": "gpu_count",
    "gpu_model": "gpu_model", "longitude": "longitude", "latitude": "latitude",
    "ram_total_size": "ram_total_size_gb", "tracking_mode": "tracking_mode",
    "cpu_utilization_percent": "cpu_utilization_percent",
    "gpu_utilization_percent": "gpu_utilization_percent",
    "ram_utilization_percent": "ram_utilization_percent", "ram_used_gb": "ram_used_gb",
    "on_cloud": "on_cloud", "pue": "pue", "wue": "wue",
}

#: Columns every CodeCarbon layout has: a file without them is not CodeCarbon output.
REQUIRED = ("timestamp", "project_name", "duration", "emissions", "energy_consumed")
#: Columns whose values carry the measurement (a row without them measured nothing).
MEASUREMENT = ("duration", "emissions", "energy_consumed")
COMPONENTS = ("cpu", "gpu", "ram")
LAYOUTS = ("1.x", "2.x-early", "2.x", "3.x")
#: Columns new in CodeCarbon 3 (water from 3.0? utilisation from 3.1): their presence means 3.x.
V3_COLUMNS = ("water_consumed", "wue", "cpu_utilization_percent", "ram_used_gb")


def layout_of(header: list[str]) -> str:
    """The layout a header belongs to (see the module docstring)."""
    names = set(header)
    if "cpu_power" not in names and "run_id" not in names:
        return "1.x"
    if "codecarbon_version" not in names:
        return "2.x-early"
    if names & set(V3_COLUMNS):
        return "3.x"
    return "2.x"


def major(version) -> int | None:
    """The major version of a CodeCarbon version text ('2.3.4' -> 2); None when unreadable."""
    try:
        return int(str(version).strip().split(".")[0])
    except (ValueError, AttributeError):
        return None


@lru_cache(maxsize=4096)
def release(version) -> tuple[int, ...] | None:
    """The release numbers of a CodeCarbon version text ('3.1.2rc1' -> (3, 1, 2)), as PEP 440
    reads it; None when unreadable."""
    if not isinstance(version, str):
        return None
    try:
        return Version(version.strip()).release
    except InvalidVersion:
        return None


def row_layout(file_layout: str, version) -> str:
    """A row's layout: its file's, refined by the row's own codecarbon_version."""
    m = major(version)
    if file_layout in ("2.x", "3.x") and m is not None and m >= 2:
        return "3.x" if m >= 3 else "2.x"
    return file_layout
