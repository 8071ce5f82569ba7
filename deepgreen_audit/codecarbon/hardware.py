"""What CodeCarbon's power models produce, and what hardware can draw: the facts the audit of a
CodeCarbon log compares each row's powers with.

Sources
=======

* CPU TDPs: CodeCarbon's own table, ``codecarbon/data/hardware/cpu_power.csv`` (columns Name,
  TDP) of CodeCarbon 3.3.2, pinned in ``data/cpu_power.csv`` (MIT; data/README.md), and matched
  to a row's ``cpu_model`` the way CodeCarbon matches it (``codecarbon.core.cpu.
  TDP._get_matching_cpu``: an exact case-insensitive match, then the name without "(R)",
  " CPU @ ..." and "@ x.xxGHz", then a unique rapidfuzz token-set match of 100, transcribed
  here as "one name's words are all among the other's").  The table grows between releases;
  a CPU it lacks is named, never guessed.
* CodeCarbon's CPU power models (codecarbon/external/hardware.py, core/resource_tracker.py,
  core/cpu.py of 2.x and 3.x): without a power counter CodeCarbon 2.x uses a constant
  ``0.5 x TDP`` (``CONSUMPTION_PERCENTAGE_CONSTANT``), and ``0.5 x 85 W`` = 42.5 W when the
  CPU is not in its table (``POWER_CONSTANT``, the generic TDP); from 2.8.5 (an option) and
  3.0 (the fallback) it models load (`load_model`): ``max(TDP x load, 0.1 x TDP)`` up to 3.0,
  from 3.1 ``TDP x (0.1 + 0.9 x load^3)`` in machine mode and ``TDP x load`` in process mode,
  with ``TDP`` the table's TDP times the sockets (so a floor of ``0.1 x TDP x sockets``, none
  in 3.1's process mode); 3.x estimates an unknown CPU's TDP as 4 W per logical CPU
  (``DEFAULT_POWER_PER_CORE``), and CodeCarbon 3.0's constant fallback multiplied the TDP by
  the logical CPUs (``0.5 x TDP x cpu_count``: 360 W for a 45 W, 16-thread laptop CPU).
* RAM (codecarbon/external/ram.py): 2.x models ``3 W per 8 GB`` of the machine's memory
  (process mode: of the process's); 3.x models DIMMs: 5 W per x86 DIMM (1.5 W on ARM, at
  least 2 DIMMs' worth, 3 W on ARM), the DIMM count estimated from the memory size, with
  0.9/0.8/0.7 factors beyond 4/8/16 DIMMs (`ram_model_3x`, a transcription).  CodeCarbon
  never measures RAM power (only a Raspberry Pi's PMIC), so RAM is always modelled.
* The most a CPU model can draw: its TDP times the sockets its family supports: 1 for client
  CPUs (Core, Ryzen, Celeron, Apple), 2 for AMD EPYC (AMD: EPYC 7002/7003/9004 are 1P/2P),
  8 for Intel Xeon (Intel ARK: Xeon Scalable Platinum scales to 8 sockets).
* GPU board power limits (`GPU_BOARD_LIMIT_W`): NVIDIA's product specifications (each
  entry names its page); laptop GPUs at their highest Total Graphics Power plus Dynamic
  Boost (NVIDIA's GeForce laptop spec pages give the TGP range).  The specification's own
  ``[audit] gpu_board_power_limit_w`` entries are added to it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

#: CodeCarbon's generic TDP for a CPU not in its table (POWER_CONSTANT, 2.x and 3.x).
GENERIC_TDP_W = 85.0
#: CodeCarbon's constant-mode share of the TDP (CONSUMPTION_PERCENTAGE_CONSTANT).
CONSTANT_SHARE = 0.5
#: CodeCarbon 3.x's load model's floor, as a share of TDP (external/hardware.py).
LOAD_FLOOR_SHARE = 0.1
#: CodeCarbon 3.x's TDP estimate per logical CPU for a CPU not in its table (core/cpu.py).
POWER_PER_THREAD_W = 4.0
#: CodeCarbon's default measure_power_secs (emissions_tracker.py): the sampling interval.
DEFAULT_INTERVAL_S = 15.0
#: A power equals a model's value when within this relative difference (CodeCarbon writes
#: its floats with 16 significant digits; a measured power never lands on a model's value).
MODEL_RELATIVE_TOLERANCE = 1e-6
#: ... and 2.x's RAM model within this one (some logs round ram_total_size and ram_power).
RAM_2X_RELATIVE_TOLERANCE = 1e-4
#: RAM sizes of one machine differ by rounding only; beyond this relative change it is another.
RAM_SIZE_RELATIVE_CHANGE = 0.01
#: CodeCarbon's default experiment_id (emissions_tracker.py): shared by every log that set none.
DEFAULT_EXPERIMENT_ID = "5b0fa12a-3dd7-45bb-9766-cc326314d9f1"

_NVIDIA = "https://www.nvidia.com/"
_LAPTOPS = _NVIDIA + "en-us/geforce/laptops/"
#: GPU model (CodeCarbon's name without 'N x ' and 'NVIDIA ') -> (board limit W, source).
GPU_BOARD_LIMIT_W: dict[str, tuple[float, str]] = {
    "GeForce GTX 1650": (75.0, _NVIDIA + "en-us/geforce/graphics-cards/gtx-1650/"),
    "GeForce GTX 1650 Ti": (55.0, _NVIDIA + "en-us/geforce/gaming-laptops/gtx-1650-ti/ (laptop only; up to 55 W)"),
    "GeForce GTX 1660 SUPER": (125.0, _NVIDIA + "en-us/geforce/graphics-cards/gtx-1660-super/"),
    "GeForce GTX 1660 Ti": (120.0, _NVIDIA + "en-us/geforce/graphics-cards/gtx-1660-ti/ (desktop; laptops draw less)"),
    "GeForce RTX 2080 Ti": (260.0, _NVIDIA + "en-us/geforce/graphics-cards/rtx-2080-ti/ (Founders Edition)"),
    "GeForce RTX 3060": (170.0, _NVIDIA + "en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/"),
    "GeForce RTX 3060 Ti": (200.0, _NVIDIA + "en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/"),
    "GeForce RTX 3070": (220.0, _NVIDIA + "en-us/geforce/graphics-cards/30-series/rtx-3070-3070ti/"),
    "GeForce RTX 3080": (320.0, _NVIDIA + "en-us/geforce/graphics-cards/30-series/rtx-3080-3080ti/"),
    "GeForce RTX 3090": (350.0, _NVIDIA + "en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/"),
    "GeForce RTX 4060": (115.0, _NVIDIA + "en-us/geforce/graphics-cards/40-series/rtx-4060-4060ti/"),
    "GeForce RTX 4070": (200.0, _NVIDIA + "en-us/geforce/graphics-cards/40-series/rtx-4070-family/"),
    "GeForce RTX 4080": (320.0, _NVIDIA + "en-us/geforce/graphics-cards/40-series/rtx-4080-family/"),
    "GeForce RTX 4090": (450.0, _NVIDIA + "en-us/geforce/graphics-cards/40-series/rtx-4090/"),
    "GeForce RTX 3050 Laptop GPU": (95.0, _LAPTOPS + "30-series/ (35-80 W + Dynamic Boost)"),
    "GeForce RTX 3060 Laptop GPU": (130.0, _LAPTOPS + "30-series/ (60-115 W + 15 W Dynamic Boost)"),
    "GeForce RTX 3070 Laptop GPU": (150.0, _LAPTOPS + "30-series/ (80-125 W + Dynamic Boost)"),
    "GeForce RTX 3080 Laptop GPU": (165.0, _LAPTOPS + "30-series/ (80-150+ W + Dynamic Boost)"),
    "GeForce RTX 4050 Laptop GPU": (140.0, _LAPTOPS + "40-series/ (35-115 W + 25 W Dynamic Boost)"),
    "GeForce RTX 4060 Laptop GPU": (140.0, _LAPTOPS + "40-series/ (35-115 W + 25 W Dynamic Boost)"),
    "GeForce RTX 4070 Laptop GPU": (140.0, _LAPTOPS + "40-series/ (35-115 W + 25 W Dynamic Boost)"),
    "GeForce RTX 4080 Laptop GPU": (175.0, _LAPTOPS + "40-series/ (60-150 W + 25 W Dynamic Boost)"),
    "GeForce RTX 4090 Laptop GPU": (175.0, _LAPTOPS + "40-series/ (80-150 W + 25 W Dynamic Boost)"),
    "Tesla T4": (70.0, _NVIDIA + "en-us/data-center/tesla-t4/"),
    "T4": (70.0, _NVIDIA + "en-us/data-center/tesla-t4/"),
    "L4": (72.0, _NVIDIA + "en-us/data-center/l4/"),
    "L40S": (350.0, _NVIDIA + "en-us/data-center/l40s/"),
    "A10": (150.0, _NVIDIA + "en-us/data-center/products/a10-gpu/"),
    "A10G": (300.0, "https://aws.amazon.com/ec2/instance-types/g5/ (NVIDIA A10G, 300 W board)"),
    "Tesla V100-PCIE-16GB": (250.0, _NVIDIA + "en-us/data-center/v100/"),
    "Tesla V100-PCIE-32GB": (250.0, _NVIDIA + "en-us/data-center/v100/"),
    "Tesla V100-SXM2-16GB": (300.0, _NVIDIA + "en-us/data-center/v100/"),
    "Tesla V100-SXM2-32GB": (300.0, _NVIDIA + "en-us/data-center/v100/"),
    "A100-PCIE-40GB": (250.0, _NVIDIA + "en-us/data-center/a100/"),
    "A100 80GB PCIe": (300.0, _NVIDIA + "en-us/data-center/a100/"),
    "A100-SXM4-40GB": (400.0, _NVIDIA + "en-us/data-center/a100/"),
    "A100-SXM4-80GB": (400.0, _NVIDIA + "en-us/data-center/a100/"),
    "H100 PCIe": (350.0, _NVIDIA + "en-us/data-center/h100/"),
    "H100 80GB HBM3": (700.0, _NVIDIA + "en-us/data-center/h100/ (SXM)"),
}


def gpu_name(model) -> str | None:
    """CodeCarbon's gpu_model ('1 x NVIDIA GeForce RTX 3060') without count and vendor."""
    if not isinstance(model, str) or not model.strip():
        return None
    name = re.sub(r"^\s*\d+\s*x\s*", "", model.strip())
    return re.sub(r"^NVIDIA\s+", "", name).strip()


def gpu_limit(model, extra: Mapping[str, float] | None = None) -> tuple[float, str] | None:
    """(board limit W per GPU, source) of a gpu_model, or None when the table lacks it.  A
    row naming several models (';' or ',') is held to the largest limit."""
    if not isinstance(model, str):
        return None
    return _gpu_limit(model, tuple(sorted((extra or {}).items())))


@lru_cache(maxsize=4096)
def _gpu_limit(model: str, extra: tuple[tuple[str, float], ...]) -> tuple[float, str] | None:
    """gpu_limit, once per model and table (a long log names a few models in every row)."""
    table = dict(GPU_BOARD_LIMIT_W)
    for name, watts in extra:
        table[re.sub(r"^NVIDIA\s+", "", name)] = (float(watts), "collect/experiment.toml [audit]")
    found = [table.get(name) for name in map(gpu_name, re.split(r"[;,]", model)) if name]
    limits = [f for f in found if f is not None]
    if not found or len(limits) < len(found):
        return None
    return max(limits)


#: CodeCarbon's CPU table, pinned (data/README.md says where it comes from).
CPU_TABLE_SOURCE = "CodeCarbon 3.3.2 data/hardware/cpu_power.csv"


@lru_cache(maxsize=1)
def cpu_table() -> tuple[dict[str, float], str]:
    """CodeCarbon's CPU table {name: TDP W} (pinned in data/cpu_power.csv) and its source."""
    import csv
    import io
    from importlib.resources import files

    text = (files("deepgreen_audit.codecarbon") / "data" / "cpu_power.csv").read_text(encoding="utf-8")
    table = {}
    for row in csv.DictReader(io.StringIO(text)):
        try:
            table[row["Name"]] = float(row["TDP"])
        except (KeyError, TypeError, ValueError):
            continue
    return table, CPU_TABLE_SOURCE


def _tokens(text: str) -> frozenset[str]:
    """rapidfuzz's default_process, as CodeCarbon's matcher applies it: lower case, every
    character that is not a letter or digit a space, split."""
    return frozenset(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


@lru_cache(maxsize=1)
def _token_index() -> list[tuple[frozenset, str]]:
    return [(_tokens(name), name) for name in cpu_table()[0]]


@lru_cache(maxsize=512)
def cpu_tdp(model) -> tuple[float, str] | None:
    """(TDP W, the table's name) of a cpu_model, matched as CodeCarbon matches it
    (core/cpu.py TDP._get_matching_cpu): an exact case-insensitive name, then the name cleaned
    of "(R)", " CPU @ ..." and "@ x.xxGHz", then a unique token-set match of 100 (one name's
    words all among the other's); None when the table lacks it."""
    if not isinstance(model, str) or not model.strip():
        return None
    table = cpu_table()[0]
    lower = {name.lower(): name for name in table}
    raw = model.strip()
    if raw.lower() in lower:
        name = lower[raw.lower()]
        return table[name], name
    cleaned = raw.replace("(R)", "")
    at = cleaned.find(" CPU @ ")
    if at > 0:
        cleaned = cleaned[:at]
    cleaned = re.sub(r" @\s*\d+\.\d+GHz", "", cleaned.replace(" CPU", "")).strip()
    if cleaned.lower() in lower:
        name = lower[cleaned.lower()]
        return table[name], name
    words = _tokens(cleaned)
    matches = [name for tokens, name in _token_index()
               if tokens and words and (tokens <= words or words <= tokens)]
    if len(matches) != 1:
        return None  # CodeCarbon takes a token-set match only when it is the one of score 100
    name = matches[0]
    if _same_cpu(cleaned, name):
        return table[name], name
    # CodeCarbon's fuzzy match: what its model used, not necessarily this CPU ("Apple M1
    # Pro" matches "Apple M1"); `cpu_maximum` does not trust it
    return table[name], name + " (CodeCarbon's fuzzy match)"


#: Words a CPU's name may carry beside its table name without naming another CPU.
_GENERIC_WORDS = {"intel", "amd", "r", "tm", "cpu", "processor", "core", "gen", "apple"}


def _same_cpu(model: str, name: str) -> bool:
    """Whether a fuzzy match names this very CPU: the model's words beyond the table name's
    are generic ('12th Gen', '8-Core Processor', 'with Radeon Graphics'), not a variant
    ('Pro', 'Max', another model number)."""
    model = re.split(r"\s+(?:with|w/)\s+", model, maxsplit=1)[0]
    words = set(re.findall(r"[a-z0-9]+", model.lower())) - set(re.findall(r"[a-z0-9]+", name.lower()))
    return all(w in _GENERIC_WORDS or re.fullmatch(r"\d{1,3}|\d+(st|nd|rd|th)|[\d.]+ghz", w)
               for w in words)


def max_sockets(model) -> int:
    """The most sockets a CPU family is sold for (see the module docstring)."""
    text = str(model or "")
    if "Xeon" in text:
        return 8
    if "EPYC" in text:
        return 2
    return 1


def is_apple_silicon(cpu_model) -> bool:
    """An Apple M-series CPU: CodeCarbon reads its power from `powermetrics` (a measurement of
    the package, efficiency and performance cores and all), which no TDP in its table bounds."""
    return isinstance(cpu_model, str) and cpu_model.strip().lower().startswith("apple m")


def is_arm(cpu_model, os_name) -> bool:
    text = f"{cpu_model or ''} {os_name or ''}".lower()
    return "apple m" in text or "arm64" in text or "aarch64" in text


def ram_model_2x(total_gb: float) -> float:
    """CodeCarbon 2.x: 3 W per 8 GB (external/ram.py before 3.0)."""
    return 3.0 * total_gb / 8.0


def _dimms(total_gb: float) -> int:
    if total_gb <= 2:
        return 1
    if total_gb <= 32:
        return 2 if total_gb <= 16 else 4
    if total_gb <= 128:
        return 4 if total_gb <= 64 else 8
    count = 8
    for size in (128, 64, 32, 16, 8, 4):
        if size <= total_gb / 8:
            count = min(math.ceil(total_gb / size), 32)
            break
    return count


def ram_model_3x(total_gb: float, arm: bool) -> float:
    """CodeCarbon 3.x's RAM model of a machine of `total_gb` (external/ram.py
    `_calculate_ram_power`, transcribed)."""
    per, floor = (1.5, 3.0) if arm else (5.0, 10.0)
    n = _dimms(total_gb)
    if n <= 4:
        watts = per * n
    elif n <= 8:
        watts = per * 4 + per * 0.9 * (n - 4)
    elif n <= 16:
        watts = per * 4 + per * 0.9 * 4 + per * 0.8 * (n - 8)
    else:
        watts = per * 4 + per * 0.9 * 4 + per * 0.8 * 8 + per * 0.7 * (n - 16)
    return max(floor, watts)


def close(a, b, rel: float = MODEL_RELATIVE_TOLERANCE) -> bool:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def cpu_models(power: float, cpu_model, cpu_count, major: int | None) -> list[str]:
    """Which of CodeCarbon's CPU models give exactly `power` for this CPU (possibly several)."""
    return list(_cpu_models(power, cpu_model, cpu_count, major))


@lru_cache(maxsize=65536)
def _cpu_models(power: float, cpu_model, cpu_count, major: int | None) -> tuple[str, ...]:
    """cpu_models, once per distinct reading (a long log repeats its machine's few values)."""
    found = []
    tdp = cpu_tdp(cpu_model)
    n = int(cpu_count) if cpu_count is not None and cpu_count == cpu_count and cpu_count > 0 else None
    if close(power, CONSTANT_SHARE * GENERIC_TDP_W):
        found.append(f"generic-TDP constant: 0.5 x {GENERIC_TDP_W:g} W, the TDP CodeCarbon uses "
                     "for a CPU it does not know")
    if tdp is not None:
        t, name = tdp
        if close(power, CONSTANT_SHARE * t):
            found.append(f"TDP-fraction constant: 0.5 x the {t:g} W TDP of {name}")
        if n and n > 1 and close(power, CONSTANT_SHARE * t * n):
            found.append(f"TDP-fraction constant over logical CPUs: 0.5 x {t:g} W x {n} "
                         "(CodeCarbon 3.0's fallback counted the TDP once per logical CPU)")
        if major is None or major >= 3:
            for sockets in (1, 2, 4, 8):
                if close(power, LOAD_FLOOR_SHARE * t * sockets):
                    found.append(f"load-model floor: 0.1 x {t:g} W TDP"
                                 + (f" x {sockets} sockets" if sockets > 1 else "")
                                 + " (CodeCarbon 3's minimum, an idle estimate)")
    elif n and (major is None or major >= 3):
        if close(power, POWER_PER_THREAD_W * n * LOAD_FLOOR_SHARE):
            found.append(f"load-model floor of the generic {POWER_PER_THREAD_W:g} W-per-thread TDP "
                         f"({n} threads)")
        if close(power, POWER_PER_THREAD_W * n * CONSTANT_SHARE):
            found.append(f"constant 0.5 x the generic {POWER_PER_THREAD_W:g} W-per-thread TDP "
                         f"({n} threads)")
    return tuple(found)


@dataclass(frozen=True)
class LoadModelReading:
    """Where a CPU's mean power (energy / duration) lies against CodeCarbon 3.x's load model for
    a CPU not in its table, whose TDP is CodeCarbon's own guess: `position` is "floor",
    "ceiling", "between" or "outside", `tdp_w` the guessed TDP and `how` says it in words."""

    position: str
    tdp_w: float
    how: str


def guessed_tdp(cpu_model, cpu_count) -> tuple[float, str] | None:
    """The TDP CodeCarbon 3.x's load model uses for a CPU not in its table (core/cpu.py TDP._main):
    4 W per logical CPU when it read a model name, its 85 W constant when it did not; None
    where the table holds the CPU (a real TDP, which a counter's power limit can reach)."""
    if cpu_tdp(cpu_model) is not None:
        return None
    name = str(cpu_model or "").strip()
    if not name or name.lower() == "unknown":
        return GENERIC_TDP_W, f"its generic {GENERIC_TDP_W:g} W TDP (the CPU model was not read)"
    try:
        threads = int(cpu_count)
    except (TypeError, ValueError):
        return None
    if threads <= 0:
        return None
    tdp = POWER_PER_THREAD_W * threads
    return tdp, (f"its guessed TDP of {POWER_PER_THREAD_W:g} W per logical CPU x {threads} = "
                 f"{tdp:g} W ({name} is not in its table)")


#: The first CodeCarbon with a CPU load model (`force_mode_cpu_load`, 2.8.5; from 3.0 its
#: fallback without a counter), and the first whose machine-mode model is cubic and whose
#: process-mode model has no floor (external/hardware.py, read from the release tags).
LOAD_MODEL_SINCE = (2, 8, 5)
CUBIC_LOAD_MODEL_SINCE = (3, 1)


@dataclass(frozen=True)
class LoadModel:
    """CodeCarbon's CPU load model in one release and tracking mode: its formula in words and
    its floor as a share of the TDP (the ceiling is the TDP in each)."""

    formula: str
    floor_share: float


@lru_cache(maxsize=256)
def load_model(release: tuple[int, ...] | None, tracking_mode) -> LoadModel:
    """The load model of CodeCarbon `release` (None: a 3.x log whose version is unreadable) in
    `tracking_mode`: 2.8.5-3.0 ``max(TDP x load, 0.1 x TDP)`` in both modes; from 3.1 machine
    mode ``TDP x (0.1 + 0.9 x load^3)``, process mode ``TDP x load`` (the process's share of
    the logical CPUs), with no floor."""
    process = tracking_mode == "process"
    cubic = "TDP x (0.1 + 0.9 x load^3) from 3.1"
    linear = "max(TDP x load, 0.1 x TDP) in 2.8.5-3.0"
    if release is None:
        return LoadModel(f"{cubic}, {linear}" + (", TDP x the process's load with no floor in "
                                                 "process mode from 3.1" if process else ""),
                         0.0 if process else LOAD_FLOOR_SHARE)
    if release >= CUBIC_LOAD_MODEL_SINCE:
        if process:
            return LoadModel("TDP x the process's load, with no floor, in process mode from 3.1", 0.0)
        return LoadModel(cubic, LOAD_FLOOR_SHARE)
    return LoadModel(linear, LOAD_FLOOR_SHARE)


def load_model_reading(mean_w: float, power_w: float, cpu_model, cpu_count,
                       tolerance: float, model: LoadModel) -> LoadModelReading | None:
    """A run's CPU energy over its duration (`mean_w`) and its power column (`power_w`: from
    3.1.2 the unweighted mean of its readings, before that its last reading; a reading either
    way), PUE divided out, against CodeCarbon's load `model` of the log's release and mode with
    a guessed TDP, whose every reading lies between its floor (0.1 x TDP, idle, where the model
    has one) and ceiling (the TDP, every logical CPU busy).  A power column outside the two is
    a counter's; an energy at the floor or the ceiling within `tolerance`, beside a power
    column within the two, only the model gives; anything else the log cannot tell (an energy
    outside the two beside a power within is another window's energy, not a reading)."""
    guess = guessed_tdp(cpu_model, cpu_count)
    if guess is None or not (math.isfinite(mean_w) and math.isfinite(power_w)) or power_w <= 0:
        return None
    tdp, named = guess
    floor = model.floor_share * tdp

    def within(value: float) -> bool:
        return floor * (1 - tolerance) <= value <= tdp * (1 + tolerance)

    if not within(power_w):
        return LoadModelReading("outside", tdp, f"its readings lie outside what CodeCarbon's load "
                                                f"model gives with {named} ({floor:.4g}-{tdp:.4g} "
                                                "W): read from a counter (RAPL, powermetrics)")
    if floor > 0 and abs(mean_w - floor) <= tolerance * floor:
        return LoadModelReading("floor", tdp, f"load model at its floor: 0.1 x {named}, an idle "
                                              "machine (energy / duration)")
    if abs(mean_w - tdp) <= tolerance * tdp:
        return LoadModelReading("ceiling", tdp, f"load model at its ceiling: {named}, every logical "
                                                "CPU busy (energy / duration)")
    if within(mean_w):
        return LoadModelReading("between", tdp, f"its energy / duration lies between the load "
                                                f"model's floor ({floor:.4g} W) and ceiling "
                                                f"({tdp:.4g} W) for {named}")
    return None


def cpu_maximum(cpu_model) -> tuple[float, str] | None:
    """The most a CPU model can draw by CodeCarbon's own table: TDP x the family's sockets."""
    tdp = cpu_tdp(cpu_model)
    if tdp is None or tdp[1].endswith("(CodeCarbon's fuzzy match)"):
        return None
    t, name = tdp
    s = max_sockets(cpu_model)
    return t * s, f"{name}: TDP {t:g} W" + (f" x {s} sockets at most" if s > 1 else ", one socket")


def ram_models(power: float, total_gb, cpu_model, os_name, major: int | None,
               tracking_mode) -> list[str]:
    """Which of CodeCarbon's RAM models give exactly `power` for this machine."""
    return list(_ram_models(power, total_gb, cpu_model, os_name, major, tracking_mode))


@lru_cache(maxsize=65536)
def _ram_models(power: float, total_gb, cpu_model, os_name, major: int | None,
                tracking_mode) -> tuple[str, ...]:
    """ram_models, once per distinct reading."""
    found = []
    try:
        total = float(total_gb)
    except (TypeError, ValueError):
        total = float("nan")
    if math.isfinite(total) and total > 0:
        if (major is None or major < 3) and close(power, ram_model_2x(total), RAM_2X_RELATIVE_TOLERANCE):
            found.append(f"2.x model: 3 W per 8 GB of {total:.4g} GB")
        if major is None or major >= 3:
            for arm in (False, True):
                if close(power, ram_model_3x(total, arm)):
                    found.append(f"3.x DIMM model: {ram_model_3x(total, arm):g} W for {total:.4g} GB"
                                 + (" (ARM)" if arm else ""))
                    break
    if not found and tracking_mode == "process" and (major is None or major >= 3):
        # 3.x models the process's memory with the same DIMM model, whose floor a process
        # below two DIMMs' worth of memory gets: one constant
        for arm in (False, True):
            floor = ram_model_3x(0.0, arm)
            if close(power, floor):
                found.append(f"3.x DIMM model of the process's memory at its floor: {floor:g} W"
                             + (" (ARM)" if arm else ""))
                break
    if not found and tracking_mode == "process":
        found.append("process-mode model (a share of the process's memory)")
    return tuple(found)
