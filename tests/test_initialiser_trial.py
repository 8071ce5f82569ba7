"""The initialiser trial (issue 40): its plan, its exports, its synthetic package shipped at
initialiser-trial/, the analysis that counts collapses per initialiser, the paper's sentence,
and one real trial collected on this host's CPU (digits, a few batches) to that sentence."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from deepgreen_audit.analysis import stats
from deepgreen_audit.analysis.trial import analyse_trial
from deepgreen_audit.cli import main
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.checksums import sha256_bytes
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.render.build import make_environment, paper_dir, trial_tex
from deepgreen_audit.stacks import weights
from deepgreen_audit.synth import write_synthetic
from package_edits import rehash

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "initialiser-trial"
INITIALISERS = ["he", "glorot", "xavier"]
#: A real trial on this host: one Python stack, ResNet-18, digits, a few batches.
SMOKE = {"ecosystems": ["python-pytorch"], "architectures": ["resnet18"], "datasets": ["digits"],
         "initialisers": INITIALISERS, "repetitions": 1, "epochs": 1, "batch_size": 32,
         "max_train_batches": 1,
         "max_eval_batches": 1, "device": "cpu", "reason": "the initialiser trial at smoke scale"}


def _env():
    return make_environment(paper_dir() / "templates")


def _sentence(tex: str) -> str:
    return " ".join(tex.split())


# ---------------------------------------------------------------- the plan

def test_the_trial_plan_runs_each_initialiser_in_every_round():
    plan = load_plan(ROOT / "collect" / "initialiser-trial.toml")
    assert plan.scope["initialisers"] == INITIALISERS and plan.scope["repetitions"] == 6
    assert len(plan.jobs) == 18
    assert len({j.seed for j in plan.jobs}) == 18
    for job in plan.jobs:
        assert job.run_id == (f"{job.ecosystem}.{job.architecture}.{job.dataset}."
                              f"{job.initialiser}.r{job.repetition}")
    rounds = [sorted(j.initialiser for j in plan.jobs[i:i + 3]) for i in range(0, 18, 3)]
    assert rounds == [sorted(INITIALISERS)] * 6
    # outside a trial every job is the canonical export's, its run id unchanged
    assert {j.initialiser for j in load_plan(ROOT / "collect" / "pilot.toml").jobs} == {"he"}


def test_a_trial_refuses_external_stacks_and_unknown_initialisers(tmp_path):
    scope = {**SMOKE, "ecosystems": ["python-pytorch", "cpp-libtorch"]}
    with pytest.raises(UserError, match="Python stacks only") as info:
        load_plan(write_scoped_plan(tmp_path / "a.toml", "t", tmp_path / "data", scope))
    assert info.value.field == "scope.ecosystems"
    with pytest.raises(UserError, match="lecun") as info:
        load_plan(write_scoped_plan(tmp_path / "b.toml", "t", tmp_path / "data",
                                    {**SMOKE, "initialisers": ["he", "lecun"]}))
    assert info.value.field == "scope.initialisers"


# ---------------------------------------------------------------- the exports

def test_the_specification_describes_exactly_the_initialisers_the_code_draws():
    from deepgreen_audit.analysis.labels import DISPLAY
    from deepgreen_audit.spec import load_spec
    from deepgreen_audit.stacks.models_torch import INITIALISERS as MODEL_INITIALISERS
    from deepgreen_audit.trial import CANONICAL_INITIALISER, known_initialisers

    assert known_initialisers(load_spec()) == list(MODEL_INITIALISERS) == INITIALISERS
    assert MODEL_INITIALISERS[CANONICAL_INITIALISER].__name__ == "canonical_init_"
    assert all(i in DISPLAY for i in MODEL_INITIALISERS)


def test_each_initialiser_draws_its_own_export_and_he_is_the_canonical_one(tmp_path):
    canonical_tensors, canonical = weights.canonical_export_bytes("resnet18", 10, 7)
    drawn = {i: weights.canonical_export_bytes("resnet18", 10, 7, i) for i in INITIALISERS}
    assert drawn["he"][1] == canonical
    assert len({sha256_bytes(blob) for _, blob in drawn.values()}) == 3
    # the kernels follow each initialiser's law: Glorot uniform's bound, Xavier normal's spread
    fc = "fc.weight"            # [10, 512]: fan_in 512, fan_out 10
    bound = np.sqrt(6 / (512 + 10))
    assert np.abs(drawn["glorot"][0][fc]).max() <= bound < 1.01 * np.abs(drawn["glorot"][0][fc]).max()
    assert np.std(drawn["xavier"][0][fc]) == pytest.approx(np.sqrt(2 / (512 + 10)), rel=0.05)
    assert not np.any(drawn["glorot"][0]["fc.bias"]) and np.any(canonical_tensors["fc.bias"])
    written = weights.export(tmp_path, "resnet18", 10, 7, torchscript=False, initialiser="xavier")
    assert written.path.name == "resnet18-c10-s7-xavier.safetensors"
    assert written.sha256 == sha256_bytes(drawn["xavier"][1])
    manifest = json.loads(written.manifest_path.read_text())
    assert manifest["initialiser"] == "xavier" and "DL4J" in manifest["initialisers"]
    assert weights.ensure(tmp_path.parent, "resnet18", 10, 7, "glorot")[1] == \
        sha256_bytes(drawn["glorot"][1])


# ---------------------------------------------------------------- the analysis

def test_the_exact_interval_is_scipys_two_sided_clopper_pearson():
    for k, n in ((0, 6), (2, 6), (4, 6), (6, 6)):
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert stats.clopper_pearson_interval(k, n, 0.95) == pytest.approx((ci.low, ci.high))


def test_the_shipped_trial_validates_audits_and_gives_the_studys_sentence(capsys):
    assert main(["validate", str(SHIPPED)]) == 0
    assert main(["audit", str(SHIPPED)]) == 0
    out = " ".join(capsys.readouterr().out.split())   # the report wraps to the terminal
    assert "SYNTHETIC DATA" in out and "3 initialisers x 6 repetitions" in out
    assert Package.open(SHIPPED).synthetic
    truth = json.loads((SHIPPED / "synth-truth.json").read_text())["trial"]["arms"]
    result = analyse_trial(SHIPPED)
    counts = {a.initialiser.value: (a.collapsed.value, a.runs.value) for a in result.arms}
    assert counts == {i: (len(truth[i]["collapsed"]), truth[i]["runs"]) for i in INITIALISERS}
    assert counts == {"he": (0, 6), "glorot": (2, 6), "xavier": (4, 6)}
    text = _sentence(trial_tex(_env(), SHIPPED))
    assert (r"\num{0} of \num{6} runs collapsed under He, \num{2} of \num{6} under Glorot and "
            r"\num{4} of \num{6} under Xavier") in text
    assert "The initialiser-trial package is synthetic" in text
    assert r"Xavier \qty{22}{\percent} to \qty{96}{\percent}" in text


def test_the_shipped_trial_is_what_synth_makes_of_the_plan(tmp_path):
    assert main(["synth", "--plan", str(ROOT / "collect" / "initialiser-trial.toml"),
                 "--out", str(tmp_path / "again")]) == 0
    for name in ("runs", "blocks", "samples", "environment"):
        assert (tmp_path / "again" / f"{name}.csv").read_bytes() == \
            (SHIPPED / f"{name}.csv").read_bytes(), name


def test_without_a_trial_the_paragraph_says_so_and_a_campaign_is_no_trial(tmp_path):
    assert "No initialiser-trial package was given" in _sentence(trial_tex(_env(), None))
    with pytest.raises(UserError, match="not an initialiser-trial package"):
        analyse_trial(ROOT / "datapackage.json")


def test_render_reads_the_checkouts_trial_and_refuses_one_as_the_campaign(tmp_path, capsys):
    """`deepgreen render` renders the shipped trial's paragraph by default (the main job's
    paper); a trial package given as the campaign is refused in one line."""
    assert main(["render", str(ROOT / "datapackage.json"), "--out", str(tmp_path / "gen")]) == 0
    text = _sentence((tmp_path / "gen" / "trial.tex").read_text())
    assert r"\num{2} of \num{6} under Glorot" in text
    assert main(["render", str(SHIPPED), "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert "is an initialiser-trial package" in err and "--initialiser-trial PKG" in err
    assert not (tmp_path / "again").exists()


def test_the_audit_names_a_missing_initialiser_run(tmp_path, capsys):
    """A trial whose scope names an initialiser none of its runs used misses those runs."""
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=3, ecosystems=["python-pytorch"], architectures=["resnet18"],
                    datasets=["digits"], initialisers=["he", "glorot"], repetitions=2, epochs=2)
    descriptor = json.loads((pkg / "datapackage.json").read_text())
    descriptor["scope"]["initialisers"] = INITIALISERS
    (pkg / "datapackage.json").write_text(json.dumps(descriptor))
    assert main(["audit", str(pkg)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL S6.completeness-runs runs: 1 configurations x 3 initialisers x 2 repetitions: " \
           "2 missing" in out
    assert "PASS S1.initial-weights" in out


def test_runs_of_two_initialisers_sharing_one_export_fail_the_audit_and_stop_the_analysis(
        tmp_path, capsys):
    """A glorot run that recorded the he run's export did not start from Glorot's weights."""
    pkg = tmp_path / "pkg"
    write_synthetic(pkg, seed=3, ecosystems=["python-pytorch"], architectures=["resnet18"],
                    datasets=["digits"], initialisers=["he", "glorot"], repetitions=1, epochs=2)
    runs = (pkg / "runs.csv").read_text().splitlines()
    header = runs[0].split(",").index("initial_weights_sha256")
    glorot, he = (i for i, line in enumerate(runs) if ".glorot." in line or ".he." in line)
    cells = runs[glorot].split(",")
    cells[header] = runs[he].split(",")[header]
    runs[glorot] = ",".join(cells)
    (pkg / "runs.csv").write_text("\n".join(runs) + "\n")
    rehash(pkg)
    assert main(["audit", str(pkg)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL S1.initial-weights runs: 2 run(s) share one export across different " \
           "(architecture, classes, initialiser)" in out
    with pytest.raises(UserError, match="runs of different initialisers recorded one export"):
        analyse_trial(pkg)


# ---------------------------------------------------------------- a real trial

def test_a_real_trial_on_this_cpu_ends_in_its_sentence(tmp_path):
    """plan -> collect (three real PyTorch runs, one per initialiser) -> flatten -> validate ->
    the paragraph; each run recorded the hash of the export of its own initialiser."""
    plan = write_scoped_plan(tmp_path / "trial.toml", "initialiser-trial", tmp_path / "data", SMOKE)
    out, pkg = tmp_path / "out", tmp_path / "pkg"
    assert main(["collect", "--plan", str(plan), "--out", str(out),
                 "--allow-missing-counters"]) == 0
    assert main(["flatten", str(out / "runs"), "--out", str(pkg)]) == 0
    assert main(["validate", str(pkg)]) == 0
    runs = {r["run_id"]: r for r in Package.open(pkg).table("runs").to_pylist()}
    assert set(runs) == {f"python-pytorch.resnet18.digits.{i}.r1" for i in INITIALISERS}
    for run_id, run in runs.items():
        initialiser = run_id.split(".")[3]
        _, blob = weights.canonical_export_bytes("resnet18", 10, run["seed"], initialiser)
        assert run["initial_weights_sha256"] == sha256_bytes(blob), run_id
    result = analyse_trial(pkg)
    assert [a.runs.value for a in result.arms] == [1, 1, 1]
    text = _sentence(trial_tex(_env(), pkg))
    assert re.search(r"ResNet-18 on digits in Python/PyTorch ran \\num\{1\} times", text)
    assert re.search(r"\\num\{[01]\} of \\num\{1\} runs collapsed under He, \\num\{[01]\} of "
                     r"\\num\{1\} under Glorot and \\num\{[01]\} of \\num\{1\} under Xavier", text)
    assert "synthetic" not in text
