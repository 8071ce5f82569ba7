"""`deepgreen profile-api`: measure framework API calls with this project's instruments.

FECoM's protocol, on the project's counters (`deepgreen_audit.collect`:
RAPL package counters through powercap sysfs, NVML's total-energy counter):

1. wait for a stable state: the last `check_last_n_points` power readings
   (one per `measurement_interval_s`) vary by at most `*_std_to_mean`, and
   the CPU/GPU temperatures are at most `*_max_temp_c` (or `max_wait_s`
   passes; the wait and the baseline's spread are recorded);
2. the last stable window is the idle baseline (its counter readings kept);
3. after one warm-up call, the call is repeated (device synchronised after
   each) until its window lasts at least `max(min_window_s, UPDATE_PERIODS x
   the counter's update period)`, then the counters are read;
4. per call: (window energy - baseline power x window) / repetitions.

A host without a counter is refused; `--allow-missing-counters` measures
with the counters there are (empty cells + reason for the others), and
`--durations-only` reads no counter at all and records durations only.
Calls of a framework that is not installed are skipped with the reason
recorded in the descriptor (`skipped_calls`).  Input sizes are pickle
lengths, as FECoM records them.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.collect.instruments import probe
from deepgreen_audit.device.errors import ALLOW_OPTION
from deepgreen_audit.device.nvml import Nvml
from deepgreen_audit.device.rapl import POWERCAP_ROOT, Rapl, fewest_wraps, package_energy_j
from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.greenlight.package import text_table, write_api_package
from deepgreen_audit.package.schema import load_schema

THERMAL_ROOT = Path("/sys/class/thermal")
#: A window must span at least this many counter update periods.
UPDATE_PERIODS = 10
DURATIONS_ONLY_REASON = "durations only (--durations-only): no energy counter was read"


@dataclass(frozen=True)
class StableState:
    """Stable-state criteria; defaults are FECoM's settings in the Greenlight records."""

    measurement_interval_s: float = 0.5
    check_last_n_points: int = 20
    max_wait_s: float = 120.0
    cpu_std_to_mean: float = 0.03
    gpu_std_to_mean: float = 0.01
    cpu_max_temp_c: float = 55.0
    gpu_max_temp_c: float = 40.0


# ---------------------------------------------------------------- framework calls


@dataclass(frozen=True)
class PreparedCall:
    run: Callable[[], object]
    sync: Callable[[], None]
    args: tuple
    shape: str


def _torch(name: str, size: int) -> PreparedCall:
    import torch

    gen = torch.Generator().manual_seed(size)
    if name == "torch.matmul":
        args: tuple[torch.Tensor, ...] = (torch.rand(size, size, generator=gen),
                                          torch.rand(size, size, generator=gen))
        shape = f"{size}x{size} @ {size}x{size}"
    elif name == "torch.nn.functional.conv2d":
        args = (torch.rand(1, 3, size, size, generator=gen), torch.rand(16, 3, 3, 3, generator=gen))
        shape = f"1x3x{size}x{size} * 16x3x3x3"
    else:  # elementwise / reductions on a size x size tensor
        args = (torch.rand(size, size, generator=gen),)
        shape = f"{size}x{size}"
    func = _resolve(name)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    return PreparedCall(lambda: func(*args), sync, args, shape)


def _tensorflow(name: str, size: int) -> PreparedCall:
    import tensorflow as tf

    args = (tf.random.uniform((size, size), seed=size), tf.random.uniform((size, size), seed=size))
    func = _resolve(name)
    return PreparedCall(lambda: func(*args).numpy(), lambda: None, args,
                        f"{size}x{size} @ {size}x{size}")


def _jax(name: str, size: int) -> PreparedCall:
    import jax

    key = jax.random.PRNGKey(size)
    args = (jax.random.uniform(key, (size, size)), jax.random.uniform(key, (size, size)))
    func = _resolve(name)
    return PreparedCall(lambda: func(*args).block_until_ready(), lambda: None, args,
                        f"{size}x{size} @ {size}x{size}")


#: Calls profile-api knows how to feed: name -> (import name of the framework, builder).
CATALOGUE: dict[str, tuple[str, Callable[[str, int], PreparedCall]]] = {
    "torch.matmul": ("torch", _torch),
    "torch.nn.functional.conv2d": ("torch", _torch),
    "torch.nn.functional.relu": ("torch", _torch),
    "torch.sum": ("torch", _torch),
    "tensorflow.linalg.matmul": ("tensorflow", _tensorflow),
    "jax.numpy.matmul": ("jax", _jax),
}
DEFAULT_CALLS = ("torch.matmul", "torch.nn.functional.conv2d", "tensorflow.linalg.matmul",
                 "jax.numpy.matmul")


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        # e.g. torch.nn.functional.relu: module torch.nn.functional, attribute relu
        parent, _, sub = module.rpartition(".")
        return getattr(getattr(importlib.import_module(parent), sub), attr)


def framework_version(import_name: str) -> str | None:
    """'torch 2.13.0', or None when the framework is not installed."""
    try:
        module = importlib.import_module(import_name)
    except ImportError:
        return None
    return f"{import_name} {getattr(module, '__version__', 'unknown')}"


# ---------------------------------------------------------------- instruments


def cpu_temperature_c(root: Path = THERMAL_ROOT) -> float | None:
    """Hottest thermal zone (millidegrees in sysfs), None when the host exposes none."""
    values = []
    for zone in sorted(Path(root).glob("thermal_zone*")):
        try:
            values.append(int((zone / "temp").read_text().strip()) / 1000)
        except (OSError, ValueError):
            continue
    return max(values) if values else None


def gpu_temperature_c(nvml) -> float | None:
    if nvml is None:
        return None
    return max(float(nvml.nv.nvmlDeviceGetTemperature(h, nvml.nv.NVML_TEMPERATURE_GPU))
               for h in nvml.handles)


@dataclass(frozen=True)
class CounterReading:
    """One read of the counters profile-api uses; None where a counter is missing."""

    #: RAPL's package counters, microjoules per domain
    rapl_uj: tuple[int, ...] | None
    #: NVML's cumulative energy, millijoules per GPU
    nvml_mj: tuple[int, ...] | None


@dataclass(frozen=True)
class WindowEnergy:
    """The energy between two readings, joules; None where the counter is missing."""

    cpu_j: float | None
    gpu_j: float | None


@dataclass
class Counters:
    """The counters profile-api reads (None where missing) and why any is missing."""

    rapl: Rapl | None = None
    nvml: Nvml | None = None
    missing: dict[str, str] = field(default_factory=dict)
    thermal_root: Path = THERMAL_ROOT

    def read(self) -> CounterReading:
        """Read RAPL and NVML (None where missing)."""
        return CounterReading(rapl_uj=self.rapl.read_uj() if self.rapl else None,
                              nvml_mj=self.nvml.total_energy_mj() if self.nvml else None)

    def energy_j(self, start: CounterReading, end: CounterReading) -> WindowEnergy:
        """CPU package and GPU joules between two readings; RAPL wraparound resolved with the
        fewest wraps the readings allow: a profiling window lasts seconds, a wrap tens of minutes."""
        cpu: float | None = None
        gpu: float | None = None
        if self.rapl and start.rapl_uj is not None and end.rapl_uj is not None:
            cpu = package_energy_j(start.rapl_uj, end.rapl_uj, self.rapl.max_energy_range_uj,
                                   fewest_wraps(start.rapl_uj, end.rapl_uj))
        if self.nvml and start.nvml_mj is not None and end.nvml_mj is not None:
            gpu = sum(e - s for s, e in zip(start.nvml_mj, end.nvml_mj)) / 1000
        return WindowEnergy(cpu_j=cpu, gpu_j=gpu)

    def update_period_s(self, clock=time.perf_counter, limit_s: float = 1.0) -> float:
        """Time between two changes of the slowest counter (bounded by limit_s)."""
        periods = []
        for read in [r for r in (self.rapl and self.rapl.read_uj, self.nvml and
                                 self.nvml.total_energy_mj) if r]:
            first, t0 = read(), clock()
            while read() == first and clock() - t0 < limit_s:
                pass
            second, t1 = read(), clock()
            while read() == second and clock() - t1 < limit_s:
                pass
            periods.append(clock() - t1)
        return max(periods) if periods else 0.0


def open_counters(*, durations_only: bool, allow_missing_counters: bool,
                  powercap_root: Path = POWERCAP_ROOT, pynvml_module=None,
                  thermal_root: Path = THERMAL_ROOT) -> Counters | None:
    """The host's counters; refuses a host lacking one unless an option allows it."""
    if durations_only:
        return None
    found = probe(pynvml_module=pynvml_module, powercap_root=powercap_root)
    nvml, rapl, missing = found.nvml, found.rapl, found.missing
    if (missing and not allow_missing_counters) or (nvml is None and rapl is None):
        raise UserError(
            "this host lacks energy counters: " + "; ".join(f"{k}: {v}" for k, v in missing.items())
            + ". Pass --durations-only to record durations only (empty energy cells with the "
            "reason)" + ("" if nvml is None and rapl is None else
                          f", or {ALLOW_OPTION} to measure with the counters there are"),
            code="counters-missing")
    return Counters(rapl=rapl, nvml=nvml, missing=missing, thermal_root=thermal_root)


# ---------------------------------------------------------------- measurement


@dataclass(frozen=True)
class Baseline:
    wait_s: float
    window_s: float
    start: CounterReading
    end: CounterReading
    cpu_power_w: float | None
    gpu_power_w: float | None
    cpu_std_to_mean: float | None
    gpu_std_to_mean: float | None


def _cv(values: list[float]) -> float | None:
    if len(values) < 2 or not statistics.fmean(values):
        return None
    return statistics.stdev(values) / abs(statistics.fmean(values))


def wait_for_stable_state(counters: Counters, settings: StableState, *,
                          clock=time.perf_counter, sleep=time.sleep) -> Baseline:
    """Poll power until the last n readings are steady and temperatures low (or max_wait_s)."""
    began = clock()
    readings = [(clock(), counters.read())]
    cpu_p: list[float] = []
    gpu_p: list[float] = []
    n = settings.check_last_n_points
    while True:
        sleep(settings.measurement_interval_s)
        readings.append((clock(), counters.read()))
        (t0, r0), (t1, r1) = readings[-2], readings[-1]
        energy = counters.energy_j(r0, r1)
        cpu_j, gpu_j = energy.cpu_j, energy.gpu_j
        if cpu_j is not None:
            cpu_p.append(cpu_j / (t1 - t0))
        if gpu_j is not None:
            gpu_p.append(gpu_j / (t1 - t0))
        if len(readings) - 1 < n:
            continue
        cpu_cv, gpu_cv = _cv(cpu_p[-n:]), _cv(gpu_p[-n:])
        cpu_t, gpu_t = cpu_temperature_c(counters.thermal_root), gpu_temperature_c(counters.nvml)
        steady = ((counters.rapl is None or (cpu_cv is not None and cpu_cv <= settings.cpu_std_to_mean))
                  and (counters.nvml is None or (gpu_cv is not None and gpu_cv <= settings.gpu_std_to_mean))
                  and (cpu_t is None or cpu_t <= settings.cpu_max_temp_c)
                  and (gpu_t is None or gpu_t <= settings.gpu_max_temp_c))
        if steady or clock() - began >= settings.max_wait_s:
            (ts, rs), (te, re_) = readings[-1 - n], readings[-1]
            energy = counters.energy_j(rs, re_)
            cpu_j, gpu_j = energy.cpu_j, energy.gpu_j
            return Baseline(wait_s=clock() - began, window_s=te - ts, start=rs, end=re_,
                            cpu_power_w=cpu_j / (te - ts) if cpu_j is not None else None,
                            gpu_power_w=gpu_j / (te - ts) if gpu_j is not None else None,
                            cpu_std_to_mean=cpu_cv, gpu_std_to_mean=gpu_cv)


def _readings(values) -> str | None:
    return ";".join(str(v) for v in values) if values is not None else None


def measure(name: str, size: int, call: PreparedCall, *, counters: Counters | None,
            settings: StableState, min_window_s: float, framework: str, experiment: int,
            position: int, clock=time.perf_counter, sleep=time.sleep) -> dict:
    """One api_calls row: one call at one input size, measured over a repeated window."""
    row: dict[str, object] = {f.name: None for f in load_schema("api_calls").fields}
    period = counters.update_period_s(clock) if counters else 0.0
    target = max(min_window_s, UPDATE_PERIODS * period)
    call.run()   # warm-up: first-call allocation and compilation stay out of the window
    call.sync()
    baseline = wait_for_stable_state(counters, settings, clock=clock, sleep=sleep) if counters else None
    start_ns, t0 = time.time_ns(), clock()
    begin = counters.read() if counters else None
    reps = 0
    while reps == 0 or clock() - t0 < target:   # synchronised: the window closes over done work
        call.run()
        call.sync()
        reps += 1
    end = counters.read() if counters else None
    window = clock() - t0
    pickled = len(pickle.dumps(call.args))
    row.update({
        "call_id": f"deepgreen/data-size/profile-api/experiment-{experiment:03d}/call-{position:04d}",
        "source": "deepgreen", "experiment_kind": "data-size", "project": "profile-api",
        "experiment": experiment, "position": position, "api_call": name, "function": name,
        "framework": framework, "started_at_utc": _utc(start_ns),
        "ended_at_utc": _utc(start_ns + int(window * 1e9)), "execution_time_s": window / reps,
        "start_time_execution_ns": start_ns, "end_time_execution_ns": start_ns + int(window * 1e9),
        "args_size_bytes": pickled, "kwargs_size_bytes": None, "object_size_bytes": None,
        "input_shape": call.shape, "repetitions": reps,
        "measurement_interval_s": settings.measurement_interval_s,
        "check_last_n_points": settings.check_last_n_points, "max_wait_s": settings.max_wait_s,
        "cpu_std_to_mean": settings.cpu_std_to_mean, "gpu_std_to_mean": settings.gpu_std_to_mean,
        "cpu_max_temp_c": settings.cpu_max_temp_c, "gpu_max_temp_c": settings.gpu_max_temp_c,
        "wait_per_stable_check_loop_s": settings.check_last_n_points * settings.measurement_interval_s,
    })
    if counters is None:
        row["energy_missing_reason"] = DURATIONS_ONLY_REASON + f"; input size {size}"
        return row
    # the counters were read (and the baseline taken) because there are counters
    assert baseline is not None and begin is not None and end is not None
    measured = counters.energy_j(begin, end)
    cpu_j, gpu_j = measured.cpu_j, measured.gpu_j
    row.update({"stable_check_wait_s": baseline.wait_s, "baseline_window_s": baseline.window_s,
                "rapl_baseline_start_uj": _readings(baseline.start.rapl_uj),
                "rapl_baseline_end_uj": _readings(baseline.end.rapl_uj),
                "rapl_start_uj": _readings(begin.rapl_uj), "rapl_end_uj": _readings(end.rapl_uj),
                "rapl_max_energy_range_uj": _readings(counters.rapl.max_energy_range_uj
                                                      if counters.rapl else None),
                "nvml_baseline_start_mj": _readings(baseline.start.nvml_mj),
                "nvml_baseline_end_mj": _readings(baseline.end.nvml_mj),
                "nvml_start_mj": _readings(begin.nvml_mj), "nvml_end_mj": _readings(end.nvml_mj)})
    for domain, energy, power, cv in (("cpu", cpu_j, baseline.cpu_power_w, baseline.cpu_std_to_mean),
                                      ("gpu", gpu_j, baseline.gpu_power_w, baseline.gpu_std_to_mean)):
        if energy is None:
            continue
        row[f"{domain}_total_j"] = energy / reps
        row[f"{domain}_total_normalised_j"] = (energy - power * window) / reps
        row[f"{domain}_baseline_power_w"] = power
        row[f"{domain}_baseline_std_to_mean"] = cv
        row[f"{domain}_power_mean_w"] = energy / window
    reasons = [f"{k}: {v}" for k, v in counters.missing.items()]
    reasons.append("RAM: no DRAM counter is read by this project")
    row["energy_missing_reason"] = "; ".join(reasons)
    return row


def _utc(ns: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ns // 1_000_000_000, _dt.UTC).replace(
        microsecond=(ns % 1_000_000_000) // 1000)


@dataclass
class ProfileResult:
    descriptor: Path
    rows: list[dict]
    skipped: list[dict]


def profile_api(calls: list[str], sizes: list[int], out: Path, *, experiments: int = 1,
                durations_only: bool = False, allow_missing_counters: bool = False,
                settings: StableState = StableState(), min_window_s: float = 1.0,
                overwrite: bool = False, powercap_root: Path = POWERCAP_ROOT,
                pynvml_module=None, thermal_root: Path = THERMAL_ROOT,
                clock=time.perf_counter, sleep=time.sleep, progress=None) -> ProfileResult:
    """Profile each call at each size `experiments` times and write an API-level package."""
    refuse_unknown(calls, list(CATALOGUE), "an API call profile-api knows", code="unknown-call")
    if not sizes or any(s < 1 for s in sizes):
        raise UserError("input sizes must be positive integers", code="bad-sizes")
    counters = open_counters(durations_only=durations_only,
                             allow_missing_counters=allow_missing_counters,
                             powercap_root=powercap_root, pynvml_module=pynvml_module,
                             thermal_root=thermal_root)
    rows: list[dict] = []
    skipped: list[dict[str, str]] = []
    for name in calls:
        framework_module, builder = CATALOGUE[name]
        framework = framework_version(framework_module)
        if framework is None:
            skipped.append({"api_call": name, "reason": f"{framework_module} is not installed "
                            f"(pip install '.[{framework_module}]')"})
            if progress:
                progress(f"skipped {name}: {skipped[-1]['reason']}")
            continue
        for experiment in range(1, experiments + 1):
            for size in sizes:
                row = measure(name, size, builder(name, size), counters=counters, settings=settings,
                              min_window_s=min_window_s, framework=framework,
                              experiment=experiment, position=len(rows), clock=clock, sleep=sleep)
                rows.append(row)
                if progress:
                    progress(f"{name} size {size} (experiment {experiment}): "
                             f"{row['execution_time_s'] * 1e3:.3f} ms x {row['repetitions']}")
    columns = {n: [r[n] for r in rows] for n in load_schema("api_calls").field_names}
    empty_samples: dict[str, list] = {n: [] for n in load_schema("api_samples").field_names}
    meta = {"name": "api-profiles", "title": "API-level energy profiles measured by profile-api",
            "provenance": {"generator": "deepgreen profile-api", "calls": calls, "sizes": sizes,
                           "durations_only": durations_only,
                           "counters_missing": counters.missing if counters else None},
            "skipped_calls": skipped}
    descriptor = write_api_package({"api_calls": text_table("api_calls", columns),
                                    "api_samples": text_table("api_samples", empty_samples)},
                                   Path(out), meta, overwrite=overwrite)
    return ProfileResult(descriptor, rows, skipped)
