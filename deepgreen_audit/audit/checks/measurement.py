"""S5 measurement: both readings, the counters, CodeCarbon's version, mode and methods,
units, plausible power, and blocks the instruments can resolve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pyarrow as pa

from deepgreen_audit.audit import figures
from deepgreen_audit.audit.context import AuditContext
from deepgreen_audit.audit.derived import device_powers, power_bounds
from deepgreen_audit.audit.rows import CodeCarbonColumns
from deepgreen_audit.columnar.evidence import (
    describe_counts,
    evidence,
    per_run_evidence,
    relative_difference,
    rows_by_run,
    run_block_energy_j,
)
from deepgreen_audit.columnar.frame import (
    Frame,
    Groups,
    counts,
    isin,
    joined,
    largest,
    median,
    missing,
    mode,
    nunique,
    smallest,
)
from deepgreen_audit.package import compute
from deepgreen_audit.safe import number_text
from deepgreen_audit.spec import Counter, boundary_counters, declared_device
from deepgreen_audit.suite.registry import NotApplicable, Outcome, Skip, check
from deepgreen_audit.units import J_PER_KWH

COUNTER_COLUMNS = ("nvml_start_mj", "nvml_end_mj", "rapl_start_uj", "rapl_end_uj",
                   "rapl_max_energy_range_uj", "rapl_wraps")
RAPL_COLUMNS = ("rapl_start_uj", "rapl_end_uj", "rapl_max_energy_range_uj", "rapl_wraps")


def counters_not_measured(blocks: Frame) -> str | None:
    """The reason the collection recorded when no block carries counter energy and every one
    says why (blocks.energy_missing_reason: a host without counters, allowed and declared);
    None otherwise.  A check of the counter readings does not apply to such a package."""
    if "energy_missing_reason" not in blocks or len(blocks) == 0:
        return None
    if not np.isnan(blocks["energy_j"]).all() or blocks.missing("energy_missing_reason").any():
        return None
    return f"no counter energy was measured: {blocks['energy_missing_reason'][0]}"


def skip_without_counters(blocks: Frame, why: str) -> NoReturn:
    """Raise NotApplicable when the collection declared its counters missing, else Skip(why)."""
    declared = counters_not_measured(blocks)
    if declared:
        raise NotApplicable(declared)
    raise Skip(why)


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


def counter_cells(cells: pa.Array | pa.ChunkedArray) -> CounterCells:
    """Parse a column of counter cells (an arrow text column, `Frame.arrow`: validation has
    checked each is `[0-9]+(;[0-9]+)*`)."""
    if pa.types.is_dictionary(cells.type):
        cells = compute.cast(cells, pa.string())
    lists = compute.split_pattern(cells, ";")
    counts = np.asarray(compute.fill_null(compute.list_value_length(lists), 0), dtype=np.int64)
    readings = compute.list_flatten(lists)
    try:
        values = np.asarray(compute.cast(readings, pa.int64()))
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


def rapl_readings(b: Frame) -> RaplReadings:
    start, end, ranges, wraps = (counter_cells(b.arrow(c)) for c in RAPL_COLUMNS)
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


def boundary(ctx: CodeCarbonColumns) -> tuple[Counter, ...]:
    """The counters whose energies make up energy_j in the package: those of the device it
    declares (its scope's, else the specification's: S5_measurement.boundary)."""
    return boundary_counters(declared_device(ctx.spec), ctx.spec)


def boundary_sum(ctx: CodeCarbonColumns) -> str:
    """'gpu_energy_j + cpu_energy_j' (cuda) or 'cpu_energy_j' (cpu)."""
    return " + ".join(c.column for c in boundary(ctx))


def _is_false(values: np.ndarray) -> np.ndarray:
    """Where a boolean column (object: True, False, None) records False; None is not False."""
    return np.fromiter((v is False for v in values), dtype=bool, count=len(values))


def unreadable_counters(ctx: AuditContext, b: Frame) -> dict[str, np.ndarray]:
    """{counter label: where the block's run records that counter of the boundary unreadable
    (environment nvml_energy_available / rapl_available false) and says why
    (counters_missing_reason)}: what a collection allowed to miss counters declares.  A run
    that records neither (the first campaign) or records the counter readable declares
    nothing.  `b` is ctx.block_runs or a selection of its rows."""
    explained = ~missing(b["counters_missing_reason"])
    return {c.label: _is_false(b[c.available]) & explained for c in boundary(ctx)}


def recorded_reason(reasons: np.ndarray) -> str:
    """The commonest of the recorded reasons, naming how many others there are."""
    found = counts(reasons[~missing(reasons)])
    if not found:
        return "no reason recorded"
    return found[0][0] + (f" (and {len(found) - 1} other reason(s))" if len(found) > 1 else "")


@check("S5.both-readings", "S5", table="blocks")
def both_readings(ctx: AuditContext) -> Outcome:
    """Every block carries both energy readings: the hardware counters at the measurement
    boundary of the device the campaign declares (energy_j) and CodeCarbon
    (codecarbon_energy_j). A block without counter energy is a warning, with the recorded
    reason, where its collection declared the counter missing: its run's environment records a
    counter of the boundary unreadable (nvml_energy_available or rapl_available false) with
    counters_missing_reason, and the block says why (energy_missing_reason), as a collection
    allowed to miss counters (--allow-missing-counters) writes it. It fails where nothing
    declares it: no reason, availability not recorded, or every counter of the boundary
    recorded readable."""
    b = ctx.block_runs
    no_counter = np.isnan(b["energy_j"])
    no_cc = np.isnan(b["codecarbon_energy_j"])
    unreadable = unreadable_counters(ctx, b)
    declared = no_counter & ~b.missing("energy_missing_reason") & np.logical_or.reduce(list(unreadable.values()))
    bad = (no_counter & ~declared) | no_cc
    gap, reason = "", ""
    if declared.any():
        labels = [label for label, where in unreadable.items() if (where & declared).any()]
        gap = (f"energy at the measurement boundary ({boundary_sum(ctx)}) was not measured in "
               f"{int(declared.sum()):,} block(s) of {nunique(b['run_id'][declared])} run(s): their "
               f"collection declared the {' and '.join(labels)} unreadable")
        reason = f"; recorded reason: {recorded_reason(b['counters_missing_reason'][declared])}"
    if bad.any():
        undeclared = no_counter & ~declared
        reasons = [r for r in b["energy_missing_reason"][undeclared] if r is not None]
        why = f" (reason given: {reasons[0]})" if reasons else " (no reason given)"
        return Outcome.failed(f"{int(undeclared.sum()):,} block(s) lack the counter reading where "
                              "their run records no counter of the boundary unreadable"
                              f"{why if undeclared.any() else ''}, {int(no_cc.sum()):,} lack CodeCarbon's"
                              + (f"; besides, {gap}{reason}" if gap else ""), rows=int(bad.sum()),
                              details=per_run_evidence(ctx, b.take(bad)), unrecorded=int(bad.sum()))
    if gap:
        return Outcome.allowed_gap(f"{gap}, and every block carries CodeCarbon's reading{reason}",
                                   rows=int(declared.sum()), unrecorded=int(declared.sum()),
                                   details=per_run_evidence(ctx, b.take(declared),
                                                            {"counters_missing_reason": "first"}))
    return Outcome.passed(f"all {len(b):,} blocks carry both readings")


@check("S5.counter-recompute", "S5", table="blocks", figure=figures.INSTRUMENTS)
def counter_recompute(ctx: AuditContext) -> Outcome:
    """gpu_energy_j and cpu_energy_j equal the differences of the raw NVML (mJ) and RAPL (uJ)
    readings recomputed here: per RAPL domain end - start + wraps x max_energy_range_uj, with
    the wraps the harness counted (rapl_wraps), or where none were recorded the fewest the
    readings allow (one where the counter went down; S5.rapl-wraps says whether that could
    be too few)."""
    b = ctx.blocks
    gpu = b["gpu_energy_j"]
    cpu = b["cpu_energy_j"]
    has_energy = ~np.isnan(gpu) | ~np.isnan(cpu)
    raw = ~np.logical_and.reduce([b.missing(c) for c in COUNTER_COLUMNS])
    if not (raw | has_energy).any():
        skip_without_counters(ctx.blocks, "no block has counter readings to recompute")
    tol = float(ctx.tolerances.counter_relative_tolerance)
    gpu_again, cpu_again = np.full(len(b), np.nan), np.full(len(b), np.nan)

    nv0, nv1 = counter_cells(b.arrow("nvml_start_mj")), counter_cells(b.arrow("nvml_end_mj"))
    gpu_judged = (nv0.counts > 0) | (nv1.counts > 0) | ~np.isnan(gpu)
    paired = np.flatnonzero(gpu_judged & (nv0.counts > 0) & (nv0.counts == nv1.counts)
                            & ~np.isnan(gpu))
    drawn_mj = nv1.of(paired) - nv0.of(paired)
    went_down = _per_block((drawn_mj < 0).astype(np.int64), nv0.counts[paired]) > 0
    gpu_again[paired[~went_down]] = _per_block(drawn_mj / 1000, nv0.counts[paired])[~went_down]
    incomplete = gpu_judged & np.isnan(gpu_again)

    rapl = rapl_readings(b)
    rapl_present = ~np.logical_and.reduce([b.missing(c) for c in RAPL_COLUMNS])
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
    max_power_w = float(ctx.tolerances.rapl_max_package_power_w)
    duration_s = b["duration_s"]
    rapl = rapl_readings(b)
    if not rapl.any_complete:
        skip_without_counters(ctx.blocks, "no block has complete RAPL readings")
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
        rows = [{"run_id": b["run_id"][i], "epoch": int(b["epoch"][i]),
                 "phase": b["phase"][i], "duration_s": float(duration_s[i]), "problem": why}
                for i, why in found]
        missing = sum(why.startswith("no wraps") for _, why in found)
        return Outcome.failed(f"{missing:,} block(s) without recorded RAPL wraps whose counters "
                              f"could have wrapped once more unobserved (at {max_power_w:g} W per "
                              f"package), {len(found) - missing:,} whose recorded wraps contradict "
                              "their readings", rows=len(found), details=evidence(Frame.from_records(rows)))
    uncounted_short = int((~recorded & ~unobserved).sum())
    return Outcome.passed(f"{int(recorded.sum()):,} blocks with RAPL wraps recorded and consistent "
                          "with their readings" + (f", {uncounted_short:,} without recorded wraps "
                                                   "but too short to wrap unobserved at "
                                                   f"{max_power_w:g} W per package"
                                                   if uncounted_short else ""))


@check("S5.energy-domains", "S5", table="blocks")
def energy_domains(ctx: CodeCarbonColumns) -> Outcome:
    """Energy equals the sum of its domains: energy_j is the sum of the energies of the
    boundary of the device the campaign declares (S5_measurement.boundary: gpu_energy_j +
    cpu_energy_j on cuda, cpu_energy_j on cpu, where a GPU's energy is recorded beside it and
    never added), and CodeCarbon's energy_consumed (kWh) = its CPU + GPU + RAM energies."""
    b = ctx.blocks
    tol = float(ctx.tolerances.counter_relative_tolerance)
    total = b["energy_j"]
    domains = [b[c.column] for c in boundary(ctx)]
    parts = np.zeros(len(b))
    for energy_j in domains:
        parts = parts + np.where(np.isnan(energy_j), 0.0, energy_j)
    known_total = ~np.isnan(total)
    counter_bad = known_total & (relative_difference(total, parts) > tol)
    counter_bad |= known_total & np.logical_and.reduce([np.isnan(d) for d in domains])
    cc = b["codecarbon_energy_kwh"]
    cc_parts = [b[c] for c in ("codecarbon_cpu_energy_kwh", "codecarbon_gpu_energy_kwh",
                               "codecarbon_ram_energy_kwh")]
    cc_known = ~np.isnan(cc) & ~np.logical_or.reduce([np.isnan(p) for p in cc_parts])
    cc_tol = float(ctx.tolerances.codecarbon_domain_sum_relative_tolerance)
    cc_bad = cc_known & (relative_difference(cc, cc_parts[0] + cc_parts[1] + cc_parts[2]) > cc_tol)
    w = ctx.words
    if not (known_total.any() or cc_known.any()):
        raise Skip(f"no {w.row} has an energy total with its domains")
    bad = counter_bad | cc_bad
    counters = (f"{int(counter_bad.sum()):,} {w.row}(s) whose energy_j is not "
                f"{boundary_sum(ctx)} (the {declared_device(ctx.spec)} boundary), "
                if w.has_counters else "")
    if bad.any():
        return Outcome.failed(counters + (f"{int(cc_bad.sum()):,} whose" if w.has_counters else
                                          f"{int(cc_bad.sum()):,} {w.row}(s) whose")
                              + " CodeCarbon total is not the sum of its domains", rows=int(bad.sum()))
    return Outcome.passed((f"{int(known_total.sum()):,} counter totals and " if w.has_counters else "")
                          + f"{int(cc_known.sum()):,} CodeCarbon totals equal their domains' sum"
                          + (f" (energy_j = {boundary_sum(ctx)}: the {declared_device(ctx.spec)} boundary)"
                             if known_total.any() else ""))


@check("S5.units", "S5", table="blocks")
def units(ctx: AuditContext) -> Outcome:
    """Energy in kWh under a joule label, found from magnitudes: a *_j column whose implied
    power (energy / duration) is below a plausible floor, or codecarbon_energy_j that is not
    codecarbon_energy_kwh x J/kWh."""
    b = ctx.blocks
    floor = float(ctx.tolerances.kwh_suspect_power_w)
    conversion_tol = float(ctx.tolerances.kwh_conversion_relative_tolerance)
    bad = np.zeros(len(b), dtype=bool)
    found = []
    for col, dur in (("energy_j", "duration_s"), ("gpu_energy_j", "duration_s"),
                     ("cpu_energy_j", "duration_s"), ("codecarbon_energy_j", "codecarbon_duration_s")):
        with np.errstate(divide="ignore", invalid="ignore"):
            power = b[col] / b[dur]
        low = (b[col] > 0) & (b[dur] > 0) & (power < floor)
        if low.any():
            found.append(f"{col} implies under {floor} W in {int(low.sum()):,}")
        bad |= low
    known = ~np.isnan(b["codecarbon_energy_j"]) & ~np.isnan(b["codecarbon_energy_kwh"])
    conv = known & (relative_difference(b["codecarbon_energy_j"],
                                        b["codecarbon_energy_kwh"] * J_PER_KWH) > conversion_tol)
    if conv.any():
        found.append(f"codecarbon_energy_j != codecarbon_energy_kwh x {J_PER_KWH:g} J/kWh in "
                     f"{int(conv.sum()):,}")
    bad |= conv
    if not ((~np.isnan(b["energy_j"])).any() or known.any()):
        raise Skip("no energy cells to check")
    if bad.any():
        return Outcome.failed("energy in the wrong unit: " + "; ".join(found), rows=int(bad.sum()))
    return Outcome.passed("every joule column has joule magnitudes and CodeCarbon's kWh x "
                          f"{J_PER_KWH:g} J/kWh equals its joules")


@check("S5.power-plausible", "S5", table="blocks", figure=figures.POWER_PLAUSIBLE)
def power_plausible(ctx: AuditContext) -> Outcome:
    """The power of each recorded device is plausible, both the block mean derived from
    energy / duration (counters and CodeCarbon) and the power CodeCarbon reported: a GPU
    between gpu_power_min_w and its board limit (x gpu_power_limit_factor), the CPU packages
    and the RAM within their [audit] ranges."""
    t = ctx.tolerances
    b = ctx.block_runs
    bad = np.zeros(len(b), dtype=bool)
    found, checked = [], 0
    for name, (power, lo, hi, low, high) in power_bounds(ctx).items():
        checked += int(np.isfinite(power).sum())
        for label, mask in (("below", low), ("above", high)):
            if mask.any():
                bound = f"{lo} W" if label == "below" else (
                    f"{hi!s} W" if np.isscalar(hi) else
                    f"its board limit x{float(t.gpu_power_limit_factor)}")
                found.append(f"{name} {label} {bound} in {int(mask.sum()):,} ("
                             + describe_counts(b["ecosystem"][mask])
                             + f"; {power[mask].min():.3g}-{power[mask].max():.3g} W)")
        bad |= low | high
    if not checked:
        skip_without_counters(ctx.blocks, "no block has an energy and a duration to derive power from")
    if bad.any():
        powers = device_powers(ctx)
        return Outcome.failed("implausible power: " + "; ".join(found), rows=int(bad.sum()),
                              details=per_run_evidence(ctx, b.assign(**powers).take(bad),
                                                       dict.fromkeys(powers, "median")))
    return Outcome.passed(f"{checked:,} derived device powers within their plausible ranges")


@check("S5.codecarbon-agreement", "S5", table="blocks", figure=figures.INSTRUMENTS)
def codecarbon_agreement(ctx: AuditContext) -> Outcome:
    """CodeCarbon's energy agrees with the counters' within codecarbon_agreement_tolerance,
    block by block, over the domains the counters measured: CPU + GPU, or the GPU alone in a
    block whose CPU counter is missing (a GPU-board boundary, e.g. no RAPL on the host), or the
    CPU alone in a block whose GPU counter is missing (a cpu campaign's boundary, no GPU)."""
    b = ctx.blocks
    cc_gpu = b["codecarbon_gpu_energy_kwh"] * J_PER_KWH
    cc_cpu = b["codecarbon_cpu_energy_kwh"] * J_PER_KWH
    cc_both = cc_cpu + cc_gpu
    counter_both = b["gpu_energy_j"] + b["cpu_energy_j"]
    on_both = ~np.isnan(cc_both) & (counter_both > 0)
    on_gpu = ~on_both & np.isnan(b["cpu_energy_j"]) & ~np.isnan(cc_gpu) & (b["gpu_energy_j"] > 0)
    on_cpu = ~on_both & np.isnan(b["gpu_energy_j"]) & ~np.isnan(cc_cpu) & (b["cpu_energy_j"] > 0)
    compared = on_both | on_gpu | on_cpu
    if not compared.any():
        skip_without_counters(ctx.blocks, "no block carries both readings to compare")
    cc = np.select([on_both, on_gpu], [cc_both, cc_gpu], cc_cpu)
    counter = np.select([on_both, on_gpu], [counter_both, b["gpu_energy_j"]], b["cpu_energy_j"])
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = ((cc - counter) / counter)[compared]
    tol = float(ctx.tolerances.codecarbon_agreement_tolerance)
    bad = np.abs(rel) > tol
    domains = ", ".join(f"{int(n):,} on {what}" for n, what in
                        ((on_both.sum(), "CPU + GPU"), (on_gpu.sum(), "the GPU alone (no CPU counter)"),
                         (on_cpu.sum(), "the CPU alone (no GPU counter)")) if n)
    summary = (f"{domains}; median {median(rel):+.1%}, range {smallest(rel):+.1%} to "
               f"{largest(rel):+.1%}")
    if bad.any():
        return Outcome.failed(f"{int(bad.sum()):,} block(s) where CodeCarbon and the counters "
                              f"differ by more than {tol:.0%} ({summary})", rows=int(bad.sum()))
    return Outcome.passed(f"{int(compared.sum()):,} blocks agree within {tol:.0%} ({summary})")


@check("S5.codecarbon-duration", "S5", table="blocks", figure=figures.INSTRUMENTS)
def codecarbon_duration(ctx: AuditContext) -> Outcome:
    """CodeCarbon's tracker spans the counter window: the harness nests it inside the window
    (counters read, tracker started ... tracker stopped, counters read), so its duration may
    fall short of duration_s by the time of the counter reads, at most
    codecarbon_nested_shortfall_max_s, and outlive it by at most codecarbon_overhang_max_s."""
    b = ctx.blocks
    counted = ~np.isnan(b["gpu_energy_j"]) | ~np.isnan(b["cpu_energy_j"])
    both = ~np.isnan(b["codecarbon_duration_s"]) & counted
    if not both.any():
        skip_without_counters(ctx.blocks, "no block has both a counter window and a CodeCarbon duration")
    over = (b["codecarbon_duration_s"] - b["duration_s"])[both]
    shortfall_max = float(ctx.tolerances.codecarbon_nested_shortfall_max_s)
    limit = float(ctx.tolerances.codecarbon_overhang_max_s)
    short, long_ = over < -shortfall_max, over > limit
    if short.any() or long_.any():
        return Outcome.failed(f"{int(short.sum()):,} block(s) where CodeCarbon's tracker falls "
                              f"short of the counter window by over {shortfall_max} s, "
                              f"{int(long_.sum()):,} where it outlives it by over {limit} s",
                              rows=int((short | long_).sum()))
    return Outcome.passed(f"{int(both.sum()):,} trackers span their window "
                          f"(CodeCarbon minus window {smallest(over):+.3f} to {largest(over):+.3f} s)")


def _mode_share(values: np.ndarray, rel: float) -> float:
    """The largest share of values within `rel` of one of them."""
    v = values[np.isfinite(values)]
    if not len(v):
        return 0.0
    scale = np.maximum(np.abs(v[None, :]), np.finfo(float).tiny)    # a zero is near only zeros
    near = np.abs(v[:, None] - v[None, :]) <= rel * scale
    return float(near.sum(axis=0).max() / len(v))


@check("S5.modelled-cpu-power", "S5", table="blocks", figure=figures.CODECARBON_POWER)
def modelled_cpu_power(ctx: AuditContext) -> Outcome:
    """CodeCarbon's CPU power was modelled rather than measured: declared (method
    tdp-constant or load-model) or detected from the data: a run whose CPU power is one
    constant (a TDP fallback), or sits on one value (to constant_power_relative_spread) in
    most blocks (a load model: measured RAPL power never repeats like that), or reads exactly
    0 W. A warning, with the recorded reason, in a run whose environment records RAPL
    unreadable (rapl_available false, with counters_missing_reason): on a host without RAPL
    CodeCarbon can only model the CPU, and the collection declared it; a failure where the run
    records RAPL readable, or does not record it, or where the model claims method rapl."""
    b = ctx.block_runs
    power = b["codecarbon_cpu_power_w"]
    if np.isnan(power).all():
        with np.errstate(divide="ignore", invalid="ignore"):
            power = b["codecarbon_cpu_energy_kwh"] * J_PER_KWH / b["codecarbon_duration_s"]
    if np.isnan(power).all():
        raise Skip("no block has a CodeCarbon CPU power")
    t = ctx.tolerances
    spread_tol = float(t.constant_power_relative_spread)
    mode_share = float(t.load_model_mode_share)
    methods = b["codecarbon_cpu_method"]
    declared = isin(methods, ("tdp-constant", "load-model"))
    kinds = np.full(len(b), None, dtype=object)
    for rows in rows_by_run(b):
        values = power[rows]
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
    detected = ~missing(kinds)
    modelled = detected | declared
    if not modelled.any():
        return Outcome.passed(f"CPU power varies as a measurement in all {nunique(b['run_id']):,} "
                              "runs, and no block declares a modelled method")
    label = kinds.copy()
    label[~detected] = [f"declared {m}" for m in methods[~detected]]
    hidden = detected & isin(methods, ("rapl",))
    no_rapl = modelled & ~hidden & _is_false(b["rapl_available"]) & ~missing(b["counters_missing_reason"])
    bad = modelled & ~no_rapl
    labelled = b.assign(cpu_power_model=label)

    def evidence_of(rows: np.ndarray) -> dict:
        return per_run_evidence(ctx, labelled.take(rows), {
            "codecarbon_cpu_power_w": "median", "cpu_power_model": "first",
            "counters_missing_reason": "first"})

    gap = ""
    if no_rapl.any():
        gap = (f"CodeCarbon's CPU power is a model, not a measurement, in {int(no_rapl.sum()):,} "
               f"block(s) of {nunique(b['run_id'][no_rapl])} run(s), because their host had no "
               f"readable RAPL counter, as their collection declared: {_models(b, label, no_rapl)}; "
               f"recorded reason: {recorded_reason(b['counters_missing_reason'][no_rapl])}")
    if not bad.any():
        return Outcome.allowed_gap(gap, rows=int(no_rapl.sum()), details=evidence_of(no_rapl))
    return Outcome.failed(f"modelled CPU power in {int(bad.sum()):,} block(s) of "
                          f"{nunique(b['run_id'][bad])} run(s) whose host records RAPL readable "
                          f"or does not record it: {_models(b, label, bad)}"
                          + (f"; {int(hidden.sum()):,} of them claim method rapl" if hidden.any() else "")
                          + (f"; besides, {gap}" if gap else ""),
                          rows=int(bad.sum()), details=evidence_of(bad))


def _models(b: Frame, label: np.ndarray, rows: np.ndarray) -> str:
    """'python-pytorch: declared load-model (8 blocks), ...' for the blocks at `rows`."""
    by = counts(joined(b["ecosystem"][rows], ": ", label[rows]))
    return ", ".join(f"{k} ({v:,} blocks)" for k, v in by)


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
    majors = [_major(v) if isinstance(v, str) else None for v in versions]
    too_old = np.fromiter((m is not None and m < minimum for m in majors), dtype=bool,
                          count=len(majors))
    unrecorded = missing(versions)
    modal, odd = _campaign_value(versions, ~unrecorded & ~too_old)
    bad = too_old | unrecorded | odd
    if bad.any():
        named = np.where(unrecorded, "none", versions)
        return Outcome.failed(f"CodeCarbon versions {describe_counts(named)}"
                              f" across runs: {int(too_old.sum())} run(s) below {minimum}.x, "
                              f"{int(unrecorded.sum())} unrecorded, {int(odd.sum())} on another {minimum}.x+ "
                              "version than the campaign's", rows=int(bad.sum()),
                              details=evidence(env.select(["run_id", "codecarbon_version"]).take(bad)))
    return Outcome.passed(f"all {len(env):,} runs used CodeCarbon {modal}")


@check("S5.codecarbon-config", "S5", table="environment")
def codecarbon_config(ctx: AuditContext) -> Outcome:
    """Every run used one pinned CodeCarbon configuration file (one config hash)."""
    env = ctx.environment
    if env.empty:
        raise Skip("no runs")
    config = env["codecarbon_config_sha256"]
    unrecorded = missing(config)
    modal, odd = _campaign_value(config, ~unrecorded)
    bad = unrecorded | odd
    if bad.any():
        return Outcome.failed(f"{int(unrecorded.sum())} run(s) record no configuration hash, "
                              f"{int(odd.sum())} used another configuration than the "
                              "campaign's", rows=int(bad.sum()),
                              details=evidence(env.select(["run_id", "codecarbon_config_sha256"]).take(bad)),
                              unrecorded=int(unrecorded.sum()))
    return Outcome.passed(f"all {len(env):,} runs used configuration {modal[:12]}...")


def _campaign_value(values: np.ndarray, eligible: np.ndarray):
    """The campaign's value (the commonest among the `eligible` runs) and where an eligible
    run differs from it."""
    modal = mode(values[eligible])
    if modal is None:
        return None, eligible & False
    return modal, eligible & (values != modal)


@check("S5.tracking-mode", "S5", table="environment")
def tracking_mode(ctx: AuditContext) -> Outcome:
    """Every run tracked CodeCarbon in the specified mode (machine)."""
    env = ctx.environment
    wanted = ctx.spec["S5_measurement"]["codecarbon_tracking_mode"]
    tracked = env["codecarbon_tracking_mode"]
    bad = tracked != wanted
    if bad.any():
        eco = ctx.of_runs("ecosystem", env["run_id"][bad])
        modes = np.where(missing(tracked[bad]), "unrecorded", tracked[bad])
        return Outcome.failed(f"{int(bad.sum())} run(s) not in {wanted} mode ("
                              + describe_counts(joined(eco, ": ", modes)) + ")",
                              rows=int(bad.sum()),
                              details=evidence(env.select(["run_id", "codecarbon_tracking_mode"]).take(bad)))
    return Outcome.passed(f"all {len(env):,} runs tracked in {wanted} mode")


@check("S5.gpu-count", "S5", table="environment")
def gpu_count(ctx: AuditContext) -> Outcome:
    """CodeCarbon tracked as many GPUs as NVML counts for the run (environment gpu_count):
    CodeCarbon's GPU energy covers only the GPUs it found, so a different count makes its
    reading cover another boundary than the counters'.  Runs that record only one of the two
    counts are not compared; skipped when no run records both."""
    env = ctx.environment
    cc, nvml = env["codecarbon_gpu_count"], env["gpu_count"]
    both = ~np.isnan(cc) & ~np.isnan(nvml)
    if not both.any():
        if np.isnan(nvml).all():
            raise NotApplicable("NVML counted no GPU in any run (no GPU was read on this host)")
        raise Skip("no run records both CodeCarbon's and NVML's GPU count")
    differs = both & (cc != nvml)
    one = int(((~np.isnan(cc) | ~np.isnan(nvml)) & ~both).sum())
    unpaired = f"; {one} run(s) record only one of the two counts (not compared)" if one else ""
    if differs.any():
        eco = ctx.of_runs("ecosystem", env["run_id"][differs])
        pairs = joined(eco, ": CodeCarbon ", [str(int(n)) for n in cc[differs]],
                        " vs NVML ", [str(int(n)) for n in nvml[differs]])
        return Outcome.failed(f"{int(differs.sum())} run(s) where CodeCarbon tracked another number "
                              f"of GPUs than NVML counts ({describe_counts(pairs)}){unpaired}",
                              rows=int(differs.sum()), details=evidence(
                                  env.select(["run_id", "gpu_count", "codecarbon_gpu_count"]).take(differs)))
    return Outcome.passed(f"CodeCarbon tracked NVML's GPU count in all {int(both.sum()):,} runs "
                          f"that record both{unpaired}")


@check("S5.short-blocks", "S5", table="blocks")
def short_blocks(ctx: AuditContext) -> Outcome:
    """Blocks shorter than CodeCarbon's sampling interval: their CodeCarbon energy rests on
    at most one power reading.  A failure on the design's datasets; on the smoke dataset
    (S3_data.smoke_dataset: digits' whole evaluation split is 360 images, a tenth of a second
    on a CPU) it is what such a scope measures, so a warning that says so."""
    b = ctx.block_runs
    interval = float(ctx.spec["S5_measurement"]["codecarbon_interval_s"])
    duration_s = b["duration_s"]
    short = duration_s < interval
    if not short.any():
        return Outcome.passed(f"every block lasts at least {interval} s "
                              f"(shortest {smallest(duration_s):.3f} s)")
    smoke = short & (b["dataset"] == ctx.spec["S3_data"]["smoke_dataset"])
    found = (f"{int(short.sum()):,} block(s) shorter than {interval} s ("
             + describe_counts(joined(b["ecosystem"][short], "/", b["phase"][short]))
             + f"; shortest {duration_s[short].min():.3f} s)")
    details = evidence(b.select(["run_id", "epoch", "phase", "duration_s"]).take(short))
    if not (short & ~smoke).any():
        return Outcome.allowed_gap(
            found + f": all of them on the smoke dataset {ctx.spec['S3_data']['smoke_dataset']}, "
            "whose splits are too small for a block to last one CodeCarbon interval, so "
            "CodeCarbon's reading of each rests on at most one power sample (the counters' is "
            "unaffected); a smoke scope checks the pipeline, not the energy of short blocks",
            rows=int(short.sum()), details=details)
    return Outcome.failed(found, rows=int(short.sum()), details=details)


@check("S5.sampler", "S5", table="runs")
def sampler(ctx: AuditContext) -> Outcome:
    """Every run has its 1 Hz samples, spaced at the specified sampler rate, over its span."""
    rate = float(ctx.spec["S5_measurement"]["sampler_rate_hz"])
    s = ctx.samples
    runs = ctx.runs
    samples_of, steps = _steps_by_run(s["run_id"], s["t_s"])
    without = ~isin(runs["run_id"], samples_of)
    jitter = float(ctx.tolerances.sampler_step_tolerance_fraction)
    off = np.abs(steps - 1 / rate) > jitter / rate
    irregular = set(s["run_id"][off])
    bad = without | isin(runs["run_id"], irregular)
    if bad.any():
        flagged = runs.select(["run_id", "ecosystem"]).take(bad)
        return Outcome.failed(f"{int(without.sum())} run(s) without samples, {len(irregular)} "
                              f"with samples not at {rate} Hz", rows=int(bad.sum()),
                              details=evidence(flagged.assign(samples=np.array(
                                  [int(samples_of.get(r, 0)) for r in flagged["run_id"]], dtype=np.int64))),
                              unrecorded=int(without.sum()))
    return Outcome.passed(f"{len(s):,} samples at {rate} Hz in all {len(runs):,} runs")


def _steps_by_run(run_ids: np.ndarray, t_s: np.ndarray) -> tuple[dict, np.ndarray]:
    """Each run's number of samples, and each sample's step from its run's previous one (NaN
    at a run's first).  Validation proved the samples in primary-key order (run_id, t_s), so a
    run's samples are one stretch of rows, found by comparing neighbours: a tenth of a second
    for 14 M samples, where grouping them sorts 14 M ids for seconds."""
    n = len(run_ids)
    starts = np.flatnonzero(np.concatenate([[n > 0], run_ids[1:] != run_ids[:-1]]))
    previous = np.full(n, np.nan)
    previous[1:] = t_s[:-1]
    previous[starts] = np.nan
    return dict(zip(run_ids[starts], np.diff(np.append(starts, n)))), t_s - previous


def _identity_outcome(ctx: CodeCarbonColumns, found: list[dict], checked: int, what: str,
                      extra: str = "") -> Outcome:
    """One identity's outcome: its breaking blocks grouped by ecosystem and CodeCarbon version
    (the likeliest cause), with the figures in the evidence."""
    if not found:
        return Outcome.passed(f"{checked:,} readings: {what} holds{extra}")
    # a block can break the identity in more than one domain: each is a row of the evidence
    frame = Frame.from_records(found)
    frame = frame.sort(frame["relative_difference"], descending=True)
    first, seen = np.zeros(len(frame), dtype=bool), set()
    for row, block in enumerate(zip(frame["run_id"], frame["epoch"], frame["phase"])):
        first[row] = block not in seen
        seen.add(block)
    unique = frame.take(first)
    blocks = len(unique)
    versions = np.where(missing(unique["codecarbon_version"]), "?", unique["codecarbon_version"])
    return Outcome.failed(
        f"{blocks:,} {ctx.words.row}(s) in {nunique(frame['run_id'])} run(s) break {what} "
        f"({checked:,} {ctx.words.checked} checked; "
        + describe_counts(joined(unique["ecosystem"], " on CodeCarbon ", versions))
        + f"; median off {_share_off(median(frame['relative_difference']))}, up to "
          f"{_share_off(largest(frame['relative_difference']))}){extra}",
        rows=blocks, details=evidence(frame))


@check("S5.carbon-intensity", "S5", table="blocks")
def carbon_intensity(ctx: CodeCarbonColumns) -> Outcome:
    """CodeCarbon's emissions are its energy times one carbon intensity per location (country,
    region): each block's emissions / energy within carbon_intensity_relative_tolerance of its
    location's median. The message lists each location's intensity (S6.constancy says whether
    the location itself stayed fixed)."""
    b = ctx.block_runs
    kwh = b["codecarbon_energy_kwh"]
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(kwh > 0, b["codecarbon_emissions_kg"] / kwh, np.nan)
    located = ~np.isnan(intensity)
    if not located.any():
        raise Skip(f"no {ctx.words.row} records CodeCarbon's emissions and energy")
    place = np.array([f"{'?' if country is None else country}/{region or ''}".rstrip("/")
                      for country, region in zip(b["codecarbon_country_iso_code"][located],
                                                 b["codecarbon_region"][located])], dtype=object)
    by_place = Groups(place)
    place_median = by_place.median(intensity[located])
    expected = np.full(len(b), np.nan)  # each block's location's median
    expected[located] = by_place.spread(place_median)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs((intensity - expected) / expected)
    tol = float(ctx.tolerances.carbon_intensity_relative_tolerance)
    found = [_identity_row(b, i, intensity[i], expected[i], "kg/kWh")
             for i in np.flatnonzero(located & (rel > tol))]
    listed = "; intensity " + ", ".join(f"{p} {m:.4g} kg/kWh ({int(n):,} {ctx.words.rows})"
                                        for p, m, n in zip(by_place.keys[0], place_median, by_place.size))
    return _identity_outcome(ctx, found, int(located.sum()), "emissions = energy x intensity", listed)


@check("S5.emissions-rate", "S5", table="blocks")
def emissions_rate(ctx: CodeCarbonColumns) -> Outcome:
    """CodeCarbon's emissions_rate is its emissions over its duration, within
    emissions_rate_relative_tolerance or, in seconds of the window the rate implies
    (emissions / rate), power_duration_window_slack_s, whichever is larger: a task's rate
    (CodeCarbon 2.5 and later) divides by the span between its two energy readings, while its
    duration is read from another clock call a few milliseconds later."""
    b = ctx.block_runs
    rate = b["codecarbon_emissions_rate_kg_per_s"]
    duration_s = b["codecarbon_duration_s"]
    tol = float(ctx.tolerances.emissions_rate_relative_tolerance)
    slack_s = float(ctx.tolerances.power_duration_window_slack_s)
    # over: emissions over a duration of 1e-300 s is inf; S5.cc-magnitudes says why such a
    # row is impossible, and here it is no expected rate (NaN below), so nothing to warn about
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        expected = np.where(duration_s > 0, b["codecarbon_emissions_kg"] / duration_s, np.nan)
        has = ~np.isnan(rate) & (expected > 0)
        rel = np.abs((rate - expected) / expected)
        window_gap_s = np.abs(b["codecarbon_emissions_kg"] / rate - duration_s)
    if not has.any():
        raise Skip(f"no {ctx.words.row} records CodeCarbon's emissions and their rate")
    off = has & (rel > tol) & ~(window_gap_s <= slack_s)
    found = [_identity_row(b, i, rate[i], expected[i], "kg/s") for i in np.flatnonzero(off)]
    return _identity_outcome(ctx, found, int(has.sum()), "emissions_rate = emissions / duration")


@check("S5.power-duration", "S5", table="blocks", figure=figures.POWER_DURATION)
def power_duration(ctx: AuditContext) -> Outcome:
    """Where CodeCarbon reports one constant power for a domain over a whole run (a modelled
    power), the domain's energy is that power times its duration, within
    power_duration_relative_tolerance or the power times power_duration_window_slack_s
    (CodeCarbon closes its energy window and reads its duration at moments a few milliseconds
    apart), whichever is larger: where it is not, CodeCarbon integrated its energy over
    another window than the duration it reports."""
    b = ctx.block_runs
    constant_rel = float(ctx.tolerances.constant_power_relative_spread)
    tol = float(ctx.tolerances.power_duration_relative_tolerance)
    slack_s = float(ctx.tolerances.power_duration_window_slack_s)
    by_run = Groups(b["run_id"])
    duration_s = b["codecarbon_duration_s"]
    found, checked, domains = [], 0, []
    for domain in ("cpu", "gpu", "ram"):
        power = b[f"codecarbon_{domain}_power_w"]
        energy_j = b[f"codecarbon_{domain}_energy_kwh"] * J_PER_KWH
        mean = by_run.mean(power)
        with np.errstate(invalid="ignore"):
            constant_run = (by_run.max(power) - by_run.min(power) <= constant_rel * np.abs(mean)) & (mean > 0)
        # a row in no run (index -1) is in no constant run
        constant = np.append(constant_run, False)[by_run.codes] & ~np.isnan(energy_j) & ~np.isnan(duration_s)
        if not constant.any():
            continue
        checked += int(constant.sum())
        domains.append(f"{domain} {int(constant.sum()):,}")
        expected = power * duration_s
        allowed = np.maximum(tol * np.abs(expected), np.abs(power) * slack_s)
        with np.errstate(invalid="ignore"):
            off = np.abs(energy_j - expected) > allowed
        found += [{**_identity_row(b, i, energy_j[i], expected[i], "J"), "domain": domain}
                  for i in np.flatnonzero(constant & off)]
    if not checked:
        raise NotApplicable("no run reports a constant CodeCarbon power for any domain")
    return _identity_outcome(ctx, found, checked, "energy = constant power x duration",
                             f"; blocks of constant power: {', '.join(domains)}")


def _share_off(relative: float) -> str:
    """A relative difference as a percentage; one from an expected value of 0 (infinite) is
    said as such, never "inf%"."""
    return number_text(relative, ".1%", "an expected value of 0")


def _identity_row(b: Frame, i, found: float, expected: float, unit: str) -> dict:
    return {"run_id": b["run_id"][i], "ecosystem": b["ecosystem"][i],
            "epoch": int(b["epoch"][i]), "phase": b["phase"][i],
            "codecarbon_version": b["codecarbon_version"][i], "found": float(found),
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
    consumed = runs["slurm_consumed_energy_j"]
    unexplained = np.isnan(consumed) & runs.missing("slurm_energy_missing_reason")
    measured = ~np.isnan(consumed)
    if not measured.any() and not unexplained.any():
        raise NotApplicable("no run carries Slurm's ConsumedEnergy, and each says why ("
                   + describe_counts(runs["slurm_energy_missing_reason"], limit=2) + ")")
    blocks = ctx.blocks
    summed_of = run_block_energy_j(blocks["run_id"], blocks["energy_j"])
    summed = np.array([summed_of.get(r, np.nan) for r in runs["run_id"][measured]], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = consumed[measured] / summed
    minimum = float(ctx.tolerances.slurm_energy_min_ratio)
    below = int((ratio < minimum).sum())
    unmatched = int(np.isnan(ratio).sum())
    if below or unexplained.any():
        return Outcome.failed(f"{below} run(s) where Slurm's energy is below {minimum:g} x the summed "
                              f"block energy (lowest ratio {np.nanmin(ratio):.3f}), "
                              f"{int(unexplained.sum())} empty without a reason"
                              if measured.any() else f"{int(unexplained.sum())} run(s) with Slurm's energy "
                              "empty without a reason", rows=below + int(unexplained.sum()))
    return Outcome.passed(f"{int(measured.sum()) - unmatched} run(s): Slurm's energy is "
                          f"{np.nanmin(ratio):.3f}-{np.nanmax(ratio):.3f} x the summed block energy"
                          + (f"; {unmatched} run(s) without complete block energy to compare" if unmatched else ""))
