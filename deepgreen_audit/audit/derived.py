"""What a check and its figure on the page both compute from the audit's context, in one place:
each device's block-mean power and its plausible range (S5.power-plausible), and each
configuration's time per sample and GPU power (S1.architecture-identity)."""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit.context import CONFIG_COLUMNS
from deepgreen_audit.columnar.frame import Frame, Groups, lookup
from deepgreen_audit.units import J_PER_KWH


def device_powers(ctx) -> dict[str, np.ndarray]:
    """Block-mean power of each recorded device, from the counters and from CodeCarbon
    (float arrays over the rows of ctx.block_runs, NaN where unknown)."""
    b = ctx.block_runs
    gpus = np.where(b["gpu_count"] > 0, b["gpu_count"], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "GPU (counter)": b["gpu_energy_j"] / b["duration_s"] / gpus,
            "CPU (counter)": b["cpu_energy_j"] / b["duration_s"],
            "GPU (CodeCarbon)": b["codecarbon_gpu_energy_kwh"] * J_PER_KWH
                                / b["codecarbon_duration_s"] / gpus,
            "CPU (CodeCarbon)": b["codecarbon_cpu_energy_kwh"] * J_PER_KWH / b["codecarbon_duration_s"],
            "RAM (CodeCarbon)": b["codecarbon_ram_energy_kwh"] * J_PER_KWH / b["codecarbon_duration_s"],
            "GPU (CodeCarbon's reported power)": b["codecarbon_gpu_power_w"] / gpus,
            "CPU (CodeCarbon's reported power)": b["codecarbon_cpu_power_w"].copy(),
            "RAM (CodeCarbon's reported power)": b["codecarbon_ram_power_w"].copy(),
        }


def power_bounds(ctx) -> dict[str, tuple[np.ndarray, float, float | np.ndarray, np.ndarray, np.ndarray]]:
    """Each recorded device power (`device_powers`) with its plausible range and where it
    falls outside: {domain: (power, low bound, high bound, below, above)}; the GPU's high bound
    is per block (its board's limit x gpu_power_limit_factor).  One source for
    S5.power-plausible and the page's figure of it."""
    t = ctx.tolerances
    b = ctx.block_runs
    models = b["gpu_model"]
    limit_of = {m: max((t.gpu_board_power_limit_w.get(x.strip(), np.nan) for x in m.split(";")),
                       default=np.nan) for m in set(models) - {None}}  # each model once
    limits = np.fromiter((np.nan if m is None else limit_of[m] for m in models), dtype=float,
                         count=len(models))
    gpu_max = limits * float(t.gpu_power_limit_factor)
    ranges = {"GPU": (float(t.gpu_power_min_w), gpu_max),
              "CPU": tuple(t.cpu_power_range_w), "RAM": tuple(t.ram_power_range_w)}
    out = {}
    for name, power in device_powers(ctx).items():
        lo, hi = ranges[name.split()[0]]
        known = np.isfinite(power)
        out[name] = (power, lo, hi, known & (power < lo), known & (power > hi))
    return out


def config_profiles(ctx) -> Frame:
    """Per configuration, the median log train time per sample and log GPU power.

    Training blocks after the first epoch (warm-up) are used.  Time per sample
    uses samples_processed, or the dataset's S3 train size when the source
    recorded none; GPU power the counter energy, or CodeCarbon's when there are
    no counters.  One row per configuration, in key order; NaN where a figure is
    undefined (the callers drop what they need).
    """
    b = ctx.block_runs
    train = b["phase"] == "train"
    after_warmup = train & (b["epoch"] >= 2)
    rows = np.flatnonzero(after_warmup if after_warmup.any() else train)

    def column(name: str) -> np.ndarray:
        return b[name][rows]

    sizes = lookup(column("dataset"), ctx.spec["S3_data"].get("train_samples", {}))
    recorded = column("samples_processed")
    samples = np.where(np.isnan(recorded), sizes, recorded)
    gpu_count = column("gpu_count")
    gpus = np.where(gpu_count > 0, gpu_count, np.nan)
    duration = column("duration_s")
    with np.errstate(divide="ignore", invalid="ignore"):
        counter_w = column("gpu_energy_j") / duration / gpus
        cc_w = column("codecarbon_gpu_energy_kwh") * J_PER_KWH / column("codecarbon_duration_s") / gpus
        figures = {"time": np.log(duration / samples),
                   "power": np.log(np.where(np.isnan(counter_w), cc_w, counter_w))}
    # a block's configuration is its run's: the runs are grouped by their labels and the
    # blocks by their run's group, as sorting the blocks' labels would cost ten times more
    runs = ctx.runs
    configs = Groups(*(runs[c] for c in CONFIG_COLUMNS))
    config_of_run = dict(zip(runs["run_id"], np.where(configs.codes >= 0, configs.codes, np.nan)))
    in_config = Groups(np.fromiter((config_of_run.get(r, np.nan) for r in column("run_id")),
                                   dtype=float, count=len(rows)))
    present = in_config.keys[0].astype(np.intp)
    columns = {name: labels[present] for name, labels in zip(CONFIG_COLUMNS, configs.keys)}
    for name, values in figures.items():
        columns[name] = in_config.median(np.where(np.isinf(values), np.nan, values))
    return Frame.of(columns)
