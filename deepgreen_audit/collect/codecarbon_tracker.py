"""CodeCarbon 3.x as a second, independent reading over each block.

One `OfflineEmissionsTracker` per run, built from the pinned file
`collect/codecarbon.ini` (every key passed explicitly, nothing inherited from
the user's CodeCarbon files or environment), machine mode, 1 s interval.  A
block is one CodeCarbon task: `start_task` at the opening boundary,
`stop_task` at the closing one.  CodeCarbon 2.x is refused at start-up (it
falls back to a constant modelled CPU power without saying so).

How CodeCarbon obtained each device's power is derived, per block, from what it
publishes (CodeCarbon 3 has no public attribute for it): the CPU mode is the one it
states in the line it logs for every measurement ("Delta energy consumed for CPU with
intel_rapl : ..."; `cpu_load`, `constant`), heard by a handler on its logger while the
block is open, its own handlers kept at the pinned log level; the GPU method follows
from the GPUs its reading reports (`gpu_count`, `gpu_model`).  Both are mapped onto the
blocks schema's enums: a modelled CPU power is recorded as `tdp-constant` or
`load-model`, never passed off as `rapl`, and a mode it did not state is `unknown`.
"""

from __future__ import annotations

import configparser
import importlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.device.errors import CodeCarbonRefused
from deepgreen_audit.errors import unknown_name
from deepgreen_audit.package.checksums import sha256_bytes
from deepgreen_audit.resources import project_file
from deepgreen_audit.spec import load_spec

#: Keys the pinned file may set, with the type CodeCarbon expects.
CONFIG_TYPES = {"tracking_mode": str, "measure_power_secs": float, "country_iso_code": str,
                "rapl_include_dram": bool, "rapl_prefer_psys": bool,
                "allow_multiple_runs": bool, "log_level": str, "project_name": str,
                "pue": float}


def config_path() -> Path:
    return project_file("collect", "codecarbon.ini")


def require_codecarbon(module=None) -> str:
    """The installed CodeCarbon's version; refuses one below the spec's minimum major."""
    minimum = int(load_spec()["S5_measurement"]["codecarbon_min_major"])
    try:
        module = module or importlib.import_module("codecarbon")
    except ImportError:
        raise CodeCarbonRefused(f"CodeCarbon is not installed; install codecarbon>={minimum} "
                                "(pip install -e '.[collect]')", code="codecarbon-missing") from None
    version = str(module.__version__)
    try:
        major = int(version.split(".")[0])
    except ValueError:
        major = -1
    if major < minimum:
        raise CodeCarbonRefused(
            f"CodeCarbon {version} is installed; the measurement contract needs {minimum}.x or "
            "newer (2.x silently models CPU power as a constant); pip install "
            f"'codecarbon>={minimum},<{minimum + 1}'", code="codecarbon-version")
    return version


@dataclass(frozen=True)
class PinnedConfig:
    """The pinned configuration: CodeCarbon keyword arguments and the file's SHA256."""

    path: Path
    kwargs: dict
    sha256: str

    @property
    def tracking_mode(self) -> str:
        return self.kwargs["tracking_mode"]


def load_config(path: Path | None = None) -> PinnedConfig:
    """Read and check the pinned file against the spec's measurement section."""
    path = Path(path) if path else config_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CodeCarbonRefused("the pinned CodeCarbon configuration is missing", path=path,
                                code="codecarbon-config") from None
    parser = configparser.ConfigParser()
    try:
        parser.read_string(data.decode("utf-8"), source=str(path))
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise CodeCarbonRefused(f"cannot be parsed: {exc}", path=path, code="codecarbon-config") from None
    if not parser.has_section("codecarbon"):
        raise CodeCarbonRefused("has no [codecarbon] section", path=path, code="codecarbon-config")
    kwargs = {}
    for key, text in parser["codecarbon"].items():
        if key not in CONFIG_TYPES:
            raise CodeCarbonRefused(unknown_name(key, list(CONFIG_TYPES),
                                                 "a key of [codecarbon] deepgreen pins"),
                                    path=path, code="codecarbon-config")
        kind = CONFIG_TYPES[key]
        try:
            kwargs[key] = parser["codecarbon"].getboolean(key) if kind is bool else kind(text)
        except ValueError:
            raise CodeCarbonRefused(f"{text!r} is not a {kind.__name__}", path=path, field=key,
                                    code="codecarbon-config") from None
    s5 = load_spec()["S5_measurement"]
    for key, expected in (("tracking_mode", s5["codecarbon_tracking_mode"]),
                          ("measure_power_secs", float(s5["codecarbon_interval_s"]))):
        if kwargs.get(key) != expected:
            raise CodeCarbonRefused(f"is {kwargs.get(key)!r}; the specification "
                                    f"(collect/experiment.toml S5_measurement) requires {expected!r}",
                                    path=path, field=key, code="codecarbon-config")
    if "country_iso_code" not in kwargs:
        raise CodeCarbonRefused("offline tracking needs country_iso_code", path=path,
                                field="country_iso_code", code="codecarbon-config")
    return PinnedConfig(path=path, kwargs=kwargs, sha256=sha256_bytes(data))


#: CodeCarbon's name of the CPU mode it measured with -> the blocks schema's label.
CPU_MODES = {"intel_rapl": "rapl", "windows_emi": "rapl", "cpu_load": "load-model",
             "constant": "tdp-constant"}
_CPU_MODE_LINE = re.compile(r"Delta energy consumed for CPU with (\S+) :")


def cpu_method(log_lines: list[str]) -> str:
    """The blocks-schema label of how CodeCarbon got CPU power, from the lines it logged
    while measuring the block (one mode for the whole block, else unknown)."""
    modes = {m.group(1) for line in log_lines if (m := _CPU_MODE_LINE.match(line))}
    labels = {CPU_MODES.get(mode, "unknown") for mode in modes}
    return labels.pop() if len(labels) == 1 else "unknown"


def gpu_method(gpu_count, gpu_model) -> str:
    """nvml when CodeCarbon's reading covers GPUs (on NVIDIA systems it reads them through
    NVML), none when it reports no GPU; AMD GPUs (read through AMD SMI) are unknown here."""
    if not gpu_count:
        return "none"
    return "unknown" if "AMD" in str(gpu_model).upper() else "nvml"


class _HeardLines(logging.Handler):
    """CodeCarbon's log lines from `start` to `stop`, heard at INFO (where it states its CPU
    mode) while its own handlers stay at the pinned log level, so nothing more is printed."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._logger = logging.getLogger("codecarbon")
        self._restore: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def start(self) -> None:
        pinned = self._logger.getEffectiveLevel()
        self._restore = [(self._logger, self._logger.level)] + [(h, h.level) for h in self._logger.handlers]
        for handler in self._logger.handlers:
            handler.setLevel(max(handler.level, pinned))
        self._logger.addHandler(self)
        self._logger.setLevel(min(pinned, logging.INFO))

    def stop(self) -> list[str]:
        self._logger.removeHandler(self)
        for item, level in self._restore:
            item.setLevel(level)
        return self.lines


@dataclass(frozen=True)
class CodeCarbonBlock:
    """CodeCarbon's own reading of one block, in its native units, plus how it measured."""

    duration_s: float
    energy_kwh: float
    cpu_energy_kwh: float
    gpu_energy_kwh: float
    ram_energy_kwh: float
    cpu_power_w: float
    gpu_power_w: float
    ram_power_w: float
    cpu_method: str
    gpu_method: str
    emissions_kg: float
    emissions_rate_kg_per_s: float
    country_iso_code: str | None
    region: str | None


def _text_or_none(value) -> str | None:
    text = "" if value is None else str(value).strip()
    return text or None


@dataclass(frozen=True)
class CodeCarbonHost:
    """What CodeCarbon assumed about the host, for the environment row: a campaign holds these
    fixed (its RAM power model and carbon intensity follow from them)."""

    ram_total_gb: float | None
    #: the GPUs CodeCarbon itself found and tracks (its published gpu_count): the audit
    #: compares it with NVML's count, since CodeCarbon's GPU energy covers only these
    gpu_count: int | None
    pue: float | None
    on_cloud: bool | None
    cloud_provider: str | None
    cloud_region: str | None

    @classmethod
    def from_data(cls, data) -> CodeCarbonHost:
        on_cloud = _text_or_none(getattr(data, "on_cloud", None))
        gpu_count = getattr(data, "gpu_count", None)
        return cls(ram_total_gb=float(data.ram_total_size) if data.ram_total_size else None,
                   gpu_count=None if gpu_count is None else int(gpu_count),
                   pue=float(data.pue) if data.pue else None,
                   on_cloud=None if on_cloud is None else on_cloud.upper() in ("Y", "TRUE", "YES"),
                   cloud_provider=_text_or_none(data.cloud_provider),
                   cloud_region=_text_or_none(data.cloud_region))


class CodeCarbonTracker:
    """One OfflineEmissionsTracker for a run; one task per block."""

    def __init__(self, config: PinnedConfig | None = None, module=None):
        self.version = require_codecarbon(module)
        self.config = config or load_config()
        from codecarbon import OfflineEmissionsTracker

        self._tracker = OfflineEmissionsTracker(output_methods=[], **self.config.kwargs)
        # Hardware detection takes seconds: do it now, outside every block.
        self._tracker.start_task("deepgreen-setup")
        self.host = CodeCarbonHost.from_data(self._tracker.stop_task("deepgreen-setup"))
        self._task: str | None = None
        self._heard = _HeardLines()

    def start_block(self, name: str) -> None:
        self._task = name
        self._heard = _HeardLines()
        self._heard.start()
        self._tracker.start_task(name)

    def stop_block(self) -> CodeCarbonBlock:
        try:
            # CodeCarbon's stop_task takes None (its current task) though its annotation says str
            data = self._tracker.stop_task(self._task)  # type: ignore[arg-type]
        finally:
            lines = self._heard.stop()
            self._task = None
        if data is None:
            raise RuntimeError("CodeCarbon returned no reading for the block")
        return CodeCarbonBlock(
            duration_s=float(data.duration), energy_kwh=float(data.energy_consumed),
            cpu_energy_kwh=float(data.cpu_energy), gpu_energy_kwh=float(data.gpu_energy),
            ram_energy_kwh=float(data.ram_energy), cpu_power_w=float(data.cpu_power),
            gpu_power_w=float(data.gpu_power), ram_power_w=float(data.ram_power),
            cpu_method=cpu_method(lines), gpu_method=gpu_method(data.gpu_count, data.gpu_model),
            emissions_kg=float(data.emissions), emissions_rate_kg_per_s=float(data.emissions_rate),
            country_iso_code=_text_or_none(data.country_iso_code), region=_text_or_none(data.region))
