"""S1 model: the architectures, the canonical initial weights, and what the data say ran."""

from __future__ import annotations

import numpy as np

from deepgreen_audit.audit import figures
from deepgreen_audit.audit.context import AuditContext, labels_in_spec
from deepgreen_audit.audit.derived import config_profiles
from deepgreen_audit.columnar.evidence import evidence
from deepgreen_audit.columnar.frame import Groups
from deepgreen_audit.suite.registry import NotApplicable, Outcome, Skip, check

FEATURES = {"time": "train seconds per sample", "power": "train GPU power"}

#: (ecosystem, architecture, dataset) -> its profile, one value per FEATURES (in order)
Profiles = dict[tuple[str, str, str], np.ndarray]
#: (ecosystem, dataset) -> profile of the second architecture minus the first's
Contrasts = dict[tuple[str, str], np.ndarray]


@check("S1.architectures", "S1", table="runs")
def architectures(ctx: AuditContext) -> Outcome:
    """Every run's architecture is one the specification (S1 architectures) names."""
    return labels_in_spec(ctx.runs, "architecture", ctx.spec["S1_model"]["architectures"], "S1")


@check("S1.initial-weights", "S1", table="runs")
def initial_weights(ctx: AuditContext) -> Outcome:
    """Every run records the SHA-256 of the canonical initial-weight export it loaded, and
    runs of different (architecture, classes) never share one export; in an initialiser
    trial, neither do runs of different initialisers (each drew its own export)."""
    runs = ctx.runs
    unhashed = runs.missing("initial_weights_sha256")
    classes = ctx.spec["S3_data"]["classes"]
    arm = ctx.initialiser_of_run
    # a run without an architecture has no shape (and shares no export)
    shape = np.array([None if arch is None else f"{arch}/{classes.get(ds)}/{arm[r]}"
                      for r, arch, ds in zip(runs["run_id"], runs["architecture"], runs["dataset"])],
                     dtype=object)
    exports = Groups(runs["initial_weights_sha256"])
    shared = exports.spread(exports.nunique(shape)) > 1
    problems = []
    if unhashed.any():
        problems.append(f"{int(unhashed.sum())} run(s) record no initial-weight hash")
    if shared.any():
        problems.append(f"{int(shared.sum())} run(s) share one export across different "
                        "(architecture, classes" + (", initialiser)" if ctx.initialisers else ")"))
    if problems:
        return Outcome.failed("; ".join(problems), rows=int(unhashed.sum() + shared.sum()),
                              unrecorded=int(unhashed.sum()),
                              details=evidence(runs.take(unhashed | shared).select(
                                  ["run_id", "architecture", "dataset", "initial_weights_sha256"])))
    return Outcome.passed(f"{len(runs):,} runs record their initial-weight export")


def _profiles(ctx) -> Profiles:
    """The configurations whose every feature is defined, with their profile."""
    prof = config_profiles(ctx)
    figures = np.column_stack([prof[f] for f in FEATURES])
    defined = ~np.isnan(figures).any(axis=1)
    keys = zip(prof["ecosystem"][defined], prof["architecture"][defined], prof["dataset"][defined])
    return dict(zip(keys, figures[defined]))


def _contrasts(prof: Profiles, archs: list[str]) -> Contrasts:
    """Per (ecosystem, dataset) that ran both architectures: profile(a1) - profile(a0)."""
    a0, a1 = archs
    pairs = sorted({(eco, ds) for eco, _, ds in prof})
    return {(eco, ds): prof[(eco, a1, ds)] - prof[(eco, a0, ds)] for eco, ds in pairs
            if (eco, a0, ds) in prof and (eco, a1, ds) in prof}


def _median(profiles) -> np.ndarray:
    """The median of each feature over `profiles`."""
    return np.median(np.asarray(list(profiles)), axis=0)


def _predicted(prof: Profiles, eco: str, arch: str, ds: str, references: list[str]) -> np.ndarray:
    """The profile `arch` would have in (eco, ds), from the same ecosystem's `arch` on its
    reference datasets moved by how the dataset changes `arch` in the other ecosystems."""
    preds = []
    others = sorted({e for e, _, _ in prof} - {eco})
    for ref in references:
        shifts = [prof[(e, arch, ds)] - prof[(e, arch, ref)] for e in others
                  if (e, arch, ds) in prof and (e, arch, ref) in prof]
        preds.append(prof[(eco, arch, ref)] + (_median(shifts) if shifts else 0.0))
    return _median(preds)


@check("S1.architecture-identity", "S1", table="blocks", figure=figures.TIME_PER_SAMPLE)
def architecture_identity(ctx: AuditContext) -> Outcome:
    """A label that names the wrong architecture. Two architectures differ in train time per
    sample and in GPU power; where an ecosystem's two labels on one dataset profile the same
    (both log ratios within architecture_collapse_log_tolerance) while the same ecosystem
    separates them on its other datasets, the two labels measured one network. Which label is
    wrong is the likelier of two hypotheses, each predicting both configurations from the
    ecosystem's own profile of one architecture on its other datasets, moved by how the
    dataset changes that architecture in the other ecosystems. A drifting window or a stale
    dataset changes one configuration's work, not two architectures into one; an ecosystem
    whose contrast is reversed against the campaign's but alike on every dataset differs as a stack
    (implementation, hardware window), and a dataset whose time contrast alone departs moved
    in work per sample, not in identity: both are reported as explained, not flagged."""
    archs = list(ctx.spec["S1_model"]["architectures"])
    if len(archs) != 2:
        raise NotApplicable(f"the design holds {len(archs)} architecture(s) ({', '.join(archs)}); "
                            "the identity check compares exactly two")
    prof = _profiles(ctx)
    contrast = _contrasts(prof, archs)
    if not contrast:
        raise Skip("no (ecosystem, dataset) ran both architectures: nothing to compare")
    t = ctx.tolerances
    collapse_tol = float(t.architecture_collapse_log_tolerance)
    tol = float(t.architecture_profile_log_tolerance)
    a0, a1 = archs
    collapsed = {pair: bool((np.abs(c) < collapse_tol).all()) for pair, c in contrast.items()}
    by_ecosystem: dict[str, dict[str, np.ndarray]] = {}
    for (eco, ds), c in contrast.items():
        by_ecosystem.setdefault(eco, {})[ds] = c
    eco_medians = {eco: _median(group.values()) for eco, group in by_ecosystem.items()}
    flagged, explained = [], []
    for eco, group in by_ecosystem.items():
        intact = [ds for ds in group if not collapsed[(eco, ds)]]
        for ds in group:
            if not collapsed[(eco, ds)] or not intact:
                continue
            reference = _median(group[d] for d in intact)
            obs = {a: prof[(eco, a, ds)] for a in archs}
            pred = {a: _predicted(prof, eco, a, ds, intact) for a in archs}
            # hypothesis "label a is wrong": both configurations ran the other architecture
            score = {a: float(sum(np.abs(obs[x] - pred[b]).sum() for x in archs))
                     for a, b in ((a0, a1), (a1, a0))}
            wrong = min(score, key=score.__getitem__)
            ran = a1 if wrong == a0 else a0
            flagged.append({
                "configuration": f"{eco}/{wrong}/{ds}", "ran": ran,
                "time_ratio": round(float(np.exp(group[ds][0])), 3),
                "power_ratio": round(float(np.exp(group[ds][1])), 3),
                "reference_time_ratio": round(float(np.exp(reference[0])), 3),
                "reference_power_ratio": round(float(np.exp(reference[1])), 3),
                "reference_datasets": ",".join(intact),
                f"score_{a0}_label_wrong": round(score[a0], 3),
                f"score_{a1}_label_wrong": round(score[a1], 3)})
        others = [m for e, m in eco_medians.items() if e != eco]
        # the campaign's contrast: the median over the other ecosystems' own medians
        consensus = _median(others) if others else eco_medians[eco]
        explained += _explained(eco, group, eco_medians[eco], consensus, collapsed, tol)
    details = {"evidence": flagged, "evidence_total": len(flagged), "explained": explained}
    note = ("; not flagged: " + "; ".join(e["why"] for e in explained)) if explained else ""
    if flagged:
        b = ctx.block_runs
        wrong_labels = {f["configuration"] for f in flagged}
        rows = sum(f"{e}/{a}/{d}" in wrong_labels
                   for e, a, d in zip(b["ecosystem"], b["architecture"], b["dataset"]))
        found = "; ".join(
            f"{f['configuration']} ran {f['ran']} (its {a1}/{a0} ratios on that dataset: time "
            f"x{f['time_ratio']}, GPU power x{f['power_ratio']}; on {f['reference_datasets']}: "
            f"x{f['reference_time_ratio']}, x{f['reference_power_ratio']}; hypothesis scores "
            f"{f[f'score_{a0}_label_wrong']} vs {f[f'score_{a1}_label_wrong']})" for f in flagged)
        return Outcome.failed(f"{len(flagged)} label(s) name the wrong architecture: {found}{note}",
                              rows=rows, details=details)
    consensus = _median(contrast.values())
    return Outcome.passed(f"{len(contrast)} (ecosystem, dataset) pairs: no two labels measured "
                          f"one network (campaign {a1}/{a0}: time x{np.exp(consensus[0]):.2f}, "
                          f"GPU power x{np.exp(consensus[1]):.2f}){note}", details=details)


def _explained(eco: str, group: dict[str, np.ndarray], eco_median: np.ndarray,
               consensus: np.ndarray, collapsed: dict[tuple[str, str], bool],
               tol: float) -> list[dict]:
    """Contrast anomalies of one ecosystem (its contrast per dataset: `group`) that another
    explanation than a label accounts for."""
    out = []
    spread = np.abs(np.asarray(list(group.values())) - eco_median).max(axis=0)
    reversed_ = [i for i in range(len(FEATURES)) if abs(consensus[i]) >= tol / 2
                 and np.sign(consensus[i]) * eco_median[i] <= -tol / 2]
    if reversed_ and all(spread[i] <= tol for i in reversed_):
        names = list(FEATURES.values())
        out.append({"ecosystem": eco, "kind": "stack-wide", "why": (
            f"{eco}: its contrast is reversed against the campaign's alike on every dataset ("
            + ", ".join(f"{names[i]} x{np.exp(eco_median[i]):.2f} vs x{np.exp(consensus[i]):.2f}"
                        for i in reversed_) + "): a property of the stack (implementation, "
            "hardware or time window), not of one label")})
    if len(group) >= 3:
        for ds, row in group.items():
            if collapsed[(eco, ds)]:
                continue
            siblings = _median(c for d, c in group.items() if d != ds)
            off = np.abs(row - siblings)
            if off[0] > tol and off[1] <= tol:
                out.append({"ecosystem": eco, "dataset": ds, "kind": "work", "why": (
                    f"{eco}/{ds}: time contrast x{np.exp(row[0]):.2f} against "
                    f"x{np.exp(siblings[0]):.2f} on its other datasets while its GPU-power "
                    f"contrast holds (x{np.exp(row[1]):.2f}): one configuration's work per "
                    "sample changed (a stale dataset or a drifting window), not its identity")})
    return out
