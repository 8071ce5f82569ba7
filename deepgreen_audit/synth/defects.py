"""Planted defects: known faults a synthetic package can carry, for testing the audit.

Each defect is a function registered in `DEFECTS` under its name.  It acts on
the generator's working state (`deepgreen_audit.synth.generate.Campaign`)
and returns the entry that goes to ``truth["defects"][name]``: what it chose,
and which runs and rows it touched (``run_ids`` and ``rows`` counts are
completed by the generator from the internal ``_runs`` / ``_blocks``
references, counting only block rows that are in the package).

Defects are *semantic*: a package with defects is still schema-valid.  Two
stages exist: ``physics`` defects change what the host did (time, power) and
act before the simulation, so counters, clocks and samples follow them;
``report`` defects change what was written and act after it.  Defects are
applied in the order of `DEFECTS` whatever order they were asked in; each
draws its choices from its own random stream, so asking for one defect does
not change what another chooses.
"""

from __future__ import annotations

import zlib
from typing import Any, Protocol

import numpy as np

from deepgreen_audit.errors import UserError
from deepgreen_audit.units import J_PER_KWH

#: Values the defects plant.
MODELLED_CPU_POWER_W = 42.5
DRIFT_LEARNING_RATE = 0.001
CODECARBON_V2_VERSION = "2.8.4"
CODECARBON_V2_TRACKING_MODE = "process"
SHORT_EVAL_BLOCK_S = 0.4
MISSING_EPOCHS = 3
COUNTER_MISMATCH_BLOCKS = 5
OTHER_PYTHON_VERSION = "3.10.12"
OTHER_RAM_TOTAL_GB = 251.7
OTHER_WINDOW_DAYS = 30
LATE_RERUNS = 4
LATE_RERUN_WAIT_H = 6
DRIFTED_WINDOW_FACTOR = 3.0
BROKEN_IDENTITY_BLOCKS = 5
BROKEN_INTENSITY_FACTOR = 1.3

#: The random stream of the defects, apart from the generator's streams 1..7:
#: default_rng([seed, DEFECT_STREAM, crc32(defect name)]).
DEFECT_STREAM = 1000

class Defect(Protocol):
    """A registered defect: a function that plants itself, with the `stage` it runs at."""

    stage: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


DEFECTS: dict[str, Defect] = {}


def _defect(name: str, stage: str):
    def register(fn):
        fn.stage = stage
        fn.defect_name = name
        DEFECTS[name] = fn
        return fn
    return register


def _pick(rng: np.random.Generator, items: list):
    if not items:
        return None
    return items[int(rng.integers(len(items)))]


def _describe(fn) -> str:
    return " ".join((fn.__doc__ or "").split())


@_defect("mislabelled-architecture", "physics")
def mislabelled_architecture(c, rng) -> dict:
    """One resnet18 configuration whose time and energy follow vgg16: every run of
    the configuration is labelled resnet18 but ran at vgg16's speed and power."""
    from deepgreen_audit.synth.model import expected_config

    if "vgg16" not in c.model.architecture_train_s_per_10k:
        raise UserError("defect mislabelled-architecture needs vgg16 parameters in the model")
    candidates = [k for k, cfg in enumerate(c.configs) if cfg[1] == "resnet18"]
    if not candidates:
        raise UserError("defect mislabelled-architecture needs a resnet18 configuration")
    k = _pick(rng, candidates)
    runs = c.runs_of_config(k)
    for i in runs:
        c.phys_arch[i] = "vgg16"
    eco, _, ds = c.configs[k]
    return {"configuration": c.config_id(k), "labelled": "resnet18", "follows": "vgg16",
            "expected_as_run": expected_config(c.model, eco, "vgg16", c.n_train[ds],
                                               c.n_eval[ds], c.epochs),
            "_runs": runs, "_blocks": [(i, b) for i in runs for b in range(c.n_blocks_per_run)]}


@_defect("short-blocks", "physics")
def short_blocks(c, rng) -> dict:
    """One configuration's eval blocks last 0.4 s each (too short for a 1 Hz
    CodeCarbon reading to mean anything)."""
    k = _pick(rng, list(range(len(c.configs))))
    runs = c.runs_of_config(k)
    c.eval_fixed_s[runs] = SHORT_EVAL_BLOCK_S
    return {"configuration": c.config_id(k), "eval_block_duration_s": SHORT_EVAL_BLOCK_S,
            "_runs": runs, "_blocks": [(i, b) for i in runs
                                       for b in range(1, c.n_blocks_per_run, 2)]}


@_defect("cpu-fallback", "physics")
def cpu_fallback(c, rng) -> dict:
    """One ecosystem's runs placed their work on the CPU in a cuda campaign (a framework that
    silently fell back, e.g. TensorFlow not finding its CUDA libraries): device cpu, the CPU as
    device name, cuDNN off; their blocks last cpu_fallback_time_factor times longer with the
    GPU idle."""
    from deepgreen_audit.spec import declared_device

    if declared_device() != "cuda":
        raise UserError("defect cpu-fallback needs a campaign that declares device = \"cuda\"")
    eco = _pick(rng, c.ecosystems)
    runs = c.runs_of_ecosystem(eco)
    c.on_cpu[runs] = True
    return {"ecosystem": eco, "device": "cpu", "declared_device": "cuda",
            "time_factor": c.model.cpu_fallback_time_factor, "gpu_power_w": c.model.gpu_idle_w,
            "_runs": runs, "rows": {"runs": len(runs)}}


@_defect("missing-blocks", "report")
def missing_blocks(c, rng) -> dict:
    """One run lacks the blocks of its last 3 epochs (train and eval), though it
    says it completed all its epochs."""
    i = int(rng.integers(c.n))
    k = min(MISSING_EPOCHS, c.epochs - 1)
    if k < 1:
        raise UserError("defect missing-blocks needs at least 2 epochs")
    dropped = list(range(2 * (c.epochs - k), c.n_blocks_per_run))
    c.keep[i, dropped] = False
    return {"run_id": c.run_id(i), "epochs_missing": list(range(c.epochs - k + 1, c.epochs + 1)),
            "_runs": [i], "rows": {"blocks_removed": len(dropped)}}


@_defect("modelled-cpu", "report")
def modelled_cpu(c, rng) -> dict:
    """One ecosystem's CodeCarbon CPU reading is a modelled constant 42.5 W
    (method tdp-constant), as when CodeCarbon cannot read RAPL."""
    eco = _pick(rng, c.ecosystems)
    runs = c.runs_of_ecosystem(eco)
    bl = c.blocks
    dur = bl["codecarbon_duration_s"][runs]
    bl["codecarbon_cpu_method"][runs] = "tdp-constant"
    bl["codecarbon_cpu_power_w"][runs] = MODELLED_CPU_POWER_W
    bl["codecarbon_cpu_energy_kwh"][runs] = MODELLED_CPU_POWER_W * dur / J_PER_KWH
    kwh = (bl["codecarbon_gpu_energy_kwh"][runs] + bl["codecarbon_cpu_energy_kwh"][runs]
           + bl["codecarbon_ram_energy_kwh"][runs])
    bl["codecarbon_energy_kwh"][runs] = kwh
    bl["codecarbon_energy_j"][runs] = kwh * J_PER_KWH
    c.refresh_emissions(runs)
    return {"ecosystem": eco, "cpu_power_w": MODELLED_CPU_POWER_W, "method": "tdp-constant",
            "_runs": runs, "_blocks": [(i, b) for i in runs for b in range(c.n_blocks_per_run)]}


@_defect("kwh-as-joules", "report")
def kwh_as_joules(c, rng) -> dict:
    """One configuration's codecarbon_energy_j is written in kWh (the conversion
    x 3.6e6 was forgotten)."""
    k = _pick(rng, list(range(len(c.configs))))
    runs = c.runs_of_config(k)
    c.blocks["codecarbon_energy_j"][runs] = c.blocks["codecarbon_energy_kwh"][runs]
    return {"configuration": c.config_id(k), "column": "codecarbon_energy_j",
            "_runs": runs, "_blocks": [(i, b) for i in runs for b in range(c.n_blocks_per_run)]}


@_defect("codecarbon-v2", "report")
def codecarbon_v2(c, rng) -> dict:
    """One ecosystem's runs record CodeCarbon 2.8.4 in process tracking mode,
    which the measurement contract refuses."""
    eco = _pick(rng, c.ecosystems)
    runs = c.runs_of_ecosystem(eco)
    for i in runs:
        c.env["codecarbon_version"][i] = CODECARBON_V2_VERSION
        c.env["codecarbon_tracking_mode"][i] = CODECARBON_V2_TRACKING_MODE
    return {"ecosystem": eco, "codecarbon_version": CODECARBON_V2_VERSION,
            "codecarbon_tracking_mode": CODECARBON_V2_TRACKING_MODE,
            "_runs": runs, "rows": {"environment": len(runs)}}


@_defect("recipe-drift", "report")
def recipe_drift(c, rng) -> dict:
    """One ecosystem's runs used learning rate 0.001 instead of the specified one
    (ten times the specified rate if the specification already says 0.001)."""
    eco = _pick(rng, c.ecosystems)
    runs = c.runs_of_ecosystem(eco)
    spec_lr = float(c.recipe["learning_rate"])
    lr = DRIFT_LEARNING_RATE if spec_lr != DRIFT_LEARNING_RATE else spec_lr * 10
    for i in runs:
        c.runs["learning_rate"][i] = lr
    return {"ecosystem": eco, "column": "learning_rate", "value": lr, "specified": spec_lr,
            "_runs": runs, "rows": {"runs": len(runs)}}


@_defect("duplicate-seed", "report")
def duplicate_seed(c, rng) -> dict:
    """Two runs share a seed: two repetitions of one configuration (two runs of
    different configurations when there is one repetition)."""
    from deepgreen_audit.synth.model import initial_weights_sha256

    if c.n < 2:
        raise UserError("defect duplicate-seed needs at least two runs")
    if c.repetitions >= 2:
        k = int(rng.integers(len(c.configs)))
        pair = [int(x) for x in rng.choice(c.runs_of_config(k), size=2, replace=False)]
    else:
        pair = [int(x) for x in rng.choice(c.n, size=2, replace=False)]
    a, b = sorted(pair)
    seed = int(c.run_seed[a])
    c.run_seed[b] = seed
    c.runs["seed"][b] = seed
    _, arch, ds = c.configs[c.run_config[b]]
    c.runs["initial_weights_sha256"][b] = initial_weights_sha256(arch, c.classes[ds], seed)
    return {"seed": seed, "_runs": [a, b], "rows": {"runs": 2}}


@_defect("counter-mismatch", "report")
def counter_mismatch(c, rng) -> dict:
    """A few blocks (5) whose gpu_energy_j is 3-15 % above the difference of
    their NVML counter readings (energy_j follows gpu_energy_j + cpu_energy_j)."""
    kept = np.flatnonzero(c.keep.ravel())
    chosen = np.sort(rng.choice(kept, size=min(COUNTER_MISMATCH_BLOCKS, len(kept)), replace=False))
    B = c.n_blocks_per_run
    rows, blocks = [], []
    for j in chosen:
        i, b = divmod(int(j), B)
        counter = float(c.blocks["gpu_energy_j"][i, b])
        reported = counter * (1 + rng.uniform(0.03, 0.15))
        c.blocks["gpu_energy_j"][i, b] = reported
        c.blocks["energy_j"][i, b] = reported + c.blocks["cpu_energy_j"][i, b]
        rows.append({**c.block_key(i, b), "counter_gpu_energy_j": counter,
                     "reported_gpu_energy_j": reported})
        blocks.append((i, b))
    rows.sort(key=lambda r: (r["run_id"], r["epoch"], r["phase"] == "eval"))
    return {"blocks": rows, "_blocks": blocks}


@_defect("varying-environment", "report")
def varying_environment(c, rng) -> dict:
    """One run records another interpreter (Python 3.10.12) and another RAM size (251.7 GB)
    than the rest of the campaign: it ran on another machine or environment."""
    i = int(rng.integers(c.n))
    c.env["python_version"][i] = OTHER_PYTHON_VERSION
    c.env["ram_total_gb"][i] = OTHER_RAM_TOTAL_GB
    return {"run_id": c.run_id(i), "python_version": OTHER_PYTHON_VERSION,
            "ram_total_gb": OTHER_RAM_TOTAL_GB, "_runs": [i], "rows": {"runs": 1}}


@_defect("another-window", "report")
def another_window(c, rng) -> dict:
    """One ecosystem's runs (and their blocks) ran 30 days after the rest of the campaign."""
    import datetime as _dt

    eco = _pick(rng, c.ecosystems)
    runs = c.runs_of_ecosystem(eco)
    shift = _dt.timedelta(days=OTHER_WINDOW_DAYS)
    for i in runs:
        c.runs["started_at_utc"][i] += shift
        c.runs["ended_at_utc"][i] += shift
    c.blocks["block_start_us"][runs] += int(shift.total_seconds() * 1_000_000)
    return {"ecosystem": eco, "days_later": OTHER_WINDOW_DAYS, "_runs": runs,
            "rows": {"runs": len(runs)}}


@_defect("late-reruns", "report")
def late_reruns(c, rng) -> dict:
    """Four runs were re-run after the campaign: they keep their schedule positions but ran
    one after another, starting 6 hours after its last run ended, outside its interleaved
    window (as the study's 4 of 210 did)."""
    import datetime as _dt

    chosen = sorted(int(i) for i in rng.choice(c.n, size=min(LATE_RERUNS, c.n), replace=False))
    kept = [i for i in range(c.n) if i not in chosen]
    begin = max(c.runs["ended_at_utc"][i] for i in kept) + _dt.timedelta(hours=LATE_RERUN_WAIT_H)
    for i in chosen:
        shift = begin - c.runs["started_at_utc"][i]
        begin = c.runs["ended_at_utc"][i] + shift + _dt.timedelta(minutes=1)
        c.runs["started_at_utc"][i] += shift
        c.runs["ended_at_utc"][i] += shift
        c.blocks["block_start_us"][i] += int(shift / _dt.timedelta(microseconds=1))
    return {"wait_hours": LATE_RERUN_WAIT_H, "_runs": chosen, "rows": {"runs": len(chosen)}}


@_defect("drifting-window", "report")
def drifting_window(c, rng) -> dict:
    """In one run, one epoch's eval block was measured over a window three times its phase's
    length (the tracker and counters stopped late); CodeCarbon's window drifted alike."""
    i = int(rng.integers(c.n))
    if c.epochs < 3:
        raise UserError("defect drifting-window needs at least 3 epochs")
    epoch = int(rng.integers(2, c.epochs + 1))
    b = 2 * (epoch - 1) + 1
    bl = c.blocks
    overhang = bl["codecarbon_duration_s"][i, b] - bl["duration_s"][i, b]
    bl["duration_s"][i, b] *= DRIFTED_WINDOW_FACTOR
    bl["codecarbon_duration_s"][i, b] = bl["duration_s"][i, b] + overhang
    # CodeCarbon's modelled RAM energy covers its (longer) window; the totals follow
    ram_kwh = bl["codecarbon_ram_power_w"][i, b] * bl["codecarbon_duration_s"][i, b] / J_PER_KWH
    bl["codecarbon_energy_kwh"][i, b] += ram_kwh - bl["codecarbon_ram_energy_kwh"][i, b]
    bl["codecarbon_ram_energy_kwh"][i, b] = ram_kwh
    bl["codecarbon_energy_j"][i, b] = bl["codecarbon_energy_kwh"][i, b] * J_PER_KWH
    c.refresh_emissions([i])
    return {"run_id": c.run_id(i), "epoch": epoch, "phase": "eval",
            "factor": DRIFTED_WINDOW_FACTOR, "_runs": [i], "_blocks": [(i, b - 1), (i, b)]}


@_defect("broken-identity", "report")
def broken_identity(c, rng) -> dict:
    """A few blocks (5) whose CodeCarbon emissions were computed with a carbon intensity 1.3
    times their location's (emissions rate alike): emissions = energy x intensity breaks."""
    kept = np.flatnonzero(c.keep.ravel())
    chosen = np.sort(rng.choice(kept, size=min(BROKEN_IDENTITY_BLOCKS, len(kept)), replace=False))
    blocks = [divmod(int(j), c.n_blocks_per_run) for j in chosen]
    for i, b in blocks:
        for column in ("codecarbon_emissions_kg", "codecarbon_emissions_rate_kg_per_s"):
            c.blocks[column][i, b] *= BROKEN_INTENSITY_FACTOR
    return {"factor": BROKEN_INTENSITY_FACTOR, "blocks": [c.block_key(i, b) for i, b in blocks],
            "_blocks": blocks}


def apply_defects(c, names: list[str], stage: str, entries: dict) -> None:
    """Apply the defects of `stage` among `names`, in registry order."""
    for name, fn in DEFECTS.items():
        if name in names and fn.stage == stage:
            rng = np.random.default_rng([c.seed, DEFECT_STREAM, zlib.crc32(name.encode())])
            entry = fn(c, rng)
            entries[name] = {"description": _describe(fn), "stage": stage, **entry}
