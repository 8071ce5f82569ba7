"""The generative model of the synthetic campaign (`deepgreen synth`).

A synthetic package is a replication package whose numbers were *drawn*,
not measured.  It exists so that every layer (validate, audit, restore,
render) can be exercised end to end at the full size of the study, and so
that an analysis can be checked against a known answer: everything the
generator plants is written to ``synth-truth.json`` beside the tables, and
the descriptor says ``"synthetic": true`` (docs/design.md, "Honesty rules").

What comes from where
=====================

The *shape* of the campaign comes from the experiment specification
(``collect/experiment.toml``, `deepgreen_audit.spec`): the ecosystems
(S6), architectures (S1), datasets with their class counts and train/eval
sizes (S3), repetitions (S6), epochs and every recipe column (S2-S4).  The
*numbers* come from a `SynthModel` (this module): every planted parameter
has a default here and can be overridden from a TOML file
(`SynthModel.from_toml`).  The randomness comes from one master seed:
independent NumPy ``default_rng([seed, stream])`` streams for the
schedule, timing, power, counters, CodeCarbon, learning curves, the 1 Hz
sampler and each planted defect, so the same seed gives byte-identical
tables and a defect changes only what it touches (and, for the defects
that change time or power, the host counters and clocks after it).  No
wall-clock time is read anywhere.

Notation: ecosystem k, architecture a, dataset d, run r, block b (one
phase of one epoch e = 1..E), phase in {train, eval}; ``N_train[d]`` and
``N_eval[d]`` are the spec's sample counts; ``z`` are independent standard
normal draws and ``U(lo, hi)`` uniform draws.

Schedule, seeds, processes
==========================

* The campaign is every configuration (k, a, d) x repetitions 1..R.  Each
  repetition round is a shuffled pass over all configurations, and when a
  round would start with the configuration that ended the previous round,
  its first entry is swapped with another, so no configuration ever runs
  twice in a row.  ``schedule_position`` numbers runs 1..n in that order.
* Runs execute one after another on one host from ``campaign_start_utc``:
  an idle gap ``U(run_gap_s)`` before each run (none before the first), a
  start-up ``U(startup_s)`` (process start, data and weight loading)
  before the first block, blocks separated by ``U(block_gap_s)`` (logging,
  switching phase), and a tear-down ``U(teardown_s)`` after the last.  A
  run's ``started_at_utc`` is the start of its start-up and its
  ``ended_at_utc`` the end of its tear-down.  All clocks are integer
  microseconds, so ``duration_s`` has microsecond resolution.
* Seeds are distinct draws from [0, 2**31 - 1); process ids increase with
  schedule position by ``U{pid_step}`` (a busy host), so they are distinct.

Time
====

Counter-bracketed block durations (seconds)::

    T_train(r, e) = s_train[a] * N_train[d] / 1e4 * m_time[k]
                    * (warmup_factor if e == 1 else 1)
                    * exp(run_time_sigma * z_r) * exp(block_time_sigma * z_rb)
    T_eval(r, e)  = s_eval[a]  * N_eval[d]  / 1e4 * m_time[k]
                    * exp(run_time_sigma * z_r) * exp(block_time_sigma * z_rb)

``s_train``/``s_eval`` are ``architecture_train_s_per_10k`` /
``architecture_eval_s_per_10k`` (PyTorch on the synthetic host), ``m_time``
is ``ecosystem_time``.  ``z_r`` is one draw per run (run-to-run noise),
``z_rb`` one per block.  A campaign whose scope changes the recipe multiplies both by
``work_factor``: ``(px / px_full) ** (2 * resolution_time_exponent)``, and for training also
``(batch_full / batch) ** batch_time_exponent`` (the full design's values from the
specification).  No clean block lasts less than ``min_block_s`` (CodeCarbon's
interval: a shorter block is the short-blocks defect, never noise).

A stack named in ``precision_change`` (``deepgreen synth --precision-change STACK=FACTOR``)
ran under a precision policy other than the specification's: its TF32 flag flipped
(`precision_policy_changed`: ``fp32-tf32-off`` becomes ``fp32-tf32-on`` and back), which its
runs record (``precision_policy``, ``tf32_enabled``), and ``T_train`` of its runs is multiplied
by FACTOR (power unchanged, so its training energy follows).  Every random draw is the same
as without it, so two campaigns of one seed differ in that stack's training blocks (and the
clocks and counters after them) only: the pairs `deepgreen compare` is tested on.

Power and energy
================

Mean powers over a block (watts)::

    P_gpu(r, b)    = W_gpu[a, phase] * f_gpu[k] * exp(block_power_sigma * z)
    P_cpu_p(r, b)  = W_cpu[phase] * f_cpu[k] * share[p] * exp(block_power_sigma * z_p)

``W_gpu`` is ``architecture_gpu_{train,eval}_w``, ``f_gpu`` is
``ecosystem_gpu_power``, ``W_cpu`` is ``cpu_{train,eval}_w`` (both packages
together), ``f_cpu`` is ``ecosystem_cpu_power`` and ``share`` is
``cpu_package_share`` (package-0, package-1).  Between blocks and during
start-up/tear-down the host draws ``gpu_gap_w`` and ``cpu_gap_w``; between
runs ``gpu_idle_w`` and ``cpu_idle_w``.  Every interval's energy is turned
into integer counter increments (GPU: ``round(P * t_us / 1e3)`` mJ; each
RAPL package: ``round(P_p * t_us)`` uJ).

Hardware counters
=================

The synthetic host has one GPU and two RAPL package domains, and its
counters run through the whole campaign, as a real host's do: the NVML
total-energy counter starts at a random ``U{nvml_origin_mj}`` value and the
RAPL counters at random points, and both advance through every block, every
gap between blocks and every idle gap between runs.  So each run starts at
a large, effectively random counter value, consecutive blocks of a run are
monotonic, and the energy spent in a gap shows as the difference between
one block's end reading and the next block's start reading.  RAPL counters
wrap at ``rapl_max_energy_range_uj``; each package's origin is placed so
that it wraps inside a randomly drawn block (at a random fraction of it),
so every campaign, however small, has at least one genuinely wrapping
block; at ~40 W a package wraps about every 1.8 h, so the full campaign
(~42 h of host time) has a few dozen wrapping blocks.  Their count and rows
are in the truth (``rapl_wraps``).

The energy columns are computed from the integer counters, exactly as an
audit recomputes them in float64::

    gpu_energy_j = (nvml_end_mj - nvml_start_mj) / 1000
    rapl_wraps   = the multiples of range[p] each package's counter crossed in the
                   block (what the harness's 1 Hz reads count)
    cpu_energy_j = sum over packages p, in rapl_domains order, left to right,
                   of (rapl_end_uj[p] - rapl_start_uj[p] + rapl_wraps[p] x range[p]) / 1e6
    energy_j     = gpu_energy_j + cpu_energy_j

CodeCarbon
==========

CodeCarbon 3.x (``codecarbon_version``, the specification's tracking mode) is the
second reading of each block.  Its tracker lives a little longer than the
counter window::

    codecarbon_duration_s = duration_s + U(codecarbon_overhang_s)
    cc_gpu_J = gpu_energy_j * (1 + codecarbon_energy_bias + codecarbon_energy_noise * z)
    cc_cpu_J = cpu_energy_j * (1 + codecarbon_energy_bias + codecarbon_energy_noise * z')
    cc_ram_J = codecarbon_ram_power_w * codecarbon_duration_s   (modelled RAM power)

each reported in kWh (J / ``J_PER_KWH`` of `deepgreen_audit.units`; ``codecarbon_energy_kwh``
is the sum of the three), ``codecarbon_energy_j = codecarbon_energy_kwh * J_PER_KWH``, powers are
domain energy / ``codecarbon_duration_s`` (RAM: the modelled constant), and
the methods are ``codecarbon_cpu_method`` / ``codecarbon_gpu_method``
(the specification's: "rapl" / "nvml").  Emissions are ``codecarbon_energy_kwh *
carbon_intensity_kg_per_kwh`` in ``codecarbon_country_iso_code`` (no region, as the offline
tracker writes it), their rate is emissions / ``codecarbon_duration_s``; the environment
carries ``codecarbon_ram_total_gb``, ``codecarbon_pue`` and no cloud.  The bias stands for
CodeCarbon's interpolation of its 1 Hz power readings over a tracker that outlives the window; the
difference between the two readings is therefore about +2 % plus RAM.

Learning curves
===============

With chance level ``c = 1 / classes[d]`` and ``A = final_acc[d] +
architecture_accuracy_offset[a] + ecosystem_accuracy_offset[k] +
run_accuracy_sigma * z_r``::

    test_accuracy(e) = c + (A - c) * (1 - exp(-e / accuracy_tau_epochs))
                       + epoch_accuracy_sigma * z_re

quantised to whole samples (k / N_eval[d]) and clipped to [0, 1]; it is
written on eval rows only (empty on train rows).  In an initialiser trial (a scope
that names ``initialisers``) exactly ``round(TRIAL_COLLAPSE_SHARE[i] x runs)``
of initialiser i's runs, drawn, *collapse*: their accuracy stays at
``c + epoch_accuracy_sigma * z_re`` and their loss at ``ln(classes)`` (times the
run's factor) in every epoch; the truth names them (``trial``).  Mean loss decreases
strictly with the epoch::

    loss(e) = (L_f + (ln(classes) - L_f) * exp(-e / loss_tau_epochs)) * exp(run_loss_sigma * z_r)

with ``L_f = dataset_final_train_loss[d]`` (train rows) or
``dataset_final_eval_loss[d]`` (eval rows), rounded to 6 decimals.  ``samples_processed`` is
``N_train[d]`` or ``N_eval[d]``.

1 Hz samples
============

``t_s = phi, phi + 1, phi + 2, ...`` seconds since the run's start, up to its end, where the
phase ``phi`` (uniform in [0, 1), to the microsecond, one per run) is where a real sampler's
first tick lands after the run's clock starts: real sample times are not whole seconds, and
an analysis that joins them with block times must not rely on it.  Each
second takes the state of the interval it falls in: during a block, GPU
power is the block's own mean power ``P_gpu(r, b)`` times
``exp(sample_power_sigma * z)``, GPU utilisation
``ecosystem_gpu_utilization_pct[k]`` (train) or ``eval_utilization_ratio``
of it (eval), memory the framework's footprint
(``ecosystem_gpu_memory_mib[k]`` for frameworks that preallocate, else
``architecture_gpu_memory_mib[a]``), CPU utilisation
``ecosystem_cpu_utilization_pct[k]`` (train) or ``eval_utilization_ratio``
of it (eval); between blocks and at tear-down the gap values; during
start-up ``gpu_context_mib`` of memory and no GPU work.  Values carry
normal noise (``sample_*_sd``), are clipped to their ranges and rounded
to one decimal (the instrument's resolution); block values keep full float
precision.

Placeholders (documented, not measurements)
===========================================

* ``initial_weights_sha256`` is SHA-256 of the text
  ``"deepgreen-synthetic initial weights: architecture=<a>; classes=<C>; seed=<seed>"``
  (in an initialiser trial, ``"; initialiser=<i>"`` after it for every initialiser but the
  canonical one)
  and ``data_fingerprint_sha256`` SHA-256 of
  ``"deepgreen-synthetic data: dataset=<d>; resolution=<px>px"``: they stand
  for the hashes a real run records of the canonical weight export it
  loaded and of the pixels and labels it read.
* ``codecarbon_config_sha256`` is SHA-256 of `CODECARBON_CONFIG_PLACEHOLDER`
  (the text of a pinned CodeCarbon configuration a real campaign hashes).
* The environment (host, GPU, driver, CPU, OS, versions) is a fixed,
  plausible description of one L40S host (``environment`` parameters).
* Every run placed its work where a GPU campaign does: ``device`` is the
  specification's declared device, ``device_name`` the synthetic GPU
  (``gpu_model``), ``cudnn_enabled`` the stack's ``ecosystem_cudnn_available``
  (DL4J has no cuDNN path), ``tf32_enabled`` false unless the precision policy
  leaves TF32 on; CodeCarbon tracked the host's one GPU
  (``codecarbon_gpu_count`` = ``gpu_count``).

Truth
=====

``synth-truth.json`` holds the seed, every model parameter, per
configuration the noise-free (all ``z = 0``) expected energy and duration
of a train block (excluding the warm-up epoch), an eval block, and a run's
whole train and eval phases (train: ``(E - 1 + warmup_factor)`` train
blocks; eval: ``E`` eval blocks; blocks only, no gaps); the planted
per-cell spreads (max/min of the ecosystems' expected block energy per
(architecture, dataset, phase), also for the LibTorch control group of the
spec); the RAPL wrap count; the realised CodeCarbon overhang distribution;
and the planted defects with the rows they touched.  The per-configuration
values describe the defect-free model; a defect that changes physics
(``mislabelled-architecture``, ``short-blocks``, ``cpu-fallback``) says in its
own entry what its rows follow instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.package.checksums import sha256_bytes
from deepgreen_audit.spec import load_spec, read_toml
from deepgreen_audit.trial import CANONICAL_INITIALISER


def _measurement(key: str):
    """A default drawn from the specification's S5_measurement (CodeCarbon's settings)."""
    return field(default_factory=lambda: load_spec()["S5_measurement"][key])


#: The fixed text whose SHA-256 stands for the pinned CodeCarbon configuration; its tracking
#: mode and interval are the specification's (S5_measurement).
CODECARBON_CONFIG_PLACEHOLDER = (
    "[codecarbon]\n"
    "# deepgreen synthetic campaign: placeholder for the pinned configuration\n"
    f"tracking_mode = {load_spec()['S5_measurement']['codecarbon_tracking_mode']}\n"
    f"measure_power_secs = {load_spec()['S5_measurement']['codecarbon_interval_s']:g}\n"
    "save_to_file = true\n"
    "log_level = warning\n"
)


def precision_policy_changed(policy: str) -> str:
    """The precision policy with its TF32 flag flipped (`precision_change`): ``...-tf32-off``
    becomes ``...-tf32-on`` and back; a policy that names no TF32 flag gains ``-tf32-on``."""
    if policy.endswith("tf32-off"):
        return policy.removesuffix("off") + "on"
    if policy.endswith("tf32-on"):
        return policy.removesuffix("on") + "off"
    return policy + "-tf32-on"


def _eco(pytorch, tensorflow, jax, cpp, java, r, rust):
    return field(default_factory=lambda: {
        "python-pytorch": pytorch, "python-tensorflow": tensorflow, "python-jax": jax,
        "cpp-libtorch": cpp, "java-dl4j": java, "r-torch": r, "rust-tch": rust})


def _ds(fashion, cifar100, tiny, imagenette, digits):
    return field(default_factory=lambda: {
        "fashion-mnist": fashion, "cifar100": cifar100, "tiny-imagenet": tiny,
        "imagenette": imagenette, "digits": digits})


def _arch(resnet18, vgg16):
    return field(default_factory=lambda: {"resnet18": resnet18, "vgg16": vgg16})


@dataclass(frozen=True)
class SynthModel:
    """Every planted parameter of the synthetic campaign (see the module docstring).

    Dict-valued parameters are keyed by the normalised labels of the runs
    table; treat them as read-only.  Ranges are ``(low, high)`` pairs.
    """

    # --- ecosystems -------------------------------------------------------
    #: Time multiplier of each ecosystem against Python/PyTorch.
    ecosystem_time: dict = _eco(1.0, 1.2, 0.9, 0.97, 2.4, 1.35, 1.0)
    #: {ecosystem: factor}: stacks whose precision policy differs from the specification's (its
    #: TF32 flag flipped, `precision_policy_changed`), with the factor that flip multiplies
    #: their training time (and so training energy) by; empty: every stack follows the policy
    precision_change: dict = field(default_factory=dict)
    #: GPU board-power factor (slower stacks keep the GPU less busy).
    ecosystem_gpu_power: dict = _eco(1.0, 0.96, 1.04, 1.0, 0.72, 0.9, 1.0)
    #: CPU package-power factor.
    ecosystem_cpu_power: dict = _eco(1.0, 1.04, 1.0, 0.98, 1.14, 1.06, 0.98)
    #: GPU utilisation during training (1 Hz sampler), percent.
    ecosystem_gpu_utilization_pct: dict = _eco(96.0, 93.0, 98.0, 97.0, 58.0, 81.0, 96.0)
    #: CPU utilisation over all logical CPUs during training, percent.
    ecosystem_cpu_utilization_pct: dict = _eco(6.5, 8.0, 5.5, 4.5, 14.0, 7.5, 4.5)
    #: GPU memory of frameworks that preallocate (TensorFlow: nearly all; JAX: 75 %), MiB.
    ecosystem_gpu_memory_mib: dict = field(default_factory=lambda: {
        "python-tensorflow": 44536.0, "python-jax": 34551.0})
    #: Additive offset on the final test accuracy.
    ecosystem_accuracy_offset: dict = _eco(0.0, -0.006, 0.004, 0.0, -0.018, -0.009, 0.0)
    #: Whether the stack has a cuDNN path (DL4J's nd4j-native CPU backend has none).
    ecosystem_cudnn_available: dict = _eco(True, True, True, True, False, True, True)
    #: The framework backend each stack records (environment.framework_backend): the CUDA build
    #: the framework targets, JAX's platform; DL4J's (None here) is the specification's ND4J
    #: backend for the GPU (S4_backend.dl4j_backend), which S4.dl4j-backend checks.
    ecosystem_framework_backend: dict = _eco("cuda-12.4", "cuda-12.4", "gpu", "cuda-12.4", None, "cuda-11.7",
                                             "cuda-12.4")

    # --- architectures ----------------------------------------------------
    #: Train time per 10,000 samples (PyTorch on the synthetic host), seconds.
    architecture_train_s_per_10k: dict = _arch(1.8, 2.7)
    #: Eval time per 10,000 samples, seconds.
    architecture_eval_s_per_10k: dict = _arch(1.2, 1.8)
    #: GPU board power while training, watts.
    architecture_gpu_train_w: dict = _arch(220.0, 268.0)
    #: GPU board power while evaluating, watts.
    architecture_gpu_eval_w: dict = _arch(150.0, 182.0)
    #: GPU memory in use (frameworks that do not preallocate), MiB.
    architecture_gpu_memory_mib: dict = _arch(2310.0, 3870.0)
    #: Additive offset on the final test accuracy.
    architecture_accuracy_offset: dict = _arch(0.0, -0.012)

    # --- datasets ---------------------------------------------------------
    #: Final test accuracy the curves approach.
    dataset_final_accuracy: dict = _ds(0.92, 0.55, 0.38, 0.82, 0.97)
    #: Mean train loss the curves approach.
    dataset_final_train_loss: dict = _ds(0.06, 0.25, 0.9, 0.1, 0.02)
    #: Mean eval loss the curves approach.
    dataset_final_eval_loss: dict = _ds(0.3, 2.0, 3.0, 0.7, 0.1)

    # --- host power (both CPU packages together) ---------------------------
    cpu_train_w: float = 84.0
    cpu_eval_w: float = 76.0
    cpu_gap_w: float = 68.0
    cpu_idle_w: float = 61.0
    #: Share of CPU power on package-0, package-1.
    cpu_package_share: tuple = (0.54, 0.46)
    #: GPU power between blocks of a run (context held), watts.
    gpu_gap_w: float = 72.0
    #: GPU power between runs (no context), watts.
    gpu_idle_w: float = 34.0
    #: GPU memory while a run starts up, MiB.
    gpu_context_mib: float = 420.0
    #: How much longer a block takes when its stack fell back to the CPU (the cpu-fallback
    #: defect; its GPU then draws gpu_idle_w, at no utilisation and no memory).
    cpu_fallback_time_factor: float = 12.0

    # --- noise and warm-up -------------------------------------------------
    run_time_sigma: float = 0.03
    block_time_sigma: float = 0.01
    block_power_sigma: float = 0.01
    warmup_factor: float = 1.3

    # --- a scope's recipe (the contrast cell: 224 px, batch 32) ----------------
    #: time per sample grows as (pixels / full design's pixels) ** this (1: with the convolutions' work)
    resolution_time_exponent: float = 1.0
    #: training time per sample grows as (full design's batch / batch) ** this
    batch_time_exponent: float = 0.15

    # --- learning curves ---------------------------------------------------
    accuracy_tau_epochs: float = 4.0
    run_accuracy_sigma: float = 0.006
    epoch_accuracy_sigma: float = 0.003
    loss_tau_epochs: float = 6.0
    run_loss_sigma: float = 0.02

    # --- CodeCarbon -------------------------------------------------------
    codecarbon_overhang_s: tuple[float, float] = (0.2, 1.6)
    #: a clean block lasts at least this (CodeCarbon's interval, S5); a shorter one is the
    #: short-blocks defect, never noise
    min_block_s: float = _measurement("codecarbon_interval_s")
    codecarbon_energy_bias: float = 0.02
    codecarbon_energy_noise: float = 0.01
    codecarbon_ram_power_w: float = 5.0
    #: how CodeCarbon measured (S5's cpu_power_method / gpu_power_method), its version and mode
    codecarbon_cpu_method: str = _measurement("cpu_power_method")
    codecarbon_gpu_method: str = _measurement("gpu_power_method")
    codecarbon_version: str = "3.0.4"
    codecarbon_tracking_mode: str = _measurement("codecarbon_tracking_mode")
    #: where CodeCarbon places every block (the pinned configuration's country; offline: no
    #: region), and the carbon intensity of that grid, kg CO2-eq per kWh
    codecarbon_country_iso_code: str = "DEU"
    carbon_intensity_kg_per_kwh: float = 0.381
    #: what CodeCarbon assumes of the host
    codecarbon_ram_total_gb: float = 503.5
    codecarbon_pue: float = 1.0

    # --- schedule and clocks -----------------------------------------------
    campaign_start_utc: str = "2026-03-02T08:00:00Z"
    run_gap_s: tuple[float, float] = (20.0, 60.0)
    startup_s: tuple[float, float] = (3.0, 8.0)
    block_gap_s: tuple[float, float] = (0.05, 0.3)
    teardown_s: tuple[float, float] = (0.5, 2.0)
    first_process_id: int = 2817
    pid_step: tuple = (7, 3000)

    # --- counters ---------------------------------------------------------
    nvml_origin_mj: tuple = (10_000_000_000, 5_000_000_000_000)
    rapl_max_energy_range_uj: tuple = (262143328850, 262143328850)

    # --- 1 Hz sampler -----------------------------------------------------
    eval_utilization_ratio: float = 0.88
    gap_gpu_utilization_pct: float = 3.0
    gap_cpu_utilization_pct: float = 2.5
    sample_power_sigma: float = 0.02
    sample_gpu_utilization_sd: float = 1.5
    sample_cpu_utilization_sd: float = 0.6
    sample_memory_sd: float = 4.0

    # --- environment ------------------------------------------------------
    environment: dict = field(default_factory=lambda: {
        "host": "synthetic-host",
        "os": "Linux 6.8.0-49-generic (Ubuntu 24.04.1 LTS)",
        "cpu_model": "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
        "cpu_count": 128,
        "gpu_model": "NVIDIA L40S",
        "gpu_driver": "550.127.05",
        "cuda_version": "12.4",
        "python_version": "3.11.10",
        "rapl_domains": "package-0;package-1",
    })

    def __post_init__(self):
        for name in ("codecarbon_overhang_s", "run_gap_s", "startup_s", "block_gap_s",
                     "teardown_s", "pid_step", "nvml_origin_mj", "cpu_package_share",
                     "rapl_max_energy_range_uj"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("codecarbon_overhang_s", "run_gap_s", "startup_s", "block_gap_s",
                     "teardown_s", "pid_step", "nvml_origin_mj"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise UserError(f"synthetic model: {name} must be a range 0 <= low <= high, "
                                f"not {getattr(self, name)!r}")
        domains = self.environment.get("rapl_domains", "").split(";")
        if len(self.cpu_package_share) != len(domains) or \
                len(self.rapl_max_energy_range_uj) != len(domains):
            raise UserError("synthetic model: cpu_package_share and rapl_max_energy_range_uj "
                            "need one entry per RAPL domain")
        if abs(sum(self.cpu_package_share) - 1.0) > 1e-9:
            raise UserError("synthetic model: cpu_package_share must sum to 1")
        for eco, factor in self.precision_change.items():
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
                    not 0 < factor < float("inf"):
                raise UserError(f"synthetic model: precision_change of {eco!r} must be a "
                                f"positive factor, not {factor!r}")
        for name in ("run_time_sigma", "block_time_sigma", "block_power_sigma",
                     "codecarbon_energy_noise", "run_accuracy_sigma", "epoch_accuracy_sigma",
                     "run_loss_sigma", "sample_power_sigma", "sample_gpu_utilization_sd",
                     "sample_cpu_utilization_sd", "sample_memory_sd"):
            if getattr(self, name) < 0:
                raise UserError(f"synthetic model: {name} must not be negative")

    # --- construction -----------------------------------------------------
    def to_dict(self) -> dict:
        """The parameters as plain JSON-serialisable values."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, dict):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            out[f.name] = value
        return out

    def with_overrides(self, overrides: dict, *, where: str | Path | None = None) -> SynthModel:
        """A copy with `overrides` applied; dict parameters are merged key by key."""
        names = {f.name: f for f in dataclasses.fields(self)}
        changes = {}
        refuse_unknown(overrides, list(names), "a parameter of the synthetic model",
                       path=where, code="user-error")
        for key, value in overrides.items():
            current = getattr(self, key)
            if isinstance(current, dict):
                if not isinstance(value, dict):
                    raise UserError(f"{key} must be a table of values", path=where)
                merged = dict(current)
                merged.update(value)
                value = merged
            elif isinstance(current, tuple):
                if not isinstance(value, (list, tuple)) or len(value) != len(current):
                    raise UserError(f"{key} must be a list of {len(current)} values", path=where)
                value = tuple(value)
            elif isinstance(current, (bool, str)):
                if type(value) is not type(current):
                    raise UserError(f"{key} must be a {type(current).__name__}", path=where)
            elif isinstance(current, (int, float)):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise UserError(f"{key} must be a number", path=where)
                value = type(current)(value) if isinstance(current, float) else value
            changes[key] = value
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, overrides: dict) -> SynthModel:
        """The default model with `overrides` applied."""
        return cls().with_overrides(overrides)

    @classmethod
    def from_toml(cls, path: str | Path, base: SynthModel | None = None) -> SynthModel:
        """The default model (or `base`) with the parameters of a TOML file applied.

        Top-level keys are parameter names; a table overrides only the keys it
        names (``[ecosystem_time]`` with ``java-dl4j = 3.0`` changes DL4J alone).
        """
        path = Path(path)
        data = read_toml(path, missing="no such synthetic-model file")
        return (base or cls()).with_overrides(data, where=path)

    # --- noise-free quantities ---------------------------------------------
    def block_duration_s(self, ecosystem: str, architecture: str, phase: str,
                         samples: int) -> float:
        """Noise-free duration of one block (the warm-up factor not applied)."""
        per_10k = (self.architecture_train_s_per_10k if phase == "train"
                   else self.architecture_eval_s_per_10k)[architecture]
        factor = self.precision_change.get(ecosystem, 1.0) if phase == "train" else 1.0
        return per_10k * samples / 1e4 * self.ecosystem_time[ecosystem] * factor

    def work_factor(self, phase: str, recipe: dict, full_recipe: dict) -> float:
        """Time per sample of a phase under `recipe` against the full design's `full_recipe`:
        convolution work grows with the pixels of an input, and small training batches use the
        GPU less well (evaluation keeps its own batch size)."""
        pixels = (recipe["input_resolution_px"] / full_recipe["input_resolution_px"]) ** 2
        factor = pixels ** self.resolution_time_exponent
        if phase == "train":
            factor *= (full_recipe["batch_size"] / recipe["batch_size"]) ** self.batch_time_exponent
        return factor

    def gpu_power_w(self, ecosystem: str, architecture: str, phase: str) -> float:
        base = (self.architecture_gpu_train_w if phase == "train"
                else self.architecture_gpu_eval_w)[architecture]
        return base * self.ecosystem_gpu_power[ecosystem]

    def cpu_power_w(self, ecosystem: str, phase: str) -> float:
        """Both packages together."""
        base = self.cpu_train_w if phase == "train" else self.cpu_eval_w
        return base * self.ecosystem_cpu_power[ecosystem]

    def check_labels(self, ecosystems, architectures, datasets) -> None:
        """Refuse a campaign for which this model lacks a parameter."""
        tables = {
            "ecosystem": (ecosystems, ("ecosystem_time", "ecosystem_gpu_power", "ecosystem_cpu_power",
                                       "ecosystem_gpu_utilization_pct",
                                       "ecosystem_cpu_utilization_pct",
                                       "ecosystem_accuracy_offset", "ecosystem_cudnn_available",
                                       "ecosystem_framework_backend")),
            "architecture": (architectures, ("architecture_train_s_per_10k",
                                             "architecture_eval_s_per_10k",
                                             "architecture_gpu_train_w", "architecture_gpu_eval_w",
                                             "architecture_gpu_memory_mib",
                                             "architecture_accuracy_offset")),
            "dataset": (datasets, ("dataset_final_accuracy", "dataset_final_train_loss",
                                   "dataset_final_eval_loss")),
        }
        for kind, (labels, params) in tables.items():
            for param in params:
                for label in labels:
                    if label not in getattr(self, param):
                        raise UserError(f"synthetic model: {param} has no value for "
                                        f"{kind} {label!r}")


def sha256_text(text: str) -> str:
    """The SHA-256 of `text` in UTF-8: the placeholder hashes a synthetic package carries."""
    return sha256_bytes(text.encode("utf-8"))


#: An initialiser trial's share of each initialiser's runs whose training collapses: exactly
#: round(share x runs) of them, drawn; the shares of the counts the study reports (0, 2 and 4
#: of 6).  Outside the model's parameters, so a campaign that is no trial draws (and records in
#: its truth) what it always did; a trial's truth records them.
TRIAL_COLLAPSE_SHARE = {"he": 0.0, "glorot": 2 / 6, "xavier": 4 / 6}


def initial_weights_sha256(architecture: str, classes: int, seed: int,
                           initialiser: str = CANONICAL_INITIALISER) -> str:
    """Placeholder for the hash of the initial-weight export (see model docs): the canonical
    one's, or in an initialiser trial the export drawn with `initialiser`."""
    trial = "" if initialiser == CANONICAL_INITIALISER else f"; initialiser={initialiser}"
    return sha256_text(f"deepgreen-synthetic initial weights: architecture={architecture}; "
                        f"classes={classes}; seed={seed}{trial}")


def data_fingerprint_sha256(dataset: str, resolution_px: int) -> str:
    """Placeholder for the fingerprint of the dataset's pixels and labels (see model docs)."""
    return sha256_text(f"deepgreen-synthetic data: dataset={dataset}; resolution={resolution_px}px")


def expected_config(model: SynthModel, eco: str, arch: str, n_train: int, n_eval: int,
                    epochs: int, device: str = "cuda") -> dict:
    """Noise-free expected block and phase values of one configuration (on a `cpu` host: its
    blocks cpu_fallback_time_factor longer, and no GPU)."""
    out = {}
    slower = model.cpu_fallback_time_factor if device == "cpu" else 1.0
    for phase, samples in (("train", n_train), ("eval", n_eval)):
        t = max(model.block_duration_s(eco, arch, phase, samples) * slower, model.min_block_s)
        pg = model.gpu_power_w(eco, arch, phase) if device != "cpu" else 0.0
        pc = model.cpu_power_w(eco, phase)
        blocks = (epochs - 1 + model.warmup_factor) if phase == "train" else epochs
        out[phase] = {
            "block_duration_s": t, "block_energy_j": t * (pg + pc),
            "block_gpu_energy_j": t * pg, "block_cpu_energy_j": t * pc,
            "gpu_power_w": pg, "cpu_power_w": pc,
            "phase_duration_s": t * blocks, "phase_energy_j": t * (pg + pc) * blocks,
        }
    return out
