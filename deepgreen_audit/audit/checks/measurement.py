"""S5 measurement: both readings, the counters, CodeCarbon's version, mode and methods,
units, plausible power, and blocks the instruments can resolve."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from deepgreen_audit.audit.context import (
    AuditContext,
    describe_counts,
    evidence,
    per_run_evidence,
    relative_difference,
    rows_by_run,
    run_block_energy_j,
)
from deepgreen_audit.registry import Outcome, Skip, check
from deepgreen_audit.units import J_PER_KWH

COUNTER_COLUMNS = ("nvml_start_mj", "nvml_end_mj", "rapl_start_uj", "rapl_end_uj",
                   "rapl_max_energy_range_uj", "rapl_wraps")
RAPL_COLUMNS = ("rapl_start_uj", "rapl_end_uj", "rapl_max_energy_range_uj", "rapl_wraps")


@dataclass(frozen=True)
class CounterCells:
    """A counter column of the blocks table, parsed: each block's readings (one a domain, as
    written: `a;b;...`) one after another in `values`, exact (int64, or Python integers where
    a reading does not fit in 64 bits), block i's in values[offsets[i]:offsets[i + 1]]."""

    values: np.ndarray
    offsets: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        """Readings per block; 0 where the cell is empty."""
        return np.diff(self.offsets)

    def of(self, blocks: np.ndarray) -> np.ndarray:
        """The readings of `blocks` (indices), one block's after another's."""
        counts = self.counts[blocks]
        firsts = np.repeat(self.offsets[blocks] - np.cumsum(counts) + counts, counts)
        return self.values[firsts + np.arange(int(counts.sum()))]


def counter_cells(cells: pd.Series) -> CounterCells:
    """Parse a column of counter cells (validation has checked each is `[0-9]+(;[0-9]+)*`)."""
    lists = pc.split_pattern(pa.array(cells, type=pa.string()), ";")
    counts = np.asarray(pc.fill_null(pc.list_value_length(lists), 0), dtype=np.int64)
    readings = pc.list_flatten(lists)
    try:
        values = np.asarray(pc.cast(readings, pa.int64()))
    except pa.ArrowInvalid:  # a reading past 2^63: exact Python integers instead
        values = np.array([int(text) for text in readings.to_pylist()], dtype=object)
    return CounterCells(values, np.concatenate([[0], np.cumsum(counts)]))


def _per_block(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The sum over each block's readings (`counts` of them), added in order from 0 as Python's
    `sum` adds them, domain after domain (np.add.reduceat groups them otherwise, which can
    change the last bit)."""
    firsts = np.cumsum(counts) - counts
    total = np.zeros(len(counts), dtype=values.dtype)
    for domain in range(int(counts.max(initial=0))):
        has = counts > domain
        total[has] = total[has] + values[firsts[has] + domain]
    return total


@dataclass(frozen=True)
class RaplReadings:
    """The RAPL readings of the blocks whose readings are complete (start, end and range, each
    with as many domains, and recorded wraps with as many or none): their indices, and per
    domain of those blocks (block after block) the readings and the wraps counted, or where
    none were recorded the fewest the readings allow (one where the counter went down)."""

    blocks: np.ndarray
    counts: np.ndarray
    start: np.ndarray
    end: np.ndarray
    range: np.ndarray
    wraps: np.ndarray
    recorded: np.ndarray   # per domain: its block recorded its wraps

    @property
    def any_complete(self) -> bool:
        return len(self.blocks) > 0

    def per_block_any(self, flags: np.ndarray) -> np.ndarray:
        """Per complete block: whether `flags` holds for any of its domains."""
        return _per_block(flags.astype(np.int64), self.counts) > 0


def rapl_readings(b: pd.DataFrame) -> RaplReadings:
    start, end, ranges, wraps = (counter_cells(b[c]) for c in RAPL_COLUMNS)
    n = start.counts
    complete = (n > 0) & (end.counts == n) & (ranges.counts == n) & \
        ((wraps.counts == 0) | (wraps.counts == n))
    blocks = np.flatnonzero(complete)
    counts = n[blocks]
    s, e, r = start.of(blocks), end.of(blocks), ranges.of(blocks)
    recorded = np.repeat(wraps.counts[blocks] > 0, counts)
    fewest = (e < s).astype(np.int64)
    w = fewest.astype(s.dtype)
    w[recorded] = wraps.of(blocks[wraps.counts[blocks] > 0])
    return RaplReadings(blocks, counts, s, e, r, w, recorded)


@check("S5.both-readings", "S5", table="blocks")
def both_readings(ctx: AuditContext) -> Outcome:
    """Every block carries both energy readings: the hardware counters (energy_j) and
    CodeCarbon (codecarbon_energy_j)."""
    b = ctx.blocks
    no_counter = b["energy_j"].isna()
    no_cc = b["codecarbon_energy_j"].isna()
    bad = no_counter | no_cc
    if bad.any():
        reasons = b.loc[no_counter, "energy_missing_reason"].dropna()
        why = f" (reason given: {reasons.iloc[0]})" if len(reasons) else " (no reason given)"
        return Outcome.failed(f"{int(no_counter.sum()):,} block(s) lack the counter reading"
                              f"{why if no_counter.any() else ''}, {int(no_cc.sum()):,} lack "
                              "CodeCarbon's", rows=int(bad.sum()),
                              details=per_run_evidence(ctx, b.loc[bad]), unrecorded=int(bad.sum()))
    return Outcome.passed(f"all {len(b):,} blocks carry both readings")


@check("S5.counter-recompute", "S5", table="blocks")
def counter_recompute(ctx: AuditContext) -> Outcome:
    """gpu_energy_j and cpu_energy_j equal the differences of the raw NVML (mJ) and RAPL (uJ)
    readings recomputed here: per RAPL domain end - start + wraps x max_energy_range_uj, with
    the wraps the harness counted (rapl_wraps), or where none were recorded the fewest the
    readings allow (one where the counter went down; S5.rapl-wraps says whether that could
    be too few)."""
    b = ctx.blocks
    has_energy = b["gpu_energy_j"].notna() | b["cpu_energy_j"].notna()
    raw = b[list(COUNTER_COLUMNS)].notna().any(axis=1)
    if not (raw | has_energy).any():
        raise Skip("no block has counter readings to recompute")
    tol = float(ctx.tolerances["counter_relative_tolerance"])
    gpu = b["gpu_energy_j"].to_numpy(dtype=float, na_value=np.nan)
    cpu = b["cpu_energy_j"].to_numpy(dtype=float, na_value=np.nan)
    gpu_again, cpu_again = np.full(len(b), np.nan), np.full(len(b), np.nan)

    nv0, nv1 = counter_cells(b["nvml_start_mj"]), counter_cells(b["nvml_end_mj"])
    gpu_judged = (nv0.counts > 0) | (nv1.counts > 0) | ~np.isnan(gpu)
    paired = np.flatnonzero(gpu_judged & (nv0.counts > 0) & (nv0.counts == nv1.counts)
                            & ~np.isnan(gpu))
    drawn_mj = nv1.of(paired) - nv0.of(paired)
    went_down = _per_block((drawn_mj < 0).astype(np.int64), nv0.counts[paired]) > 0
    gpu_again[paired[~went_down]] = _per_block(drawn_mj / 1000, nv0.counts[paired])[~went_down]
    incomplete = gpu_judged & np.isnan(gpu_again)

    rapl = rapl_readings(b)
    rapl_present = b[list(RAPL_COLUMNS)].notna().any(axis=1).to_numpy()
    cpu_judged = rapl_present | ~np.isnan(cpu)
    counted = ~np.isnan(cpu[rapl.blocks])
    drawn_uj = (rapl.end - rapl.start + rapl.wraps * rapl.range) / 1e6
    cpu_again[rapl.blocks[counted]] = _per_block(drawn_uj, rapl.counts)[counted]
    incomplete |= cpu_judged & np.isnan(cpu_again)
    domains_counted = np.repeat(counted, rapl.counts)
    recorded = int(rapl.wraps[domains_counted & rapl.recorded].sum())
    inferred = int(rapl.wraps[domains_counted & ~rapl.recorded].sum())
    with np.errstate(invalid="ignore"):
        differs = (relative_difference(gpu_again, gpu) > tol) | (relative_difference(cpu_again, cpu) > tol)
    bad = incomplete | differs
    n = int(bad.sum())
    if n:
        return Outcome.failed(f"{n:,} block(s) whose energy differs from their raw counter "
                              "readings (or whose readings are incomplete)", rows=n)
    return Outcome.passed(f"{int(has_energy.sum()):,} blocks recomputed from raw readings "
                          f"({recorded} RAPL wrap(s) recorded, {inferred} inferred where none "
                          "were recorded)")


@check("S5.rapl-wraps", "S5", table="blocks")
def rapl_wraps(ctx: AuditContext) -> Outcome:
    """RAPL wraps are counted, not assumed. A block's recorded wraps (rapl_wraps, counted by
    reading the counters at least once a second) must agree with its readings: a domain whose
    counter went down (end < start) wrapped at least once. A block with readings but no
    recorded wraps is resolved with the fewest wraps its readings allow; it fails when one
    more wrap could have gone unobserved: when that energy plus one whole
    max_energy_range_uj is at most duration_s x rapl_max_package_power_w in some domain.
    An error, not a warning: a missed wrap understates a block's CPU energy by a whole range
    (~262 kJ), more than most blocks draw, and nothing in the package can tell."""
    b = ctx.blocks
    max_power_w = float(ctx.tolerances["rapl_max_package_power_w"])
    duration_s = b["duration_s"].to_numpy(dtype=float, na_value=np.nan)
    rapl = rapl_readings(b)
    if not rapl.any_complete:
        raise Skip("no block has complete RAPL readings")
    recorded = rapl.per_block_any(rapl.recorded)
    contradicted = recorded & rapl.per_block_any((rapl.end < rapl.start) & (rapl.wraps == 0))
    most_uj = np.repeat(duration_s[rapl.blocks] * max_power_w * 1e6, rapl.counts)
    one_more_fits = rapl.end - rapl.start + rapl.wraps * rapl.range + rapl.range <= most_uj
    unobserved = ~recorded & rapl.per_block_any(one_more_fits)
    found = sorted([(int(i), "the counter went down in a domain with 0 wraps recorded")
                    for i in rapl.blocks[contradicted]]
                   + [(int(i), f"no wraps recorded and long enough for one more at {max_power_w:g} W")
                      for i in rapl.blocks[unobserved]])
    if found:
        rows = [{"run_id": b["run_id"].iloc[i], "epoch": int(b["epoch"].iloc[i]),
                 "phase": b["phase"].iloc[i], "duration_s": float(duration_s[i]), "problem": why}
                for i, why in found]
        missing = sum(why.startswith("no wraps") for _, why in found)
        return Outcome.failed(f"{missing:,} block(s) without recorded RAPL wraps whose counters "
                              f"could have wrapped once more unobserved (at {max_power_w:g} W per "
                              f"package), {len(found) - missing:,} whose recorded wraps contradict "
                              "their readings", rows=len(found), details=evidence(pd.DataFrame(rows)))
    uncounted_short = int((~recorded & ~unobserved).sum())
    return Outcome.passed(f"{int(recorded.sum()):,} blocks with RAPL wraps recorded and consistent "
                          "with their readings" + (f", {uncounted_short:,} without recorded wraps "
                                                   "but too short to wrap unobserved at "
                                                   f"{max_power_w:g} W per package"
                                                   if uncounted_short else ""))


@check("S5.energy-domains", "S5", table="blocks")
def energy_domains(ctx: AuditContext) -> Outcome:
    """Energy equals the sum of its domains: energy_j = gpu_energy_j + cpu_energy_j, and
    CodeCarbon's energy_consumed (kWh) = its CPU + GPU + RAM energies."""
    b = ctx.blocks
    tol = float(ctx.tolerances["counter_relative_tolerance"])
    total = b["energy_j"]
    parts = b["gpu_energy_j"].fillna(0) + b["cpu_energy_j"].fillna(0)
    counter_bad = total.notna() & (relative_difference(total, parts) > tol)
    counter_bad |= total.notna() & b["gpu_energy_j"].isna() & b["cpu_energy_j"].isna()
    cc = b["codecarbon_energy_kwh"]
    cc_parts = b[["codecarbon_cpu_energy_kwh", "codecarbon_gpu_energy_kwh",
                  "codecarbon_ram_energy_kwh"]]
    cc_known = cc.notna() & cc_parts.notna().all(axis=1)
    cc_tol = float(ctx.tolerances["codecarbon_domain_sum_relative_tolerance"])
    cc_bad = cc_known & (relative_difference(cc, cc_parts.sum(axis=1)) > cc_tol)
    if not (total.notna().any() or cc_known.any()):
        raise Skip("no block has an energy total with its domains")
    bad = counter_bad | cc_bad
    if bad.any():
        return Outcome.failed(f"{int(counter_bad.sum()):,} block(s) whose energy_j is not "
                              f"gpu + cpu, {int(cc_bad.sum()):,} whose CodeCarbon total is not "
                              "the sum of its domains", rows=int(bad.sum()))
    return Outcome.passed(f"{int(total.notna().sum()):,} counter totals and "
                          f"{int(cc_known.sum()):,} CodeCarbon totals equal their domains' sum")


@check("S5.units", "S5", table="blocks")
def units(ctx: AuditContext) -> Outcome:
    """Energy in kWh under a joule label, found from magnitudes: a *_j column whose implied
    power (energy / duration) is below a plausible floor, or codecarbon_energy_j that is not
    codecarbon_energy_kwh x J/kWh."""
    b = ctx.blocks
    floor = float(ctx.tolerances["kwh_suspect_power_w"])
    conversion_tol = float(ctx.tolerances["kwh_conversion_relative_tolerance"])
    bad = pd.Series(False, index=b.index)
    found = []
    for col, dur in (("energy_j", "duration_s"), ("gpu_energy_j", "duration_s"),
                     ("cpu_energy_j", "duration_s"), ("codecarbon_energy_j", "codecarbon_duration_s")):
        with np.errstate(divide="ignore", invalid="ignore"):
            power = b[col] / b[dur]
        low = b[col].notna() & (b[col] > 0) & (b[dur] > 0) & (power < floor)
        if low.any():
            found.append(f"{col} implies under {floor} W in {int(low.sum()):,}")
        bad |= low
    known = b["codecarbon_energy_j"].notna() & b["codecarbon_energy_kwh"].notna()
    conv = known & (relative_difference(b["codecarbon_energy_j"],
                                        b["codecarbon_energy_kwh"] * J_PER_KWH) > conversion_tol)
    if conv.any():
        found.append(f"codecarbon_energy_j != codecarbon_energy_kwh x {J_PER_KWH:g} J/kWh in "
                     f"{int(conv.sum()):,}")
    bad |= conv
    if not (b["energy_j"].notna().any() or known.any()):
        raise Skip("no energy cells to check")
    if bad.any():
        return Outcome.failed("energy in the wrong unit: " + "; ".join(found), rows=int(bad.sum()))
    return Outcome.passed("every joule column has joule magnitudes and CodeCarbon's kWh x "
                          f"{J_PER_KWH:g} J/kWh equals its joules")


def device_powers(ctx) -> dict[str, pd.Series]:
    """Block-mean power of each recorded device, from the counters and from CodeCarbon."""
    b = ctx.block_runs
    gpus = b["gpu_count"].astype("Float64").where(b["gpu_count"].astype("Float64") > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "GPU (counter)": (b["gpu_energy_j"] / b["duration_s"] / gpus).astype(float),
            "CPU (counter)": (b["cpu_energy_j"] / b["duration_s"]).astype(float),
            "GPU (CodeCarbon)": (b["codecarbon_gpu_energy_kwh"] * J_PER_KWH
                                 / b["codecarbon_duration_s"] / gpus).astype(float),
            "CPU (CodeCarbon)": (b["codecarbon_cpu_energy_kwh"] * J_PER_KWH
                                 / b["codecarbon_duration_s"]).astype(float),
            "RAM (CodeCarbon)": (b["codecarbon_ram_energy_kwh"] * J_PER_KWH
                                 / b["codecarbon_duration_s"]).astype(float),
            "GPU (CodeCarbon's reported power)": (b["codecarbon_gpu_power_w"] / gpus).astype(float),
            "CPU (CodeCarbon's reported power)": b["codecarbon_cpu_power_w"].astype(float),
            "RAM (CodeCarbon's reported power)": b["codecarbon_ram_power_w"].astype(float),
        }


def power_bounds(ctx) -> dict[str, tuple[pd.Series, float, pd.Series | float, pd.Series, pd.Series]]:
    """Each recorded device power (`device_powers`) with its plausible range and where it
    falls outside: {domain: (power, low bound, high bound, below, above)}; the GPU's high bound
    is per block (its board's limit x gpu_power_limit_factor).  One source for
    S5.power-plausible and the page's figure of it."""
    t = ctx.tolerances
    b = ctx.block_runs
    models = b["gpu_model"]
    limit_of = {m: max((t["gpu_board_power_limit_w"].get(x.strip(), np.nan) for x in m.split(";")),
                       default=np.nan) for m in models.dropna().unique()}  # each model once
    limits = models.map(limit_of)
    gpu_max = limits.astype(float) * float(t["gpu_power_limit_factor"])
    ranges = {"GPU": (float(t["gpu_power_min_w"]), gpu_max),
              "CPU": tuple(t["cpu_power_range_w"]), "RAM": tuple(t["ram_power_range_w"])}
    out = {}
    for name, power in device_powers(ctx).items():
        lo, hi = ranges[name.split()[0]]
        known = power.notna() & np.isfinite(power)
        out[name] = (power, lo, hi, known & (power < lo), known & (power > hi))
    return out


@check("S5.power-plausible", "S5", table="blocks")
def power_plausible(ctx: AuditContext) -> Outcome:
    """The power of each recorded device is plausible, both the block mean derived from
    energy / duration (counters and CodeCarbon) and the power CodeCarbon reported: a GPU
    between gpu_power_min_w and its board limit (x gpu_power_limit_factor), the CPU packages
    and the RAM within their [audit] ranges."""
    t = ctx.tolerances
    b = ctx.block_runs
    bad = pd.Series(False, index=b.index)
    found, checked = [], 0
    for name, (power, lo, hi, low, high) in power_bounds(ctx).items():
        checked += int((power.notna() & np.isfinite(power)).sum())
        for label, mask in (("below", low), ("above", high)):
            if mask.any():
                bound = f"{lo} W" if label == "below" else (
                    f"{hi!s} W" if np.isscalar(hi) else
                    f"its board limit x{float(t['gpu_power_limit_factor'])}")
                found.append(f"{name} {label} {bound} in {int(mask.sum()):,} ("
                             + describe_counts(b.loc[mask, "ecosystem"])
                             + f"; {power[mask].min():.3g}-{power[mask].max():.3g} W)")
        bad |= low | high
    if not checked:
        raise Skip("no block has an energy and a duration to derive power from")
    if bad.any():
        powers = pd.DataFrame(device_powers(ctx))
        return Outcome.failed("implausible power: " + "; ".join(found), rows=int(bad.sum()),
                              details=per_run_evidence(ctx, b.loc[bad].join(powers.loc[bad]),
                                                       dict.fromkeys(powers, "median")))
    return Outcome.passed(f"{checked:,} derived device powers within their plausible ranges")


@check("S5.codecarbon-agreement", "S5", table="blocks")
def codecarbon_agreement(ctx: AuditContext) -> Outcome:
    """CodeCarbon's energy agrees with the counters' within codecarbon_agreement_tolerance,
    block by block, over the domains the counters measured: CPU + GPU, or the GPU alone in a
    block whose CPU counter is missing (a GPU-board boundary, e.g. no RAPL on the host)."""
    b = ctx.blocks
    cc_gpu = b["codecarbon_gpu_energy_kwh"] * J_PER_KWH
    cc_both = (b["codecarbon_cpu_energy_kwh"] + b["codecarbon_gpu_energy_kwh"]) * J_PER_KWH
    counter_both = b["gpu_energy_j"] + b["cpu_energy_j"]
    on_both = cc_both.notna() & counter_both.notna() & (counter_both > 0)
    on_gpu = ~on_both & b["cpu_energy_j"].isna() & cc_gpu.notna() & (b["gpu_energy_j"] > 0)
    if not (on_both | on_gpu).any():
        raise Skip("no block carries both readings to compare")
    cc = cc_both.where(on_both, cc_gpu)
    counter = counter_both.where(on_both, b["gpu_energy_j"])
    compared = on_both | on_gpu
    rel = ((cc - counter) / counter)[compared].astype(float)
    tol = float(ctx.tolerances["codecarbon_agreement_tolerance"])
    bad = rel.abs() > tol
    domains = ", ".join(f"{int(n):,} on {what}" for n, what in
                        ((on_both.sum(), "CPU + GPU"), (on_gpu.sum(), "the GPU alone (no CPU counter)")) if n)
    summary = f"{domains}; median {rel.median():+.1%}, range {rel.min():+.1%} to {rel.max():+.1%}"
    if bad.any():
        return Outcome.failed(f"{int(bad.sum()):,} block(s) where CodeCarbon and the counters "
                              f"differ by more than {tol:.0%} ({summary})", rows=int(bad.sum()))
    return Outcome.passed(f"{int(compared.sum()):,} blocks agree within {tol:.0%} ({summary})")


@check("S5.codecarbon-duration", "S5", table="blocks")
def codecarbon_duration(ctx: AuditContext) -> Outcome:
    """CodeCarbon's tracker spans the counter window: the harness nests it inside the window
    (counters read, tracker started ... tracker stopped, counters read), so its duration may
    fall short of duration_s by the time of the counter reads, at most
    codecarbon_nested_shortfall_max_s, and outlive it by at most codecarbon_overhang_max_s."""
    b = ctx.blocks
    counted = b["gpu_energy_j"].notna() | b["cpu_energy_j"].notna()
    both = b["codecarbon_duration_s"].notna() & counted
    if not both.any():
        raise Skip("no block has both a counter window and a CodeCarbon duration")
    over = (b["codecarbon_duration_s"] - b["duration_s"])[both]
    shortfall_max = float(ctx.tolerances["codecarbon_nested_shortfall_max_s"])
    limit = float(ctx.tolerances["codecarbon_overhang_max_s"])
    short, long_ = over < -shortfall_max, over > limit
    if short.any() or long_.any():
        return Outcome.failed(f"{int(short.sum()):,} block(s) where CodeCarbon's tracker falls "
                              f"short of the counter window by over {shortfall_max} s, "
                              f"{int(long_.sum()):,} where it outlives it by over {limit} s",
                              rows=int((short | long_).sum()))
    return Outcome.passed(f"{int(both.sum()):,} trackers span their window "
                          f"(CodeCarbon minus window {over.min():+.3f} to {over.max():+.3f} s)")


def _mode_share(values: np.ndarray, rel: float) -> float:
    """The largest share of values within `rel` of one of them."""
    v = values[np.isfinite(values)]
    if not len(v):
        return 0.0
    scale = np.maximum(np.abs(v[None, :]), np.finfo(float).tiny)    # a zero is near only zeros
    near = np.abs(v[:, None] - v[None, :]) <= rel * scale
    return float(near.sum(axis=0).max() / len(v))


@check("S5.modelled-cpu-power", "S5", table="blocks")
def modelled_cpu_power(ctx: AuditContext) -> Outcome:
    """CodeCarbon's CPU power was modelled rather than measured: declared (method
    tdp-constant or load-model) or detected from the data: a run whose CPU power is one
    constant (a TDP fallback), or sits on one value (to constant_power_relative_spread) in
    most blocks (a load model: measured RAPL power never repeats like that), or reads exactly
    0 W."""
    b = ctx.block_runs
    power = b["codecarbon_cpu_power_w"].astype(float)
    if power.isna().all():
        derived = b["codecarbon_cpu_energy_kwh"] * J_PER_KWH / b["codecarbon_duration_s"]
        power = derived.astype(float)
    if power.isna().all():
        raise Skip("no block has a CodeCarbon CPU power")
    t = ctx.tolerances
    spread_tol = float(t["constant_power_relative_spread"])
    mode_share = float(t["load_model_mode_share"])
    declared = b["codecarbon_cpu_method"].isin(["tdp-constant", "load-model"])
    kinds = np.full(len(b), None, dtype=object)
    all_values = power.to_numpy(dtype=float, na_value=np.nan)
    for rows in rows_by_run(b):
        values = all_values[rows]
        values = values[np.isfinite(values)]
        if not len(values):
            continue
        med = np.median(values)
        if med > 0 and (values.max() - values.min()) <= spread_tol * med:
            kinds[rows] = f"constant {med:.4g} W"
        elif _mode_share(values, spread_tol) >= mode_share:
            kinds[rows] = "one value in most blocks (load model)"
        elif (values == 0).any():
            kinds[rows] = "0 W readings"
    kind = pd.Series(kinds, index=b.index, dtype=object)
    detected = kind.notna()
    bad = detected | declared
    if not bad.any():
        return Outcome.passed(f"CPU power varies as a measurement in all {b['run_id'].nunique():,} "
                              "runs, and no block declares a modelled method")
    label = kind.fillna("declared " + b["codecarbon_cpu_method"].astype(str))
    by = (b.loc[bad, "ecosystem"] + ": " + label[bad]).value_counts()
    text = ", ".join(f"{k} ({v:,} blocks)" for k, v in by.items())
    hidden = detected & b["codecarbon_cpu_method"].eq("rapl")
    return Outcome.failed(f"modelled CPU power in {int(bad.sum()):,} block(s) of "
                          f"{b.loc[bad, 'run_id'].nunique()} run(s): {text}"
                          + (f"; {int(hidden.sum()):,} of them claim method rapl" if hidden.any() else ""),
                          rows=int(bad.sum()), details=per_run_evidence(
                              ctx, b.loc[bad].assign(cpu_power_model=label[bad]),
                              {"codecarbon_cpu_power_w": "median", "cpu_power_model": "first"}))


def _major(version) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return None


@check("S5.codecarbon-version", "S5", table="environment")
def codecarbon_version(ctx: AuditContext) -> Outcome:
    """Every run used one CodeCarbon version, of the specified major version or later
    (2.x falls back to a constant modelled CPU power)."""
    env = ctx.environment
    versions = env["codecarbon_version"]
    minimum = int(ctx.spec["S5_measurement"]["codecarbon_min_major"])
    majors = versions.map(lambda v: _major(v) if isinstance(v, str) else None)
    too_old = majors.notna() & (majors.astype(float) < minimum)
    missing = versions.isna()
    modal, odd = _campaign_value(versions, versions.notna() & ~too_old)
    bad = too_old | missing | odd
    if bad.any():
        return Outcome.failed(f"CodeCarbon versions {describe_counts(versions.fillna('none'))}"
                              f" across runs: {int(too_old.sum())} run(s) below {minimum}.x, "
                              f"{int(missing.sum())} unrecorded, {int(odd.sum())} on another {minimum}.x+ "
                              "version than the campaign's", rows=int(bad.sum()),
                              details=evidence(env.loc[bad, ["run_id", "codecarbon_version"]]))
    return Outcome.passed(f"all {len(env):,} runs used CodeCarbon {modal}")


@check("S5.codecarbon-config", "S5", table="environment")
def codecarbon_config(ctx: AuditContext) -> Outcome:
    """Every run used one pinned CodeCarbon configuration file (one config hash)."""
    env = ctx.environment
    if env.empty:
        raise Skip("no runs")
    config = env["codecarbon_config_sha256"]
    missing = config.isna()
    modal, odd = _campaign_value(config, ~missing)
    bad = missing | odd
    if bad.any():
        return Outcome.failed(f"{int(missing.sum())} run(s) record no configuration hash, "
                              f"{int(odd.sum())} used another configuration than the "
                              "campaign's", rows=int(bad.sum()),
                              details=evidence(env.loc[bad, ["run_id", "codecarbon_config_sha256"]]),
                              unrecorded=int(missing.sum()))
    return Outcome.passed(f"all {len(env):,} runs used configuration {modal[:12]}...")


def _campaign_value(values: pd.Series, eligible: pd.Series):
    """The campaign's value (the commonest among the `eligible` runs) and where an eligible
    run differs from it."""
    modal = values[eligible].mode()
    if not len(modal):
        return None, eligible & False
    return modal.iloc[0], eligible & (values != modal.iloc[0])


@check("S5.tracking-mode", "S5", table="environment")
def tracking_mode(ctx: AuditContext) -> Outcome:
    """Every run tracked CodeCarbon in the specified mode (machine)."""
    env = ctx.environment
    wanted = ctx.spec["S5_measurement"]["codecarbon_tracking_mode"]
    bad = env["codecarbon_tracking_mode"] != wanted
    bad = bad.fillna(True).astype(bool)
    if bad.any():
        eco = ctx.runs.set_index("run_id").loc[env.loc[bad, "run_id"], "ecosystem"]
        return Outcome.failed(f"{int(bad.sum())} run(s) not in {wanted} mode ("
                              + describe_counts(eco.reset_index(drop=True) + ": "
                                                + env.loc[bad, "codecarbon_tracking_mode"]
                                                .fillna("unrecorded").to_numpy()) + ")",
                              rows=int(bad.sum()),
                              details=evidence(env.loc[bad, ["run_id", "codecarbon_tracking_mode"]]))
    return Outcome.passed(f"all {len(env):,} runs tracked in {wanted} mode")


@check("S5.gpu-count", "S5", table="environment")
def gpu_count(ctx: AuditContext) -> Outcome:
    """CodeCarbon tracked as many GPUs as NVML counts for the run (environment gpu_count):
    CodeCarbon's GPU energy covers only the GPUs it found, so a different count makes its
    reading cover another boundary than the counters'.  Runs that record only one of the two
    counts are not compared; skipped when no run records both."""
    env = ctx.environment
    cc, nvml = env["codecarbon_gpu_count"], env["gpu_count"]
    both = (cc.notna() & nvml.notna()).to_numpy()
    if not both.any():
        raise Skip("no run records both CodeCarbon's and NVML's GPU count")
    differs = both & (cc.astype("Float64") != nvml.astype("Float64")).fillna(False).to_numpy()
    one = int(((cc.notna() | nvml.notna()).to_numpy() & ~both).sum())
    unpaired = f"; {one} run(s) record only one of the two counts (not compared)" if one else ""
    if differs.any():
        eco = ctx.runs.set_index("run_id").loc[env.loc[differs, "run_id"], "ecosystem"]
        pairs = (eco.reset_index(drop=True) + ": CodeCarbon " + cc[differs].astype(str).to_numpy()
                 + " vs NVML " + nvml[differs].astype(str).to_numpy())
        return Outcome.failed(f"{int(differs.sum())} run(s) where CodeCarbon tracked another number "
                              f"of GPUs than NVML counts ({describe_counts(pairs)}){unpaired}",
                              rows=int(differs.sum()), details=evidence(
                                  env.loc[differs, ["run_id", "gpu_count", "codecarbon_gpu_count"]]))
    return Outcome.passed(f"CodeCarbon tracked NVML's GPU count in all {int(both.sum()):,} runs "
                          f"that record both{unpaired}")


@check("S5.short-blocks", "S5", table="blocks")
def short_blocks(ctx: AuditContext) -> Outcome:
    """Blocks shorter than CodeCarbon's sampling interval: their CodeCarbon energy rests on
    at most one power reading."""
    b = ctx.block_runs
    interval = float(ctx.spec["S5_measurement"]["codecarbon_interval_s"])
    short = b["duration_s"] < interval
    if short.any():
        return Outcome.failed(f"{int(short.sum()):,} block(s) shorter than {interval} s ("
                              + describe_counts(b.loc[short, "ecosystem"] + "/"
                                                + b.loc[short, "phase"])
                              + f"; shortest {b.loc[short, 'duration_s'].min():.3f} s)",
                              rows=int(short.sum()), details=evidence(
                                  b.loc[short, ["run_id", "epoch", "phase", "duration_s"]]))
    return Outcome.passed(f"every block lasts at least {interval} s "
                          f"(shortest {b['duration_s'].min():.3f} s)")


@check("S5.sampler", "S5", table="runs")
def sampler(ctx: AuditContext) -> Outcome:
    """Every run has its 1 Hz samples, spaced at the specified sampler rate, over its span."""
    rate = float(ctx.spec["S5_measurement"]["sampler_rate_hz"])
    s = ctx.samples
    runs = ctx.runs
    counts = s.groupby("run_id").size()
    without = ~runs["run_id"].isin(counts.index)
    steps = s.groupby("run_id")["t_s"].diff().dropna()
    jitter = float(ctx.tolerances["sampler_step_tolerance_fraction"])
    off = (steps - 1 / rate).abs() > jitter / rate
    irregular = set(s.loc[off[off].index, "run_id"])
    bad = without | runs["run_id"].isin(irregular)
    if bad.any():
        return Outcome.failed(f"{int(without.sum())} run(s) without samples, {len(irregular)} "
                              f"with samples not at {rate} Hz", rows=int(bad.sum()),
                              details=evidence(runs.loc[bad, ["run_id", "ecosystem"]].assign(
                                  samples=runs.loc[bad, "run_id"].map(counts).fillna(0).astype(int))),
                              unrecorded=int(without.sum()))
    return Outcome.passed(f"{len(s):,} samples at {rate} Hz in all {len(runs):,} runs")


def _identity_outcome(ctx, found: list[dict], checked: int, what: str, extra: str = "") -> Outcome:
    """One identity's outcome: its breaking blocks grouped by ecosystem and CodeCarbon version
    (the likeliest cause), with the figures in the evidence."""
    if not found:
        return Outcome.passed(f"{checked:,} readings: {what} holds{extra}")
    # a block can break the identity in more than one domain: each is a row of the evidence
    frame = pd.DataFrame(found).sort_values("relative_difference", ascending=False)
    unique = frame.drop_duplicates(["run_id", "epoch", "phase"])
    blocks = len(unique)
    return Outcome.failed(
        f"{blocks:,} block(s) in {frame['run_id'].nunique()} run(s) break {what} "
        f"({checked:,} readings checked; "
        + describe_counts(unique["ecosystem"] + " on CodeCarbon " + unique["codecarbon_version"].fillna("?"))
        + f"; median off {frame['relative_difference'].median():.1%}, up to "
          f"{frame['relative_difference'].max():.1%}){extra}",
        rows=blocks, details=evidence(frame))


@check("S5.carbon-intensity", "S5", table="blocks")
def carbon_intensity(ctx: AuditContext) -> Outcome:
    """CodeCarbon's emissions are its energy times one carbon intensity per location (country,
    region): each block's emissions / energy within carbon_intensity_relative_tolerance of its
    location's median. The message lists each location's intensity (S6.constancy says whether
    the location itself stayed fixed)."""
    b = ctx.block_runs
    kwh = b["codecarbon_energy_kwh"].astype(float)
    intensity = (b["codecarbon_emissions_kg"].astype(float) / kwh).where(kwh > 0)
    located = intensity.notna()
    if not located.any():
        raise Skip("no block records CodeCarbon's emissions and energy")
    place = (b["codecarbon_country_iso_code"].fillna("?") + "/"
             + b["codecarbon_region"].fillna("")).str.rstrip("/")[located]
    median = intensity[located].groupby(place).transform("median")
    rel = ((intensity[located] - median) / median).abs()
    tol = float(ctx.tolerances["carbon_intensity_relative_tolerance"])
    found = [_identity_row(b, i, intensity[i], median[i], "kg/kWh") for i in rel[rel > tol].index]
    by_place = intensity[located].groupby(place).agg(["median", "size"])
    listed = "; intensity " + ", ".join(f"{p} {r['median']:.4g} kg/kWh ({int(r['size']):,} blocks)"
                                        for p, r in by_place.iterrows())
    return _identity_outcome(ctx, found, int(located.sum()), "emissions = energy x intensity", listed)


@check("S5.emissions-rate", "S5", table="blocks")
def emissions_rate(ctx: AuditContext) -> Outcome:
    """CodeCarbon's emissions_rate is its emissions over its duration, within
    emissions_rate_relative_tolerance."""
    b = ctx.block_runs
    rate = b["codecarbon_emissions_rate_kg_per_s"].astype(float)
    expected = (b["codecarbon_emissions_kg"].astype(float) / b["codecarbon_duration_s"]).where(
        b["codecarbon_duration_s"] > 0)
    has = rate.notna() & expected.notna() & (expected > 0)
    if not has.any():
        raise Skip("no block records CodeCarbon's emissions and their rate")
    rel = ((rate - expected) / expected).abs()[has]
    tol = float(ctx.tolerances["emissions_rate_relative_tolerance"])
    found = [_identity_row(b, i, rate[i], expected[i], "kg/s") for i in rel[rel > tol].index]
    return _identity_outcome(ctx, found, int(has.sum()), "emissions_rate = emissions / duration")


@check("S5.power-duration", "S5", table="blocks")
def power_duration(ctx: AuditContext) -> Outcome:
    """Where CodeCarbon reports one constant power for a domain over a whole run (a modelled
    power), the domain's energy is that power times its duration, within
    power_duration_relative_tolerance: where it is not, CodeCarbon integrated its energy over
    another window than the duration it reports."""
    b = ctx.block_runs
    constant_rel = float(ctx.tolerances["constant_power_relative_spread"])
    tol = float(ctx.tolerances["power_duration_relative_tolerance"])
    found, checked, domains = [], 0, []
    for domain in ("cpu", "gpu", "ram"):
        power = b[f"codecarbon_{domain}_power_w"].astype(float)
        energy_j = b[f"codecarbon_{domain}_energy_kwh"].astype(float) * J_PER_KWH
        stats = power.groupby(b["run_id"]).agg(["min", "max", "mean"])
        constant_runs = stats.index[(stats["max"] - stats["min"] <= constant_rel * stats["mean"].abs())
                                    & (stats["mean"] > 0)]
        constant = b["run_id"].isin(constant_runs) & energy_j.notna() & b["codecarbon_duration_s"].notna()
        if not constant.any():
            continue
        checked += int(constant.sum())
        domains.append(f"{domain} {int(constant.sum()):,}")
        expected = power * b["codecarbon_duration_s"]
        rel = ((energy_j - expected) / expected).abs()[constant]
        found += [{**_identity_row(b, i, energy_j[i], expected[i], "J"), "domain": domain}
                  for i in rel[rel > tol].index]
    if not checked:
        raise Skip("no run reports a constant CodeCarbon power for any domain")
    return _identity_outcome(ctx, found, checked, "energy = constant power x duration",
                             f"; blocks of constant power: {', '.join(domains)}")


def _identity_row(b: pd.DataFrame, i, found: float, expected: float, unit: str) -> dict:
    return {"run_id": b.at[i, "run_id"], "ecosystem": b.at[i, "ecosystem"],
            "epoch": int(b.at[i, "epoch"]), "phase": b.at[i, "phase"],
            "codecarbon_version": b.at[i, "codecarbon_version"], "found": float(found),
            "expected": float(expected), "unit": unit,
            "relative_difference": abs(found - expected) / abs(expected) if expected else float("inf")}

@check("S5.slurm-energy", "S5", table="runs")
def slurm_energy(ctx: AuditContext) -> Outcome:
    """Slurm's whole-run ConsumedEnergy (runs.slurm_consumed_energy_j, a third reading, never
    mixed into the blocks) is at least slurm_energy_min_ratio times the run's summed block
    energy_j: it covers the whole exclusive job, including the time between blocks (start-up,
    imports, data loading, writing the run), so with a plugin that sees at least the GPU boards
    and CPU packages it cannot be smaller; smaller means the plugin covers less than the
    counters (e.g. RAPL only) or a reading is wrong.  An empty cell must say why
    (slurm_energy_missing_reason); skipped when no run carries Slurm's reading."""
    runs = ctx.runs
    unexplained = runs["slurm_consumed_energy_j"].isna() & runs["slurm_energy_missing_reason"].isna()
    measured = runs.dropna(subset=["slurm_consumed_energy_j"])
    if measured.empty and not unexplained.any():
        raise Skip("no run carries Slurm's ConsumedEnergy ("
                   + describe_counts(runs["slurm_energy_missing_reason"], limit=2) + ")")
    summed = run_block_energy_j(ctx.blocks).reindex(measured["run_id"]).to_numpy()
    ratio = measured["slurm_consumed_energy_j"].to_numpy(dtype=float) / summed
    minimum = float(ctx.tolerances["slurm_energy_min_ratio"])
    below = int((ratio < minimum).sum())
    unmatched = int(np.isnan(ratio).sum())
    if below or unexplained.any():
        return Outcome.failed(f"{below} run(s) where Slurm's energy is below {minimum:g} x the summed "
                              f"block energy (lowest ratio {np.nanmin(ratio):.3f}), "
                              f"{int(unexplained.sum())} empty without a reason"
                              if len(measured) else f"{int(unexplained.sum())} run(s) with Slurm's energy "
                              "empty without a reason", rows=below + int(unexplained.sum()))
    return Outcome.passed(f"{len(measured) - unmatched} run(s): Slurm's energy is "
                          f"{np.nanmin(ratio):.3f}-{np.nanmax(ratio):.3f} x the summed block energy"
                          + (f"; {unmatched} run(s) without complete block energy to compare" if unmatched else ""))
