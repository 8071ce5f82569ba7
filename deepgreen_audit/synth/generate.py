"""Draw a synthetic campaign: the four tables, the truth and the descriptor metadata.

The generative model (what every number means and which formula drew it)
is documented in `deepgreen_audit.synth.model`; the planted defects in
`deepgreen_audit.synth.defects`.  This module does the drawing, vectorised
with NumPy: the full campaign (210 runs, 12,600 blocks, ~140,000 samples)
takes a few seconds.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import deepgreen_audit
from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.package.checksums import sha256_bytes
from deepgreen_audit.package.schema import TABLES, load_schema, phases
from deepgreen_audit.package.tables import TextTable, rows_from_columns
from deepgreen_audit.spec import (
    DEVICES,
    SCHEDULES,
    declared_device,
    dl4j_backend,
    load_spec,
    master_seed,
    out_of_scope_reasons,
    recipe,
    tf32_allowed,
)
from deepgreen_audit.synth.model import (
    CODECARBON_CONFIG_PLACEHOLDER,
    TRIAL_COLLAPSE_SHARE,
    SynthModel,
    data_fingerprint_sha256,
    expected_config,
    initial_weights_sha256,
    precision_policy_changed,
    sha256_text,
)
from deepgreen_audit.trial import CANONICAL_INITIALISER, known_initialisers, run_id as trial_run_id
from deepgreen_audit.units import J_PER_KWH

CAMPAIGN = "synthetic"
TRUTH_FILE = "synth-truth.json"
PHASES = phases()
#: the synthetic campaign is one Slurm job array, a task per run in schedule order
SLURM_ARRAY_JOB = 7001

# Independent random streams: default_rng([seed, stream, ...]).
_S_SCHEDULE, _S_TIME, _S_POWER, _S_COUNTERS, _S_CODECARBON, _S_CURVES, _S_SAMPLES, _S_TRIAL = \
    range(1, 9)


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, *keys])


def _uniform(rng: np.random.Generator, bounds: tuple[float, float],
             size: int | tuple[int, ...]) -> np.ndarray:
    """Draws of U(bounds), a (low, high) pair of the model."""
    low, high = bounds
    return rng.uniform(low, high, size=size)


def truth_bytes(truth: dict) -> bytes:
    """The bytes of ``synth-truth.json``."""
    return (json.dumps(truth, indent=2, sort_keys=True) + "\n").encode("utf-8")


@dataclass(frozen=True)
class SynthResult:
    """A generated campaign: canonical text tables, the planted truth, descriptor metadata."""

    tables: dict[str, TextTable]
    truth: dict
    meta: dict

    def truth_bytes(self) -> bytes:
        return truth_bytes(self.truth)


@dataclass(frozen=True)
class SimState:
    """What the simulation keeps for the later stages (samples, truth, tables).

    Segments are the columns of a run's timeline: 0 the gap before the run, 1 its startup,
    2, 4, ..., 2 * B its blocks, the odd columns between them the gaps between blocks and
    column S - 1 = 2 * B + 1 its teardown."""

    #: (runs, S) start of each segment, microseconds since the campaign's start
    segment_start_us: np.ndarray
    #: (runs, S) length of each segment, microseconds
    segment_us: np.ndarray
    #: (runs, B) mean GPU power of each block, watts
    block_gpu_w: np.ndarray
    #: (runs,) opening and closing of each run, microseconds since the campaign's start
    run_start_us: np.ndarray
    run_end_us: np.ndarray
    #: (runs,) Slurm's whole-run energy of each run, joules
    run_energy_j: np.ndarray
    #: (runs,) its CPU packages' part, joules (the whole run's on a host without a GPU)
    run_cpu_energy_j: np.ndarray
    #: (runs, B, RAPL domains) True where the domain's counter wrapped in the block
    wrapped: np.ndarray
    #: (runs, B) seconds CodeCarbon's reading outlasts its block
    codecarbon_overhang_s: np.ndarray
    #: (run, block) per RAPL domain where its counter was placed to wrap
    rapl_wrap_planted: tuple[tuple[int, int], ...]
    nvml_origin_mj: int
    rapl_origin_uj: tuple[int, ...]
    campaign_start: _dt.datetime


@dataclass
class Campaign:
    """The working state of one generation; planted defects act on it.

    Per-run arrays and lists are in schedule order (index i = schedule
    position - 1); block arrays have shape (runs, 2 * epochs) with block
    b = 2 * (epoch - 1) + (0 for train, 1 for eval).
    """

    model: SynthModel
    seed: int
    recipe: dict
    ecosystems: list[str]
    architectures: list[str]
    datasets: list[str]
    repetitions: int
    epochs: int
    classes: dict[str, int]
    n_train: dict[str, int]
    n_eval: dict[str, int]
    configs: list[tuple[str, str, str]]
    run_config: np.ndarray          # configuration index per run
    run_rep: np.ndarray             # repetition per run
    run_seed: np.ndarray
    run_pid: np.ndarray
    phys_arch: list[str]            # architecture the run's time and power follow
    eval_fixed_s: np.ndarray        # nan, or a fixed eval-block duration
    on_cpu: np.ndarray              # True where the run's stack ran on the CPU
    #: where every run is to place its work (the scope's device): on "cpu" the host has no GPU
    device: str = "cuda"
    #: time per sample of each phase against the full design's recipe (resolution, batch size)
    work_factor: dict[str, float] = field(default_factory=dict)
    runs: dict[str, list] = field(default_factory=dict)
    env: dict[str, list] = field(default_factory=dict)
    blocks: dict[str, np.ndarray] = field(default_factory=dict)
    #: (runs, B) True for a block row the package keeps (set by the simulation)
    keep: np.ndarray = field(default_factory=lambda: np.ones((0, 0), dtype=bool))
    samples: list[dict[str, np.ndarray]] = field(default_factory=list)
    sim: SimState | None = None     # set by the simulation
    #: an initialiser trial's initialisers (empty: every run from the canonical export) and the
    #: initialiser of each run ("" outside a trial)
    initialisers: tuple[str, ...] = ()
    run_initialiser: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Runs in the campaign."""
        return len(self.run_config)

    @property
    def simulated(self) -> SimState:
        """The simulation's state; only after `_simulate`."""
        if self.sim is None:
            raise RuntimeError("the campaign has not been simulated yet")
        return self.sim

    @property
    def n_blocks_per_run(self) -> int:
        return 2 * self.epochs

    def run_id(self, i: int) -> str:
        eco, arch, ds = self.configs[self.run_config[i]]
        return trial_run_id(eco, arch, ds, int(self.run_rep[i]),
                            self.run_initialiser[i] if self.initialisers else None)

    def collapsed(self) -> np.ndarray:
        """(n,) True for a trial run whose training collapses: exactly round(share x runs) of
        each initialiser's runs (`synth.model.TRIAL_COLLAPSE_SHARE`), drawn; none outside
        a trial."""
        out = np.zeros(self.n, dtype=bool)
        rng = _rng(self.seed, _S_TRIAL)
        for initialiser in self.initialisers:
            runs = [i for i in range(self.n) if self.run_initialiser[i] == initialiser]
            share = float(TRIAL_COLLAPSE_SHARE.get(initialiser, 0.0))
            out[rng.choice(runs, size=int(round(share * len(runs))), replace=False)] = True
        return out

    def config_id(self, c: int) -> str:
        return ".".join(self.configs[c])

    def runs_of_config(self, c: int) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.run_config == c)]

    def runs_of_ecosystem(self, eco: str) -> list[int]:
        return [i for i in range(self.n) if self.configs[self.run_config[i]][0] == eco]

    def refresh_emissions(self, runs: list[int]) -> None:
        """Emissions and their rate follow CodeCarbon's energy after a defect changed it."""
        kwh = self.blocks["codecarbon_energy_kwh"][runs]
        emissions = kwh * self.model.carbon_intensity_kg_per_kwh
        self.blocks["codecarbon_emissions_kg"][runs] = emissions
        self.blocks["codecarbon_emissions_rate_kg_per_s"][runs] = (
            emissions / self.blocks["codecarbon_duration_s"][runs])

    def block_key(self, i: int, b: int) -> dict:
        return {"run_id": self.run_id(i), "epoch": b // 2 + 1, "phase": PHASES[b % 2]}


def _select(override, allowed: list[str], kind: str) -> list[str]:
    if override is None:
        return list(allowed)
    if isinstance(override, str):
        override = [override]
    chosen = list(dict.fromkeys(override))
    refuse_unknown(chosen, allowed, f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} in the "
                   "experiment specification", reasons=out_of_scope_reasons(load_spec()),
                   code="user-error")
    if not chosen:
        raise UserError(f"no {kind} selected")
    return chosen


def _plan(seed: int, model: SynthModel, ecosystems, architectures, datasets, repetitions,
          epochs, batch_size=None, input_resolution_px=None, device=None,
          initialisers=None) -> Campaign:
    spec = load_spec()
    rec = recipe(spec)
    full = dict(rec)
    for key, value in (("batch_size", batch_size), ("input_resolution_px", input_resolution_px)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{key.replace('_', ' ')} must be an integer >= 1, not {value!r}")
            rec[key] = value
    s3 = spec["S3_data"]
    ecos = _select(ecosystems, spec["S6_replication"]["ecosystems"], "ecosystem")
    archs = _select(architectures, spec["S1_model"]["architectures"], "architecture")
    # a scope may name any dataset the specification sizes (the contrast cell's Imagenette)
    sized = [d for d in s3["classes"] if d in s3["train_samples"] and d in s3["eval_samples"]]
    dss = _select(datasets, sized, "dataset") if datasets is not None else \
        _select(None, [d for d in s3["datasets"] if d in sized], "dataset")
    device = declared_device() if device is None else device
    refuse_unknown([device], DEVICES, "a device", code="user-error")
    reps = int(spec["S6_replication"]["repetitions"] if repetitions is None else repetitions)
    n_epochs = int(rec["epochs"] if epochs is None else epochs)
    if reps < 1 or n_epochs < 1:
        raise UserError("repetitions and epochs must be at least 1")
    model.check_labels(ecos, archs, dss)
    configs = [(e, a, d) for e in ecos for a in archs for d in dss]
    n_cfg = len(configs)
    inits = _trial_initialisers(initialisers)
    # one arm a configuration (and, in an initialiser trial, an initialiser): each round is a
    # shuffled pass over the arms
    n_arms = n_cfg * max(1, len(inits))

    rng = _rng(seed, _S_SCHEDULE)
    arms: list[int] = []
    rep_of: list[int] = []
    for r in range(reps):
        perm = rng.permutation(n_arms)
        if arms and n_arms > 1 and perm[0] == arms[-1]:
            j = int(rng.integers(1, n_arms))
            perm[0], perm[j] = perm[j], perm[0]
        arms.extend(int(p) for p in perm)
        rep_of.extend([r + 1] * n_arms)
    order = [a // max(1, len(inits)) for a in arms]
    n = len(order)
    run_seed = rng.choice(2**31 - 1, size=n, replace=False).astype(np.int64)
    lo, hi = model.pid_step
    run_pid = model.first_process_id + np.concatenate(
        [[0], np.cumsum(rng.integers(lo, hi + 1, size=n - 1))]).astype(np.int64)
    run_config = np.array(order, dtype=np.int64)
    return Campaign(
        model=model, seed=seed, recipe=dict(rec), ecosystems=ecos, architectures=archs,
        datasets=dss, repetitions=reps, epochs=n_epochs,
        classes={d: int(s3["classes"][d]) for d in dss},
        n_train={d: int(s3["train_samples"][d]) for d in dss},
        n_eval={d: int(s3["eval_samples"][d]) for d in dss},
        configs=configs, run_config=run_config, run_rep=np.array(rep_of, dtype=np.int64),
        run_seed=run_seed, run_pid=run_pid,
        phys_arch=[configs[c][1] for c in order], eval_fixed_s=np.full(n, np.nan),
        work_factor={phase: model.work_factor(phase, rec, full) for phase in PHASES},
        on_cpu=np.full(n, device == "cpu"), device=device, initialisers=inits,
        run_initialiser=[inits[a % len(inits)] if inits else "" for a in arms])


def _trial_initialisers(initialisers) -> tuple[str, ...]:
    """A trial's initialisers, each one S1_model.initialisers describes (none: no trial)."""
    if initialisers is None:
        return ()
    chosen = [initialisers] if isinstance(initialisers, str) else list(dict.fromkeys(initialisers))
    refuse_unknown(chosen, known_initialisers(load_spec()), "an initialiser of S1_model.initialisers",
                   code="user-error")
    if not chosen:
        raise UserError("no initialiser selected")
    return tuple(chosen)


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    """Running sums along axis 0 that exclude each element itself (the first is 0)."""
    out = np.empty_like(values)
    out[0] = 0
    np.cumsum(values[:-1], axis=0, out=out[1:])
    return out


@dataclass(frozen=True)
class _Layout:
    """The shape of the simulation and each run's labels, in schedule order."""

    n: int                          # runs
    epochs: int
    is_train: np.ndarray            # (B,) True for a train block
    epoch_of: np.ndarray            # (B,) epoch of each block, from 1
    block_cols: np.ndarray          # (B,) segment column of each block
    labels: list[tuple[str, str, str]]
    eco: list[str]
    ds: list[str]
    phys_arch: list[str]            # the architecture each run's time and power follow

    @property
    def n_blocks(self) -> int:
        """B: blocks per run."""
        return 2 * self.epochs

    @property
    def n_segments(self) -> int:
        """S: segments per run (gap, startup, blocks and the gaps between them, teardown)."""
        return 2 * self.n_blocks + 2


def _layout(c: Campaign) -> _Layout:
    """The simulation's shape and labels of campaign `c`."""
    E = c.epochs
    labels = [c.configs[cfg] for cfg in c.run_config]
    return _Layout(n=c.n, epochs=E, is_train=np.tile([True, False], E),
                   epoch_of=np.repeat(np.arange(1, E + 1), 2),
                   block_cols=np.arange(2, 4 * E + 1, 2), labels=labels,
                   eco=[lab[0] for lab in labels], ds=[lab[2] for lab in labels],
                   phys_arch=c.phys_arch)


@dataclass(frozen=True)
class _Timing:
    """How long every block and every segment lasted."""

    block_us: np.ndarray            # (n, B) integer microseconds
    segment_us: np.ndarray          # (n, S) integer microseconds

    @property
    def block_s(self) -> np.ndarray:
        """(n, B) block durations in seconds."""
        return self.block_us / 1e6


def _draw_timing(c: Campaign, lay: _Layout) -> _Timing:
    """Block durations (warm-up, CPU fallback, fixed eval blocks) and the gaps around them."""
    m, n, B, S = c.model, lay.n, lay.n_blocks, lay.n_segments
    eco, ds, pa = lay.eco, lay.ds, lay.phys_arch
    t_tr = np.array([m.block_duration_s(eco[i], pa[i], "train", c.n_train[ds[i]]) for i in range(n)])
    t_ev = np.array([m.block_duration_s(eco[i], pa[i], "eval", c.n_eval[ds[i]]) for i in range(n)])
    t_tr, t_ev = t_tr * c.work_factor["train"], t_ev * c.work_factor["eval"]
    rng = _rng(c.seed, _S_TIME)
    z_run = rng.standard_normal(n)
    z_blk = rng.standard_normal((n, B))
    gaps = _uniform(rng, m.block_gap_s, size=(n, B - 1))
    startup = _uniform(rng, m.startup_s, size=n)
    teardown = _uniform(rng, m.teardown_s, size=n)
    run_gap = _uniform(rng, m.run_gap_s, size=n)
    run_gap[0] = 0.0
    T = np.where(lay.is_train, t_tr[:, None], t_ev[:, None])
    T = T * np.exp(m.run_time_sigma * z_run)[:, None] * np.exp(m.block_time_sigma * z_blk)
    T[:, 0] *= m.warmup_factor
    T[c.on_cpu] *= m.cpu_fallback_time_factor
    # a clean campaign's blocks outlast CodeCarbon's interval; shorter ones are a defect
    T = np.maximum(T, m.min_block_s)
    fixed = ~np.isnan(c.eval_fixed_s)
    if fixed.any():
        T[np.ix_(fixed, ~lay.is_train)] = c.eval_fixed_s[fixed][:, None]
    block_us = np.rint(T * 1e6).astype(np.int64)

    cols = lay.block_cols
    segment_us = np.empty((n, S), dtype=np.int64)
    segment_us[:, 0] = np.rint(run_gap * 1e6)
    segment_us[:, 1] = np.rint(startup * 1e6)
    segment_us[:, cols] = block_us
    segment_us[:, cols[:-1] + 1] = np.rint(gaps * 1e6)
    segment_us[:, S - 1] = np.rint(teardown * 1e6)
    return _Timing(block_us=block_us, segment_us=segment_us)


@dataclass(frozen=True)
class _Power:
    """Power of every block and the energy every segment added to the counters."""

    block_gpu_w: np.ndarray         # (n, B) mean GPU power of each block, W
    segment_gpu_mj: np.ndarray      # (n, S) integer millijoules (NVML's unit)
    segment_cpu_uj: np.ndarray      # (n, S, P) integer microjoules per RAPL domain

    @property
    def n_domains(self) -> int:
        """P: RAPL domains (CPU packages)."""
        return int(self.segment_cpu_uj.shape[2])


def _draw_power(c: Campaign, lay: _Layout, timing: _Timing) -> _Power:
    """GPU and CPU power of every block and gap, and the integer energy each segment added."""
    m, n, B, S = c.model, lay.n, lay.n_blocks, lay.n_segments
    eco, pa, cols = lay.eco, lay.phys_arch, lay.block_cols
    rng = _rng(c.seed, _S_POWER)
    share = np.array(m.cpu_package_share)
    P = len(share)
    z_g = rng.standard_normal((n, B))
    z_c = rng.standard_normal((n, B, P))
    g_tr = np.array([m.gpu_power_w(eco[i], pa[i], "train") for i in range(n)])
    g_ev = np.array([m.gpu_power_w(eco[i], pa[i], "eval") for i in range(n)])
    c_tr = np.array([m.cpu_power_w(eco[i], "train") for i in range(n)])
    c_ev = np.array([m.cpu_power_w(eco[i], "eval") for i in range(n)])
    p_gpu = np.where(lay.is_train, g_tr[:, None], g_ev[:, None]) * np.exp(m.block_power_sigma * z_g)
    p_cpu = (np.where(lay.is_train, c_tr[:, None], c_ev[:, None])[:, :, None] * share
             * np.exp(m.block_power_sigma * z_c))
    seg_gpu_w = np.full((n, S), m.gpu_gap_w)
    seg_gpu_w[:, 0] = m.gpu_idle_w
    # a run on the CPU leaves its GPU idle (no context): blocks and gaps draw gpu_idle_w
    p_gpu[c.on_cpu] = m.gpu_idle_w * np.exp(m.block_power_sigma * z_g[c.on_cpu])
    seg_gpu_w[c.on_cpu] = m.gpu_idle_w
    seg_gpu_w[:, cols] = p_gpu
    seg_cpu_w = np.broadcast_to(m.cpu_gap_w * share, (n, S, P)).copy()
    seg_cpu_w[:, 0, :] = m.cpu_idle_w * share
    seg_cpu_w[:, cols, :] = p_cpu
    seg_us = timing.segment_us
    return _Power(block_gpu_w=p_gpu,
                  segment_gpu_mj=np.rint(seg_gpu_w * seg_us / 1e3).astype(np.int64),
                  segment_cpu_uj=np.rint(seg_cpu_w * seg_us[:, :, None]).astype(np.int64))  # W x us


@dataclass(frozen=True)
class _Clocks:
    """Where every segment, run and block starts on the campaign's clock (microseconds)."""

    segment_start_us: np.ndarray    # (n, S)
    run_start_us: np.ndarray        # (n,)
    run_end_us: np.ndarray          # (n,)
    block_start_us: np.ndarray      # (n, B)


def _clocks(lay: _Layout, timing: _Timing) -> _Clocks:
    """Lay the segments end to end, run after run."""
    n, S = lay.n, lay.n_segments
    seg_us = timing.segment_us
    seg_start = _exclusive_cumsum(seg_us.ravel()).reshape(n, S)
    return _Clocks(segment_start_us=seg_start, run_start_us=seg_start[:, 1],
                   run_end_us=seg_start[:, S - 1] + seg_us[:, S - 1],
                   block_start_us=seg_start[:, lay.block_cols])


@dataclass(frozen=True)
class _Counters:
    """The integer counter readings at every block's boundaries."""

    nvml_origin_mj: int
    nvml_start_mj: np.ndarray       # (n, B)
    nvml_end_mj: np.ndarray         # (n, B)
    rapl_range_uj: np.ndarray       # (P,) each domain's max_energy_range_uj
    rapl_origin_uj: np.ndarray      # (P,) each domain's reading at the campaign's start
    rapl_wrap_planted: tuple[tuple[int, int], ...]   # (run, block) of each domain's planted wrap
    rapl_start_uj: np.ndarray       # (n, B, P)
    rapl_end_uj: np.ndarray         # (n, B, P)
    rapl_wraps: np.ndarray          # (n, B, P) wraps a 1 Hz reader would count


def _draw_counters(c: Campaign, lay: _Layout, power: _Power) -> _Counters:
    """NVML and RAPL readings; each RAPL domain's origin is drawn so it wraps inside a block."""
    m, n, B, S, P = c.model, lay.n, lay.n_blocks, lay.n_segments, power.n_domains
    cols = lay.block_cols
    gpu_inc, cpu_inc = power.segment_gpu_mj, power.segment_cpu_uj
    rng = _rng(c.seed, _S_COUNTERS)
    lo, hi = m.nvml_origin_mj
    nvml_origin = int(rng.integers(lo, hi + 1))
    g_cum = _exclusive_cumsum(gpu_inc.ravel()).reshape(n, S)
    nvml_start = nvml_origin + g_cum[:, cols]
    nvml_end = nvml_start + gpu_inc[:, cols]
    ranges = np.array(m.rapl_max_energy_range_uj, dtype=np.int64)
    c_cum = _exclusive_cumsum(cpu_inc.reshape(n * S, P)).reshape(n, S, P)
    c_blk_start = c_cum[:, cols, :]
    c_blk_inc = cpu_inc[:, cols, :]
    rapl_origin = np.empty(P, dtype=np.int64)
    wrap_block = []
    for p in range(P):
        j = int(rng.integers(n * B))
        frac = rng.uniform(0.1, 0.9)
        i, b = divmod(j, B)
        point = int(c_blk_start[i, b, p]) + int(frac * int(c_blk_inc[i, b, p]))
        rapl_origin[p] = (int(ranges[p]) - point) % int(ranges[p])
        wrap_block.append((i, b))
    # the wraps a reader at 1 Hz would count: every multiple of the range crossed in the block
    rapl_wraps = ((rapl_origin + c_blk_start + c_blk_inc) // ranges
                  - (rapl_origin + c_blk_start) // ranges)
    return _Counters(nvml_origin_mj=nvml_origin, nvml_start_mj=nvml_start, nvml_end_mj=nvml_end,
                     rapl_range_uj=ranges, rapl_origin_uj=rapl_origin,
                     rapl_wrap_planted=tuple(wrap_block),
                     rapl_start_uj=(rapl_origin + c_blk_start) % ranges,
                     rapl_end_uj=(rapl_origin + c_blk_start + c_blk_inc) % ranges,
                     rapl_wraps=rapl_wraps)


@dataclass(frozen=True)
class _Energies:
    """Energies as a reader computes them from the integer counters, joules."""

    gpu_j: np.ndarray               # (n, B)
    cpu_j: np.ndarray               # (n, B)
    total_j: np.ndarray             # (n, B)
    run_j: np.ndarray               # (n,) Slurm's whole-run reading
    run_cpu_j: np.ndarray           # (n,) its CPU packages' part (a host without a GPU)
    wrapped: np.ndarray             # (n, B, P) True where a RAPL domain wrapped in the block


def _energies(power: _Power, counters: _Counters) -> _Energies:
    """Block energies from the counter differences, and each run's Slurm energy."""
    k = counters
    gpu_energy_j = (k.nvml_end_mj - k.nvml_start_mj) / 1000.0
    diff = k.rapl_end_uj - k.rapl_start_uj + k.rapl_wraps * k.rapl_range_uj
    cpu_energy_j = diff[:, :, 0] / 1e6
    for p in range(1, power.n_domains):
        cpu_energy_j = cpu_energy_j + diff[:, :, p] / 1e6
    # Slurm's whole-run reading of the exclusive job: every segment of the run, blocks and the
    # gaps between them, at the board-and-package boundary (integer sums: the same on any CPU)
    run_cpu_j = power.segment_cpu_uj[:, 1:, :].sum(axis=(1, 2)) / 1e6
    run_energy_j = (power.segment_gpu_mj[:, 1:].sum(axis=1) * 1000
                    + power.segment_cpu_uj[:, 1:, :].sum(axis=(1, 2))) / 1e6
    return _Energies(gpu_j=gpu_energy_j, cpu_j=cpu_energy_j, total_j=gpu_energy_j + cpu_energy_j,
                     run_j=run_energy_j, run_cpu_j=run_cpu_j, wrapped=k.rapl_wraps > 0)


@dataclass(frozen=True)
class _CodeCarbon:
    """CodeCarbon's reading of every block: a little longer, biased and noisy."""

    overhang_s: np.ndarray          # (n, B) seconds the reading outlasts its block
    duration_s: np.ndarray          # (n, B)
    gpu_j: np.ndarray               # (n, B)
    cpu_j: np.ndarray               # (n, B)
    gpu_kwh: np.ndarray             # (n, B)
    cpu_kwh: np.ndarray             # (n, B)
    ram_kwh: np.ndarray             # (n, B)

    @property
    def kwh(self) -> np.ndarray:
        """(n, B) total energy, kWh."""
        return self.gpu_kwh + self.cpu_kwh + self.ram_kwh


def _draw_codecarbon(c: Campaign, lay: _Layout, timing: _Timing, energies: _Energies) -> _CodeCarbon:
    """CodeCarbon's duration and energies of every block."""
    m, n, B = c.model, lay.n, lay.n_blocks
    rng = _rng(c.seed, _S_CODECARBON)
    overhang = _uniform(rng, m.codecarbon_overhang_s, size=(n, B))
    f_gpu = 1 + m.codecarbon_energy_bias + m.codecarbon_energy_noise * rng.standard_normal((n, B))
    f_cpu = 1 + m.codecarbon_energy_bias + m.codecarbon_energy_noise * rng.standard_normal((n, B))
    cc_dur = timing.block_s + overhang
    cc_gpu_j = energies.gpu_j * f_gpu
    cc_cpu_j = energies.cpu_j * f_cpu
    cc_ram_j = m.codecarbon_ram_power_w * cc_dur
    return _CodeCarbon(overhang_s=overhang, duration_s=cc_dur, gpu_j=cc_gpu_j, cpu_j=cc_cpu_j,
                       gpu_kwh=cc_gpu_j / J_PER_KWH, cpu_kwh=cc_cpu_j / J_PER_KWH,
                       ram_kwh=cc_ram_j / J_PER_KWH)


@dataclass(frozen=True)
class _Curves:
    """Learning curves and work of every block."""

    loss: np.ndarray                # (n, B) mean loss, quantised to 1e-6
    test_accuracy: np.ndarray       # (n, B) nan in train blocks
    samples_processed: np.ndarray   # (n, B) integers


def _draw_curves(c: Campaign, lay: _Layout) -> _Curves:
    """Accuracy rising and loss decaying exponentially towards each run's final values."""
    m, n, E, B, ds = c.model, lay.n, lay.epochs, lay.n_blocks, lay.ds
    rng = _rng(c.seed, _S_CURVES)
    z_acc_run = rng.standard_normal(n)
    z_acc_ep = rng.standard_normal((n, E))
    z_loss = rng.standard_normal(n)
    classes = np.array([c.classes[d] for d in ds], dtype=float)
    n_ev = np.array([c.n_eval[d] for d in ds], dtype=float)
    n_tr = np.array([c.n_train[d] for d in ds], dtype=np.int64)
    final = np.array([m.dataset_final_accuracy[ds[i]] + m.architecture_accuracy_offset[lay.phys_arch[i]]
                      + m.ecosystem_accuracy_offset[lay.eco[i]] for i in range(n)])
    final = final + m.run_accuracy_sigma * z_acc_run
    chance = 1.0 / classes
    e = np.arange(1, E + 1, dtype=float)
    acc = (chance[:, None] + (final - chance)[:, None] * (1 - np.exp(-e / m.accuracy_tau_epochs))
           + m.epoch_accuracy_sigma * z_acc_ep)
    collapsed = c.collapsed()
    acc[collapsed] = chance[collapsed, None] + m.epoch_accuracy_sigma * z_acc_ep[collapsed]
    acc = np.clip(np.rint(np.clip(acc, 0, 1) * n_ev[:, None]) / n_ev[:, None], 0.0, 1.0) + 0.0
    decay = np.exp(-e / m.loss_tau_epochs)
    l0 = np.log(classes)
    lf_tr = np.array([m.dataset_final_train_loss[d] for d in ds])
    lf_ev = np.array([m.dataset_final_eval_loss[d] for d in ds])
    run_loss = np.exp(m.run_loss_sigma * z_loss)[:, None]
    loss = np.empty((n, B))
    loss[:, 0::2] = (lf_tr[:, None] + (l0 - lf_tr)[:, None] * decay) * run_loss
    loss[:, 1::2] = (lf_ev[:, None] + (l0 - lf_ev)[:, None] * decay) * run_loss
    loss[collapsed] = (l0[:, None] * run_loss)[collapsed]
    # Quantised like the other columns: vectorised exp differs in the last bit between CPUs
    # (SIMD paths), and the shipped package must be the same bytes on every machine.
    loss = np.round(loss, 6) + 0.0
    test_acc = np.full((n, B), np.nan)
    test_acc[:, 1::2] = acc
    return _Curves(loss=loss, test_accuracy=test_acc,
                   samples_processed=np.where(lay.is_train, n_tr[:, None],
                                              n_ev.astype(np.int64)[:, None]))


def _counter_text(values: np.ndarray) -> np.ndarray:
    """(n, B, k) integers -> (n, B) ';'-joined strings."""
    parts = values.astype(str)
    out = parts[..., 0].astype(object)
    for k in range(1, values.shape[-1]):
        out = out + ";" + parts[..., k].astype(object)
    return out


def _block_columns(m: SynthModel, lay: _Layout, timing: _Timing, clocks: _Clocks,
                   counters: _Counters, energies: _Energies, cc: _CodeCarbon,
                   curves: _Curves) -> dict[str, np.ndarray]:
    """The blocks table's columns, each an (n, B) array."""
    shape = (lay.n, lay.n_blocks)
    cc_kwh = cc.kwh
    return {
        "epoch": np.broadcast_to(lay.epoch_of, shape),
        "phase": np.broadcast_to(np.array(PHASES * lay.epochs, dtype=object), shape),
        "block_start_us": clocks.block_start_us,
        "duration_s": timing.block_s,
        "nvml_start_mj": counters.nvml_start_mj.astype(str).astype(object),
        "nvml_end_mj": counters.nvml_end_mj.astype(str).astype(object),
        "rapl_start_uj": _counter_text(counters.rapl_start_uj),
        "rapl_end_uj": _counter_text(counters.rapl_end_uj),
        "rapl_max_energy_range_uj": np.full(shape, ";".join(str(int(r)) for r in counters.rapl_range_uj),
                                            dtype=object),
        "rapl_wraps": _counter_text(counters.rapl_wraps),
        "gpu_energy_j": energies.gpu_j,
        "cpu_energy_j": energies.cpu_j,
        "energy_j": energies.total_j,
        "codecarbon_duration_s": cc.duration_s,
        "codecarbon_energy_kwh": cc_kwh,
        "codecarbon_energy_j": cc_kwh * J_PER_KWH,
        "codecarbon_cpu_energy_kwh": cc.cpu_kwh,
        "codecarbon_gpu_energy_kwh": cc.gpu_kwh,
        "codecarbon_ram_energy_kwh": cc.ram_kwh,
        "codecarbon_cpu_power_w": cc.cpu_j / cc.duration_s,
        "codecarbon_gpu_power_w": cc.gpu_j / cc.duration_s,
        "codecarbon_ram_power_w": np.full(shape, float(m.codecarbon_ram_power_w)),
        "codecarbon_cpu_method": np.full(shape, m.codecarbon_cpu_method, dtype=object),
        "codecarbon_gpu_method": np.full(shape, m.codecarbon_gpu_method, dtype=object),
        "codecarbon_emissions_kg": cc_kwh * m.carbon_intensity_kg_per_kwh,
        "codecarbon_emissions_rate_kg_per_s": cc_kwh * m.carbon_intensity_kg_per_kwh / cc.duration_s,
        "codecarbon_country_iso_code": np.full(shape, m.codecarbon_country_iso_code, dtype=object),
        "codecarbon_region": np.full(shape, None, dtype=object),
        "samples_processed": curves.samples_processed,
        "loss": curves.loss,
        "test_accuracy": curves.test_accuracy,
    }


def _run_columns(c: Campaign, lay: _Layout, sim: SimState) -> dict[str, list]:
    """The runs table's columns, each a list in schedule order."""
    m, n, labels, eco, ds = c.model, lay.n, lay.labels, lay.eco, lay.ds
    start = sim.campaign_start
    rec = c.recipe
    res = int(rec["input_resolution_px"])
    return {
        "run_id": [c.run_id(i) for i in range(n)],
        "campaign": [CAMPAIGN] * n,
        "ecosystem": list(eco),
        "architecture": [lab[1] for lab in labels],
        "dataset": list(ds),
        "source_labels": [None] * n,
        "repetition": c.run_rep.tolist(),
        "seed": c.run_seed.tolist(),
        "schedule_position": list(range(1, n + 1)),
        "process_id": c.run_pid.tolist(),
        "started_at_utc": [start + _dt.timedelta(microseconds=int(u)) for u in sim.run_start_us],
        "ended_at_utc": [start + _dt.timedelta(microseconds=int(u)) for u in sim.run_end_us],
        "status": ["completed"] * n,
        **{k: [v] * n for k, v in rec.items() if k != "epochs"},
        "epochs": [lay.epochs] * n,
        # where a GPU campaign's frameworks place the work (a CPU fallback: the cpu-fallback defect)
        "device": ["cpu" if c.on_cpu[i] else declared_device() for i in range(n)],
        "device_name": [m.environment["cpu_model"] if c.on_cpu[i] else m.environment["gpu_model"]
                        for i in range(n)],
        "cudnn_enabled": [bool(m.ecosystem_cudnn_available[eco[i]] and not c.on_cpu[i])
                          for i in range(n)],
        "tf32_enabled": [tf32_allowed()] * n,
        "initial_weights_sha256": [initial_weights_sha256(labels[i][1], c.classes[ds[i]],
                                                          int(c.run_seed[i]),
                                                          c.run_initialiser[i] or CANONICAL_INITIALISER)
                                   for i in range(n)],
        "data_fingerprint_sha256": [data_fingerprint_sha256(d, res) for d in ds],
        "slurm_job_id": [f"{SLURM_ARRAY_JOB}_{i}" for i in range(n)],
        "slurm_consumed_energy_j": sim.run_energy_j.tolist(),
        "slurm_energy_missing_reason": [None] * n,
        "missing_reason": [None] * n,
    }


def _environment_columns(m: SynthModel, eco: list[str], run_ids: list[str]) -> dict[str, list]:
    """The environment table's columns: the model's host, each run's pinned framework."""
    n = len(run_ids)
    env = m.environment
    backend = load_spec()["S4_backend"]
    frameworks, pins = backend["frameworks"], backend["pinned_versions"]
    cc_sha = sha256_text(CODECARBON_CONFIG_PLACEHOLDER)
    columns: dict[str, list] = {
        "run_id": list(run_ids),
        "host": [env["host"]] * n,
        "os": [env["os"]] * n,
        "cpu_model": [env["cpu_model"]] * n,
        "cpu_count": [int(env["cpu_count"])] * n,
        "gpu_model": [env["gpu_model"]] * n,
        "gpu_count": [1] * n,
        "gpu_driver": [env["gpu_driver"]] * n,
        "cuda_version": [env["cuda_version"]] * n,
        "python_version": [env["python_version"]] * n,
        # as the specification says each ecosystem's framework is pinned (S4_backend)
        "framework": [frameworks[k] for k in eco],
        "framework_version": [pins[frameworks[k]] for k in eco],
        # the synthetic host is a GPU host: DL4J loads the specification's backend for cuda
        "framework_backend": [dl4j_backend("cuda") if k == "java-dl4j" else m.ecosystem_framework_backend[k]
                              for k in eco],
        "cudnn_available": [m.ecosystem_cudnn_available[k] for k in eco],
        "codecarbon_version": [m.codecarbon_version] * n,
        "codecarbon_config_sha256": [cc_sha] * n,
        "codecarbon_tracking_mode": [m.codecarbon_tracking_mode] * n,
        "ram_total_gb": [m.codecarbon_ram_total_gb] * n,
        "pue": [m.codecarbon_pue] * n,
        "on_cloud": [False] * n,
        "cloud_provider": [None] * n,
        "cloud_region": [None] * n,
        "nvml_energy_available": [True] * n,
        "rapl_available": [True] * n,
        "rapl_domains": [env["rapl_domains"]] * n,
        "counters_missing_reason": [None] * n,
        "missing_reason": [None] * n,
    }
    columns["codecarbon_gpu_count"] = list(columns["gpu_count"])   # CodeCarbon finds NVML's GPUs
    return columns


def _simulate(c: Campaign) -> None:
    """Time, power, counters, CodeCarbon and learning curves of every block; the runs and
    environment tables; what the later stages need in `c.sim`."""
    lay = _layout(c)
    timing = _draw_timing(c, lay)
    power = _draw_power(c, lay, timing)
    clocks = _clocks(lay, timing)
    counters = _draw_counters(c, lay, power)
    energies = _energies(power, counters)
    cc = _draw_codecarbon(c, lay, timing, energies)
    curves = _draw_curves(c, lay)
    c.blocks = _block_columns(c.model, lay, timing, clocks, counters, energies, cc, curves)
    c.keep = np.ones((lay.n, lay.n_blocks), dtype=bool)
    sim = SimState(
        segment_start_us=clocks.segment_start_us, segment_us=timing.segment_us,
        block_gpu_w=power.block_gpu_w, run_start_us=clocks.run_start_us,
        run_end_us=clocks.run_end_us, run_energy_j=energies.run_j,
        run_cpu_energy_j=energies.run_cpu_j, wrapped=energies.wrapped,
        codecarbon_overhang_s=cc.overhang_s, rapl_wrap_planted=counters.rapl_wrap_planted,
        nvml_origin_mj=counters.nvml_origin_mj,
        rapl_origin_uj=tuple(int(o) for o in counters.rapl_origin_uj),
        campaign_start=_dt.datetime.fromisoformat(c.model.campaign_start_utc.replace("Z", "+00:00")))
    c.sim = sim
    c.runs = _run_columns(c, lay, sim)
    c.env = _environment_columns(c.model, lay.eco, c.runs["run_id"])
    if c.device == "cpu":
        _without_gpu(c)


#: Why a CPU host's GPU cells are empty, as its environment table says it.
NO_GPU_REASON = "no GPU on this synthetic CPU host: gpu_model, gpu_count, gpu_driver, cuda_version"


def _without_gpu(c: Campaign) -> None:
    """A campaign on the CPU (`device = "cpu"`): the synthetic host has no GPU, so no NVML
    reading, no GPU energy and no GPU sample; the measurement boundary is the CPU packages,
    whose RAPL energy is the blocks' energy, and CodeCarbon reads no GPU either."""
    b = c.blocks
    shape = b["duration_s"].shape
    for column in ("nvml_start_mj", "nvml_end_mj"):
        b[column] = np.full(shape, None, dtype=object)
    b["gpu_energy_j"] = np.full(shape, np.nan)
    b["energy_j"] = np.array(b["cpu_energy_j"], dtype=float)
    b["codecarbon_gpu_energy_kwh"] = np.zeros(shape)
    b["codecarbon_gpu_power_w"] = np.zeros(shape)
    b["codecarbon_gpu_method"] = np.full(shape, "none", dtype=object)
    kwh = b["codecarbon_cpu_energy_kwh"] + b["codecarbon_ram_energy_kwh"]
    b["codecarbon_energy_kwh"] = kwh
    b["codecarbon_energy_j"] = kwh * J_PER_KWH
    c.refresh_emissions(list(range(c.n)))
    c.runs["slurm_consumed_energy_j"] = c.simulated.run_cpu_energy_j.tolist()
    c.runs["cudnn_enabled"] = [False] * c.n
    n = len(c.env["run_id"])
    for column in ("gpu_model", "gpu_count", "gpu_driver", "cuda_version"):
        c.env[column] = [None] * n
    c.env["nvml_energy_available"] = [False] * n
    c.env["codecarbon_gpu_count"] = [0] * n
    c.env["cudnn_available"] = [False] * n
    c.env["framework_backend"] = [dl4j_backend("cpu") if f == "dl4j" else v for f, v in
                                  zip(c.env["framework"], c.env["framework_backend"])]
    c.env["missing_reason"] = [NO_GPU_REASON] * n


def _simulate_samples(c: Campaign) -> None:
    """The 1 Hz sampler of every run (its own stream per run)."""
    m, E = c.model, c.epochs
    B = 2 * E
    sim = c.simulated
    seg_start, p_gpu = sim.segment_start_us, sim.block_gpu_w
    c.samples = []
    for i in range(c.n):
        eco, _, _ = c.configs[c.run_config[i]]
        rng = _rng(c.seed, _S_SAMPLES, i)
        t0, t1 = int(sim.run_start_us[i]), int(sim.run_end_us[i])
        phase_us = int(rng.integers(0, 1_000_000))      # the sampler's first tick (model)
        t_us = phase_us + 1_000_000 * np.arange((t1 - t0 - phase_us) // 1_000_000 + 1, dtype=np.int64)
        col = np.searchsorted(seg_start[i, 1:], t0 + t_us, side="right")  # = segment col
        block = (col >= 2) & (col % 2 == 0) & (col <= 2 * B)
        b = np.where(block, (col - 2) // 2, 0)
        train = block & (b % 2 == 0)
        evalb = block & (b % 2 == 1)
        startup = col == 1
        k = len(t_us)
        gap_w = m.gpu_idle_w if c.on_cpu[i] else m.gpu_gap_w
        power = np.where(block, p_gpu[i, b], gap_w) * np.exp(
            m.sample_power_sigma * rng.standard_normal(k))
        u_tr = m.ecosystem_gpu_utilization_pct[eco]
        util = np.where(train, u_tr, np.where(evalb, u_tr * m.eval_utilization_ratio,
                                              np.where(startup, 0.0, m.gap_gpu_utilization_pct)))
        util = util + m.sample_gpu_utilization_sd * rng.standard_normal(k) * (~startup)
        level = m.ecosystem_gpu_memory_mib.get(eco, m.architecture_gpu_memory_mib[c.phys_arch[i]])
        mem = np.where(startup, m.gpu_context_mib, level) + m.sample_memory_sd * rng.standard_normal(k)
        if c.on_cpu[i]:     # a run on the CPU leaves its GPU without work and without a context
            util, mem = np.zeros(k), np.zeros(k)
        if c.device == "cpu":   # a host without a GPU: the sampler reads none
            util, power, mem = np.full(k, np.nan), np.full(k, np.nan), np.full(k, np.nan)
        c_tr = m.ecosystem_cpu_utilization_pct[eco]
        cpu = np.where(train, c_tr, np.where(evalb, c_tr * m.eval_utilization_ratio,
                                             m.gap_cpu_utilization_pct))
        cpu = cpu + m.sample_cpu_utilization_sd * rng.standard_normal(k)
        c.samples.append({
            "t_s": t_us / 1e6,
            "gpu_utilization_pct": np.clip(np.round(util, 1), 0.0, 100.0) + 0.0,
            "gpu_power_w": np.maximum(np.round(power, 1), 0.0) + 0.0,
            "gpu_memory_used_mib": np.maximum(np.round(mem), 0.0) + 0.0,
            "cpu_utilization_pct": np.clip(np.round(cpu, 1), 0.0, 100.0) + 0.0,
        })


# --- truth ---------------------------------------------------------------

def _spread(values: dict[str, float]) -> dict:
    hi = max(values, key=values.__getitem__)
    lo = min(values, key=values.__getitem__)
    return {"max_over_min": values[hi] / values[lo], "max_ecosystem": hi, "max_j": values[hi],
            "min_ecosystem": lo, "min_j": values[lo]}


def _truth(c: Campaign, defect_entries: dict, n_samples: int) -> dict:
    m, E = c.model, c.epochs
    configs = {}
    for eco, arch, ds in c.configs:
        configs[f"{eco}.{arch}.{ds}"] = {
            "ecosystem": eco, "architecture": arch, "dataset": ds,
            **expected_config(m, eco, arch, c.n_train[ds], c.n_eval[ds], E, c.device)}
    spec = load_spec()
    control = [e for e in spec["S6_replication"].get("libtorch_control_group", [])
               if e in c.ecosystems]
    spreads, control_spreads = {}, {}
    for arch in c.architectures:
        for ds in c.datasets:
            for phase in PHASES:
                energies = {eco: configs[f"{eco}.{arch}.{ds}"][phase]["block_energy_j"]
                            for eco in c.ecosystems}
                key = f"{arch}.{ds}.{phase}"
                spreads[key] = _spread(energies)
                if len(control) >= 2:
                    control_spreads[key] = _spread({e: energies[e] for e in control})
    keep = c.keep
    sim = c.simulated
    wrapped = sim.wrapped & keep[:, :, None]
    wrap_rows = [c.block_key(int(i), int(b)) for i, b in zip(*np.nonzero(wrapped.any(axis=2)))]
    wrap_rows.sort(key=lambda r: (r["run_id"], r["epoch"], PHASES.index(r["phase"])))
    domains = m.environment["rapl_domains"].split(";")
    overhang = sim.codecarbon_overhang_s[keep]
    lo, hi = m.codecarbon_overhang_s
    return {
        "synthetic": True,
        "seed": c.seed,
        "generator_version": deepgreen_audit.__version__,
        "campaign": {
            "name": CAMPAIGN, "ecosystems": c.ecosystems, "architectures": c.architectures,
            "datasets": c.datasets, "repetitions": c.repetitions, "epochs": c.epochs,
            "runs": c.n, "blocks": int(keep.sum()), "samples": n_samples, "device": c.device,
            "campaign_start_utc": m.campaign_start_utc,
        },
        "model": m.to_dict(),
        "noise_free": ("expected values with every noise draw at zero (medians of the "
                       "lognormal factors); train block values exclude the warm-up epoch; "
                       "phase values are sums over a run's blocks of that phase (train: "
                       "epochs - 1 + warmup_factor blocks), gaps excluded"),
        "configurations": configs,
        "spreads": spreads,
        "control_group": control,
        "control_group_spreads": control_spreads,
        "rapl_wraps": {
            "blocks": len(wrap_rows),
            "per_domain": {d: int(wrapped[:, :, p].sum()) for p, d in enumerate(domains)},
            "rows": wrap_rows,
            "nvml_origin_mj": sim.nvml_origin_mj,
            "rapl_origin_uj": dict(zip(domains, sim.rapl_origin_uj)),
        },
        "codecarbon_overhang_s": {
            "distribution": "uniform", "low": lo, "high": hi,
            "observed_min": float(overhang.min()), "observed_max": float(overhang.max()),
            "observed_mean": float(overhang.mean()),
        },
        "codecarbon_energy": {"bias": m.codecarbon_energy_bias,
                              "noise": m.codecarbon_energy_noise,
                              "ram_power_w": m.codecarbon_ram_power_w},
        "placeholders": {
            "initial_weights_sha256": "sha256 of 'deepgreen-synthetic initial weights: "
                                      "architecture=<a>; classes=<C>; seed=<seed>'" + (
                                          " (a non-canonical initialiser's: '...; seed=<seed>; "
                                          "initialiser=<i>')" if c.initialisers else ""),
            "data_fingerprint_sha256": "sha256 of 'deepgreen-synthetic data: dataset=<d>; "
                                       "resolution=<px>px'",
            "codecarbon_config_sha256": "sha256 of deepgreen_audit.synth.model."
                                        "CODECARBON_CONFIG_PLACEHOLDER",
        },
        "defects": defect_entries,
        **_trial_truth(c),
    }


def _trial_truth(c: Campaign) -> dict:
    """An initialiser trial's planted collapses: per initialiser, its runs and which collapsed."""
    if not c.initialisers:
        return {}
    collapsed = c.collapsed()
    arms = {}
    for initialiser in c.initialisers:
        runs = [i for i in range(c.n) if c.run_initialiser[i] == initialiser]
        arms[initialiser] = {"runs": len(runs),
                             "collapsed": sorted(c.run_id(i) for i in runs if collapsed[i])}
    return {"trial": {"initialisers": list(c.initialisers), "arms": arms,
                      "collapse_share": {i: TRIAL_COLLAPSE_SHARE.get(i, 0.0) for i in c.initialisers},
                      "collapse": "accuracy at chance + epoch noise, loss at ln(classes), every "
                                  "epoch (deepgreen_audit.synth.model.TRIAL_COLLAPSE_SHARE)"}}


# --- tables --------------------------------------------------------------

def _tables(c: Campaign) -> tuple[dict[str, TextTable], int]:
    n, B = c.n, c.n_blocks_per_run
    order = sorted(range(n), key=lambda i: c.runs["run_id"][i])
    tables = {}
    for name, table_cols in (("runs", c.runs), ("environment", c.env)):
        schema = load_schema(name)
        sorted_cols = {k: [v[i] for i in order] for k, v in table_cols.items()}
        tables[name] = TextTable(schema.field_names, rows_from_columns(schema, sorted_cols))

    schema = load_schema("blocks")
    ii = np.repeat(np.array(order, dtype=np.int64), B)
    bb = np.tile(np.arange(B), n)
    sel = c.keep[ii, bb]
    ii, bb = ii[sel], bb[sel]
    start = c.simulated.campaign_start
    cols: dict[str, list] = {"run_id": [c.runs["run_id"][i] for i in ii]}
    for f in schema.fields:
        if f.name in ("run_id",):
            continue
        if f.name == "started_at_utc":
            cols[f.name] = [start + _dt.timedelta(microseconds=int(u))
                            for u in c.blocks["block_start_us"][ii, bb]]
        elif f.name in c.blocks:
            values = c.blocks[f.name][ii, bb].tolist()
            if f.type == "number":
                values = [None if v != v else v for v in values]
            cols[f.name] = values
        else:
            cols[f.name] = [None] * len(ii)
    tables["blocks"] = TextTable(schema.field_names, rows_from_columns(schema, cols))

    schema = load_schema("samples")
    scol: dict[str, list] = {f.name: [] for f in schema.fields}
    for i in order:
        s = c.samples[i]
        scol["run_id"].extend([c.runs["run_id"][i]] * len(s["t_s"]))
        for k, v in s.items():
            scol[k].extend(None if x != x else x for x in v.tolist())   # NaN: no reading
    tables["samples"] = TextTable(schema.field_names, rows_from_columns(schema, scol))
    return {name: tables[name] for name in TABLES}, len(scol["run_id"])


def _meta(seed: int, defects: list[str], truth_sha: str, scope: dict) -> dict:
    meta = {
        "name": "deepgreen-synthetic-campaign",
        "title": "SYNTHETIC campaign (generated, not measured)",
        "description": (
            "SYNTHETIC DATA. Every number in this package was drawn by the DeepGreen "
            f"synthetic-campaign generator ('deepgreen synth', seed {seed}) from a documented "
            "generative model (deepgreen_audit.synth.model); nothing here was measured on any "
            "hardware. It exists to exercise the audit and the analysis at the study's full "
            "size against a known answer, which is in synth-truth.json."
            + (f" Planted defects: {', '.join(defects)}." if defects else "")),
        "synthetic": True,
        "provenance": {
            "generator": "deepgreen synth",
            "generator_version": deepgreen_audit.__version__,
            "seed": seed,
            "model": "deepgreen_audit.synth.model",
            "defects": list(defects),
            "truth_file": TRUTH_FILE,
            "truth_sha256": truth_sha,
        },
    }
    if scope:
        # what the campaign set out to run: the audit, the analysis and the paper hold it to this
        meta["scope"] = scope
    return meta


#: The overrides of `generate` a campaign declares as its scope, in the order a plan lists them.
SCOPE_OVERRIDES = ("ecosystems", "architectures", "datasets", "initialisers", "repetitions",
                   "epochs", "batch_size", "input_resolution_px", "device")


def generate(seed: int | None = None, model: SynthModel = SynthModel(), *,
             defects: Sequence[str] = (), ecosystems: Sequence[str] | None = None,
             architectures: Sequence[str] | None = None, datasets: Sequence[str] | None = None,
             repetitions: int | None = None, epochs: int | None = None,
             batch_size: int | None = None, input_resolution_px: int | None = None,
             device: str | None = None, reason: str | None = None,
             schedule: str | None = None,
             initialisers: Sequence[str] | None = None) -> SynthResult:
    """Generate a synthetic campaign, deterministically from `seed` (by default the
    specification's master seed, S6_replication.master_seed).

    The overrides select a sub-campaign (labels must be in the experiment
    specification; batch size and input resolution change the time per sample, see the
    model); by default the full campaign of the specification is drawn; `initialisers` makes it
    an initialiser trial, each configuration run once per initialiser in every round
    (`deepgreen_audit.trial`), with the collapses the model plants per initialiser.  A campaign drawn
    with overrides declares them as its scope in the descriptor (with `reason`, why), as a
    collected campaign declares its plan's (and `schedule`, a calibration's, spec.SCHEDULES: its
    runs repeat one configuration by design).  `defects` names planted defects of
    `deepgreen_audit.synth.defects.DEFECTS`.
    """
    from deepgreen_audit.synth.defects import DEFECTS, apply_defects

    seed = master_seed() if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"the seed must be a non-negative integer, not {seed!r}")
    seed = int(seed)
    if isinstance(defects, str):
        defects = [defects]
    refuse_unknown(defects, list(DEFECTS), "a defect the generator plants", code="user-error")
    wanted = [d for d in DEFECTS if d in set(defects)]
    c = _plan(seed, model, ecosystems, architectures, datasets, repetitions, epochs,
              batch_size, input_resolution_px, device, initialisers)
    given = {"ecosystems": ecosystems, "architectures": architectures, "datasets": datasets,
             "initialisers": initialisers, "repetitions": repetitions, "epochs": epochs, "batch_size": batch_size,
             "input_resolution_px": input_resolution_px, "device": device}
    scope = {k: list(v) if isinstance(v, (list, tuple)) else v
             for k, v in given.items() if v is not None}
    if scope and reason:
        scope["reason"] = reason
    if schedule is not None:
        refuse_unknown([schedule], SCHEDULES, "a schedule", code="user-error")
        scope["schedule"] = schedule
    entries: dict = {}
    apply_defects(c, wanted, "physics", entries)
    _simulate(c)
    _record_precision_change(c)
    apply_defects(c, wanted, "report", entries)
    _simulate_samples(c)
    entries = {name: _finish_entry(c, entry) for name, entry in entries.items()}
    tables, n_samples = _tables(c)
    truth = _truth(c, entries, n_samples)
    meta = _meta(seed, wanted, sha256_bytes(truth_bytes(truth)), scope)
    if model.precision_change:
        meta["provenance"]["precision_change"] = dict(sorted(model.precision_change.items()))
    return SynthResult(tables=tables, truth=truth, meta=meta)


def _record_precision_change(c: Campaign) -> None:
    """The runs of each stack in `model.precision_change` record the policy they ran under
    (the specification's with its TF32 flag flipped); their training time already follows
    the factor (`SynthModel.block_duration_s`)."""
    refuse_unknown(sorted(c.model.precision_change), c.ecosystems,
                   "an ecosystem of this campaign", field="--precision-change",
                   code="user-error")
    for i, eco in enumerate(c.runs["ecosystem"]):
        if eco in c.model.precision_change:
            policy = precision_policy_changed(str(c.recipe["precision_policy"]))
            c.runs["precision_policy"][i] = policy
            c.runs["tf32_enabled"][i] = not policy.endswith("tf32-off")


def _finish_entry(c: Campaign, entry: dict) -> dict:
    """Turn a defect's internal row references into run ids and kept-row counts."""
    entry = dict(entry)
    runs = entry.pop("_runs", [])
    blocks = entry.pop("_blocks", [])
    keep = c.keep
    kept = [(i, b) for i, b in blocks if keep[i, b]]
    entry["run_ids"] = sorted({c.run_id(i) for i in runs} | {c.run_id(i) for i, _ in kept})
    rows = dict(entry.get("rows", {}))
    if blocks:
        rows["blocks"] = len(kept)
    entry["rows"] = rows
    return entry


def write_synthetic(out, seed: int | None = None, model: SynthModel = SynthModel(),
                    defects: Sequence[str] = (), descriptor_path=None, overwrite: bool = False,
                    progress: Callable[[str], None] | None = None, copies: int = 1, **overrides):
    """Generate a campaign and write it as a package under `out`; returns the descriptor path.

    `overrides` are those of `generate` (ecosystems, architectures, datasets,
    repetitions, epochs, batch_size, input_resolution_px, reason).  The truth is written beside the tables as
    ``synth-truth.json``; the descriptor says the package is synthetic.  With `copies` N > 1
    the drawn campaign is written N times in a row under new run ids
    (`deepgreen_audit.synth.copies`), its rows streamed to disk, so memory holds the drawn
    campaign and not the package; N = 1 writes the drawn campaign as it is.  An `out` it must
    not write (it exists without `overwrite`, or holds something other than a package) is
    refused before anything is drawn.
    """
    from deepgreen_audit.package.outputs import refuse_package_out
    from deepgreen_audit.package.writer import write_package_streamed
    from deepgreen_audit.synth.copies import Copies

    refuse_package_out(Path(out), overwrite=overwrite,
                       descriptor_path=Path(descriptor_path) if descriptor_path else None)
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise UserError(f"copies must be a positive integer, not {copies!r}")
    if copies > 1 and (defects or model.precision_change):
        raise UserError("--copies does not combine with --defect or --precision-change: the "
                        "copies repeat the drawn runs under new run ids, and a planted defect or "
                        "a changed precision policy names the drawn runs only")
    say = progress or (lambda _msg: None)
    seed = master_seed() if seed is None else seed
    say(f"generating a synthetic campaign (seed {seed}"
        + (f", defects {', '.join(defects)}" if defects else "") + ")")
    result = generate(seed, model, defects=defects, **overrides)
    counts = ", ".join(f"{name} {len(result.tables[name].rows)}" for name in TABLES)
    say(f"generated rows: {counts}")
    plan = Copies(result.tables, copies, int(result.truth["campaign"]["repetitions"]), int(seed))
    if plan.seam_repeats:
        raise UserError("the drawn campaign starts and ends with the same configuration, so its "
                        "copies would run it twice in a row where one copy follows another "
                        "(S6.interleaving); choose another --seed")
    truth, meta = (result.truth, result.meta) if copies == 1 else _replicated(result, plan)
    say(f"writing the package to {out}" + (f" ({copies} copies of the drawn campaign, "
                                          f"{plan.n * copies} runs)" if copies > 1 else ""))
    path = write_package_streamed(plan.chunks(), Path(out), meta, descriptor_path=descriptor_path,
                                  overwrite=overwrite, extra_files={TRUTH_FILE: truth_bytes(truth)})
    say(f"wrote {path} (SYNTHETIC; truth in {TRUTH_FILE})")
    return path


def _replicated(result: SynthResult, plan) -> tuple[dict, dict]:
    """The truth and the descriptor metadata of `plan`'s copies of the drawn campaign: the
    counts of the package, how the copies differ, and a scope of all their repetitions."""
    import copy

    info = plan.describe()
    truth = copy.deepcopy(result.truth)
    truth["campaign"].update(info["written"])
    truth["copies"] = info
    wraps = truth["rapl_wraps"]
    index = {plan.run_id(i, 0): i for i in range(plan.n)}
    rows = [{**row, "run_id": plan.run_id(index[row["run_id"]], k)}
            for k in range(plan.copies) for row in wraps["rows"]]
    rows.sort(key=lambda r: (r["run_id"], r["epoch"], PHASES.index(r["phase"])))
    wraps.update(blocks=len(rows), rows=rows,
                 per_domain={d: n * plan.copies for d, n in wraps["per_domain"].items()})
    meta = copy.deepcopy(result.meta)
    meta["description"] += (
        f" REPLICATED: the drawn campaign ({plan.repetitions} repetitions, {plan.n} runs) is "
        f"written {plan.copies} times in a row under new run ids, times, positions, process ids "
        "and seeds (provenance.copies says how the copies differ); its copies repeat the drawn "
        "numbers, they are not independent draws.")
    meta["provenance"]["copies"] = info
    meta["provenance"]["truth_sha256"] = sha256_bytes(truth_bytes(truth))
    # the package holds repetitions 1 .. R x copies of every configuration: its scope says so
    meta["scope"] = {**meta.get("scope", {}), "repetitions": plan.repetitions * plan.copies}
    return truth, meta
