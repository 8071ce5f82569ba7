"""`deepgreen compare`: a planted precision change lies beyond the control group's drift,
unchanged campaigns do not, the shipped package against a copy of itself is 1 everywhere,
the JSON document is stable, and bad input is one line with a non-zero exit."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.compare.core import compare_packages
from deepgreen_audit.compare.output import format_text
from deepgreen_audit.synth import write_synthetic
from deepgreen_audit.synth.model import SynthModel
from package_edits import rehash

ROOT = Path(__file__).resolve().parents[1]
SMALL: dict = {"ecosystems": ["python-pytorch", "python-tensorflow", "cpp-libtorch", "rust-tch"],
               "architectures": ["resnet18", "vgg16"], "datasets": ["cifar100"],
               "repetitions": 3, "epochs": 2}
PLANTED = "python-tensorflow"


def _synth(out: Path, seed: int = 5, **model: object) -> Path:
    write_synthetic(out, seed=seed, model=SynthModel().with_overrides(model), **SMALL)
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A (every stack under the specification's policy) and B (TensorFlow's flipped, 3.14x)."""
    base = tmp_path_factory.mktemp("pair")
    return _synth(base / "a"), _synth(base / "b", precision_change={PLANTED: 3.14})


def test_planted_precision_change_lies_beyond_the_drift(pair: tuple[Path, Path]) -> None:
    c = compare_packages(*pair)
    assert c.control == ("python-pytorch", "cpp-libtorch", "rust-tch")
    assert c.control_rule == "unchanged"
    assert {(d.item, d.stacks) for d in c.differences} == {
        ("precision_policy", (PLANTED,)), ("tf32_enabled", (PLANTED,))}
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    assert v.loc[(PLANTED, "train", "energy"), "verdict"] == "beyond"
    assert v.loc[(PLANTED, "train", "duration"), "verdict"] == "beyond"
    assert v.loc[(PLANTED, "eval", "energy"), "verdict"] == "within"
    for stack in c.control:
        assert set(v.loc[stack]["verdict"]) == {"within"}
    train = c.configurations[(c.configurations["ecosystem"] == PLANTED)
                             & (c.configurations["phase"] == "train")]
    assert train["energy_ratio"].round(6).eq(3.14).all()
    band = c.band("train", "energy")
    assert band is not None and band.low < 1.0 < band.high < train["energy_low"].min()
    assert c.beyond_stacks() == [PLANTED]
    assert "beyond the drift (energy, every configuration of a phase): python-tensorflow" \
        in format_text(c)


def test_named_control_group_is_used(pair: tuple[Path, Path]) -> None:
    c = compare_packages(*pair, control=["cpp-libtorch", "rust-tch"])
    assert c.control == ("cpp-libtorch", "rust-tch") and c.control_rule == "named"
    assert c.beyond_stacks() == [PLANTED]


def test_same_model_reports_nothing_beyond_the_drift(tmp_path: Path) -> None:
    same = compare_packages(_synth(tmp_path / "a"), _synth(tmp_path / "b"))
    assert same.differences == [] and same.beyond_stacks() == []
    assert same.configurations["energy_ratio"].eq(1.0).all()
    other = compare_packages(tmp_path / "a", _synth(tmp_path / "c", seed=6))
    assert other.control == other.stacks
    assert set(other.verdicts["verdict"]) == {"within"}


def test_shipped_package_against_a_copy_of_itself_is_one_everywhere(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy2(ROOT / "datapackage.json", copy / "datapackage.json")
    shutil.copytree(ROOT / "replication", copy / "replication")
    c = compare_packages(ROOT / "datapackage.json", copy)
    assert c.differences == []
    assert len(c.configurations) == 84
    for metric in ("energy", "duration"):
        assert c.configurations[f"{metric}_ratio"].eq(1.0).all()
    assert c.beyond_stacks() == []


def test_json_schema_is_stable(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["schema", "a", "b", "differences", "stacks", "control", "bootstrap",
                         "metrics", "primary", "drift", "configurations", "verdicts", "notes"]
    assert doc["schema"] == "deepgreen-compare/2"
    assert list(doc["a"]) == ["path", "title", "synthetic", "scope", "runs", "configurations",
                              "energy_measured", "energy_missing_reason"]
    assert doc["metrics"] == {m: {"compared": True, "not_compared_reason": None}
                              for m in ("energy", "duration")}
    assert doc["primary"] == "energy"
    assert list(doc["differences"][0]) == ["section", "item", "stacks", "a", "b"]
    assert list(doc["control"]) == ["stacks", "rule"]
    assert list(doc["drift"][0]) == ["phase", "metric", "low", "high", "stacks", "configurations"]
    assert list(doc["configurations"][0]) == [
        "ecosystem", "architecture", "dataset", "phase", "n_a", "n_b",
        "energy_ratio", "energy_low", "energy_high", "energy_not_compared", "duration_ratio",
        "duration_low", "duration_high", "duration_not_compared", "energy_band_low",
        "energy_band_high", "energy_beyond", "duration_band_low", "duration_band_high",
        "duration_beyond"]
    assert {(c["n_a"], c["n_b"]) for c in doc["configurations"]} == {(3, 3)}
    assert list(doc["verdicts"][0]) == ["stack", "phase", "metric", "control", "configurations",
                                        "beyond", "ratio_min", "ratio_max", "verdict", "reason"]
    assert main(["compare", str(pair[0]), str(pair[1]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc  # seeded: the same every run


def test_figure_is_written_atomically_and_never_over_an_input(
        pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figure = tmp_path / "compare.pdf"
    assert main(["compare", str(pair[0]), str(pair[1]), "--figure", str(figure)]) == 0
    assert figure.read_bytes().startswith(b"%PDF")
    assert main(["compare", str(pair[0]), str(pair[1]), "--figure", str(figure)]) == 2
    assert "already exists" in capsys.readouterr().err
    runs = pair[1] / "runs.csv"
    before = runs.read_bytes()
    assert main(["compare", str(pair[0]), str(pair[1]), "--figure", str(runs),
                 "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "output-overlaps-input" not in err and "destroy what the command reads" in err
    assert len(err.strip().splitlines()) == 1 and runs.read_bytes() == before


@pytest.mark.parametrize("case", ["missing", "same", "control", "invalid"])
def test_bad_input_is_one_line_and_exit_2(case: str, pair: tuple[Path, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(pair[0]), str(pair[1])
    if case == "invalid":
        broken = tmp_path / "broken"
        shutil.copytree(pair[1], broken)
        (broken / "runs.csv").write_text("run_id\n", encoding="utf-8")
        b = str(broken)
    argv = {"missing": [a, str(tmp_path / "nowhere")], "same": [a, a + "/datapackage.json"],
            "control": [a, b, "--control", "matlab"], "invalid": [a, b]}[case]
    assert main(["compare", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deepgreen compare: error:")
    assert {"missing": "no package descriptor", "same": "the same package",
            "control": "option '--control': 'matlab' is not a stack both packages hold (valid: "
                       "python-pytorch, python-tensorflow, cpp-libtorch, rust-tch)",
            "invalid": "is not valid"}[case] in err[0]


def test_a_misspelt_control_stack_gets_the_closest_name(
        pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--control", "pytorch"]) == 2
    assert "'pytorch' is not a stack both packages hold; did you mean 'python-pytorch'?" \
        in capsys.readouterr().err


def test_render_takes_a_comparison(pair: tuple[Path, Path], tmp_path: Path) -> None:
    from deepgreen_audit.render import render

    plain = render(pair[1], tmp_path / "plain")
    assert "\\Comparisonfalse" in (tmp_path / "plain" / "numbers.tex").read_text()
    assert "fig-comparison.pdf" not in plain.files
    render(pair[1], tmp_path / "with", compare=pair[0])
    _every_compare_macro_is_defined(tmp_path / "with")
    numbers = (tmp_path / "with" / "numbers.tex").read_text()
    assert "\\Comparisontrue" in numbers and "\\CompareBeyondtrue" in numbers
    assert "\\newcommand{\\CompareBeyondList}{Python/TensorFlow}" in numbers
    assert "\\newcommand{\\CompareLargestRatio}{\\num{3.14}}" in numbers
    section = (tmp_path / "with" / "comparison.tex").read_text()
    assert "\\section{Two executions compared}" in section and "\\CompareDriftTrainEnergyLow" \
        in section
    assert (tmp_path / "with" / "fig-comparison.pdf").is_file()
    assert "\\ifComparison\\input{generated/comparison.tex}\\fi" in \
        (ROOT / "paper" / "paper.tex").read_text()


def test_synth_precision_change_touches_one_stack_only(pair: tuple[Path, Path]) -> None:
    def rows(pkg: Path, table: str) -> list[dict[str, str]]:
        with open(pkg / f"{table}.csv", encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))

    a, b = rows(pair[0], "runs"), rows(pair[1], "runs")
    for ra, rb in zip(a, b):
        planted = ra["ecosystem"] == PLANTED
        assert (rb["precision_policy"], rb["tf32_enabled"]) == (
            ("fp32-tf32-on", "true") if planted else (ra["precision_policy"], ra["tf32_enabled"]))
    blocks_a, blocks_b = rows(pair[0], "blocks"), rows(pair[1], "blocks")
    for ba, bb in zip(blocks_a, blocks_b):
        if not ba["run_id"].startswith(PLANTED):
            assert (ba["energy_j"], ba["duration_s"]) == (bb["energy_j"], bb["duration_s"])
    descriptor = json.loads((pair[1] / "datapackage.json").read_text())
    assert descriptor["provenance"]["precision_change"] == {PLANTED: 3.14}
    assert main(["synth", "--out", str(pair[1].parent / "bad"), "--precision-change",
                 "tensorflow"]) == 2


# ---------------------------------------------------------------- what a package did not measure


COLLECTED_STACKS = ["python-pytorch", "cpp-libtorch"]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package made by `collect` from real stack runs on this host (CPU, one batch a block,
    2 repetitions of 1 epoch, digits), flattened and valid: real clocks, and no counter energy
    on a host without RAPL or NVML, with the reason the collection recorded."""
    from deepgreen_audit.collect.driver import collect
    from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
    from deepgreen_audit.collect.prepare import prepare_plan
    from deepgreen_audit.package.rundirs import flatten
    from test_stacks_train import require_built

    require_built(COLLECTED_STACKS)
    tmp = tmp_path_factory.mktemp("collected")
    plan = load_plan(write_scoped_plan(tmp / "plan.toml", "cmp", tmp / "data", {
        "ecosystems": COLLECTED_STACKS, "architectures": ["resnet18"], "datasets": ["digits"],
        "repetitions": 2, "epochs": 1, "device": "cpu", "max_train_batches": 1,
        "max_eval_batches": 1}))
    prepare_plan(plan)
    summary = collect(plan, tmp / "out", allow_missing_counters=True)
    assert summary.ok, summary.failed
    flatten(summary.runs_dir, tmp / "pkg")
    shutil.rmtree(tmp / "data")  # the weight exports: hundreds of MB, read by the runs only
    return tmp / "pkg"


def _energy_recorded(pkg: Path) -> bool:
    from deepgreen_audit.package.descriptor import Package

    return any(r["energy_j"] is not None for r in Package.open(pkg).table("blocks").to_pylist())


def _no_nan(text: str) -> None:
    """No NaN or infinity stands for a missing value (`nan-nan` was what compare printed)."""
    found = re.findall(r"\b(?:nan|NaN|inf|Infinity)\b", text)
    assert not found, (found, text)


def test_collected_without_energy_compares_durations_and_says_why(
        collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = shutil.copytree(collected, tmp_path / "copy")
    c = compare_packages(collected, copy)
    assert c.stacks == ("python-pytorch", "cpp-libtorch") and c.control == c.stacks
    assert {(r.n_a, r.n_b) for r in c.configurations.itertuples()} == {(2, 2)}
    assert c.configurations["duration_ratio"].eq(1.0).all()  # a copy: every duration ratio 1
    assert c.band("train", "duration") is not None
    text = format_text(c)
    _no_nan(text)
    if _energy_recorded(collected):  # a host with counters: energy is compared as ever
        assert c.primary == "energy" and c.not_compared["energy"] is None
        return
    reason = c.a.energy.reason
    assert c.primary == "duration" and c.compared_metrics == ("duration",)
    assert c.not_compared["energy"] == f"neither package measured energy ({reason})"
    assert c.band("train", "energy") is None
    assert c.no_band("train", "energy") == f"energy is not compared: {c.not_compared['energy']}"
    assert "no control stack" not in text
    assert "control group (the stacks whose recorded precision policy and versions did not " \
           "change): python-pytorch, cpp-libtorch" in text
    assert f"train energy   none: energy is not compared: neither package measured energy " \
           f"({reason})" in text
    assert f"note: energy is not compared: neither package measured energy ({reason}); the " \
           "durations, which every collection measures, are compared" in text
    assert "energy not compared  duration 1.000" in text
    assert "beyond the drift (duration, every configuration of a phase; energy not compared): " \
           "no stack" in text
    assert set(c.verdicts[c.verdicts["metric"] == "energy"]["verdict"]) == {"not-compared"}
    assert set(c.verdicts[c.verdicts["metric"] == "duration"]["verdict"]) == {"within"}

    assert main(["compare", str(collected), str(copy), "--json"]) == 0
    out = capsys.readouterr().out
    _no_nan(out)
    doc = json.loads(out)
    assert doc["a"]["energy_measured"] is False and doc["a"]["energy_missing_reason"]
    assert doc["metrics"]["energy"] == {"compared": False,
                                        "not_compared_reason": c.not_compared["energy"]}
    assert doc["primary"] == "duration"
    first = doc["configurations"][0]
    assert first["energy_ratio"] is None and first["energy_not_compared"] == c.not_compared["energy"]
    energy = [v for v in doc["verdicts"] if v["metric"] == "energy"]
    assert all(v["ratio_min"] is None and v["reason"] == c.not_compared["energy"] for v in energy)


def test_one_package_without_energy_is_named(collected: Path, tmp_path: Path) -> None:
    scoped = tmp_path / "scoped"
    write_synthetic(scoped, ecosystems=COLLECTED_STACKS, architectures=["resnet18"],
                    datasets=["digits"], repetitions=2, epochs=1, reason="the collected scope")
    c = compare_packages(collected, scoped)
    assert c.b.energy.measured
    text = format_text(c)
    _no_nan(text)
    assert "B: counter energy measured" in text
    if _energy_recorded(collected):
        return
    assert c.not_compared["energy"] == f"A measured no energy ({c.a.energy.reason})"
    assert f"A: counter energy not measured: {c.a.energy.how}" in text
    # the synthetic host ran on cuda: no stack kept its device, so there is no control group
    assert c.control == () and "control group (the stacks whose recorded precision policy and " \
        "versions did not change): none (every stack both packages hold recorded a changed " \
        "precision policy, device or framework version" in text
    assert "train duration none: no control stack (every stack" in text
    assert set(c.verdicts[c.verdicts["metric"] == "duration"]["verdict"]) == {"no-band"}


def test_packages_that_share_no_configuration_say_so(
        collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = _synth(tmp_path / "cifar")  # SMALL: cifar100 only, the collected package digits only
    assert main(["compare", str(collected), str(other), "--figure",
                 str(tmp_path / "f.pdf")]) == 0
    text = capsys.readouterr().out
    _no_nan(text)
    assert "note: A and B share no configuration, so no ratio B/A exists: they have no dataset " \
           "(A: digits; B: cifar100) in common; only what differs between them is reported" in text
    assert "beyond the drift: nothing compared (the packages share no configuration)" in text
    assert "scope         configurations" in text  # what differs is still reported
    assert (tmp_path / "f.pdf").read_bytes().startswith(b"%PDF")
    assert main(["compare", str(collected), str(other), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["configurations"] == [] and doc["verdicts"] == [] and doc["drift"] == []
    assert doc["metrics"]["duration"] == {"compared": False,
                                          "not_compared_reason": "the packages share no "
                                                                 "configuration"}


def test_packages_without_a_stack_in_common_say_so(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    write_synthetic(a, ecosystems=["python-pytorch"], architectures=["resnet18"],
                    datasets=["cifar100"], repetitions=2, epochs=1)
    write_synthetic(b, ecosystems=["rust-tch"], architectures=["vgg16"],
                    datasets=["cifar100"], repetitions=2, epochs=1)
    c = compare_packages(a, b)
    assert c.stacks == () and not c.shared and c.no_control() == \
        "the packages hold no stack in common"
    assert c.notes == ["A and B share no configuration, so no ratio B/A exists: they have no "
                       "stack (A: python-pytorch; B: rust-tch) and no architecture (A: resnet18; "
                       "B: vgg16) in common; only what differs between them is reported"]
    with pytest.raises(Exception, match="'rust-tch' is not a stack both packages hold "
                                        r"\(valid: none\)"):
        compare_packages(a, b, control=["rust-tch"])


def _edit_blocks(pkg: Path, run_prefix: str, phase: str, cells: dict[str, str]) -> None:
    """Set `cells` in the blocks of `phase` of the runs whose id starts with `run_prefix`."""
    with open(pkg / "blocks.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["run_id"].startswith(run_prefix) and row["phase"] == phase:
            row.update(cells)
    with open(pkg / "blocks.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    rehash(pkg)


def test_configurations_without_energy_in_one_package_give_their_reason(
        pair: tuple[Path, Path], tmp_path: Path) -> None:
    b = shutil.copytree(pair[0], tmp_path / "b")
    _edit_blocks(b, "rust-tch.vgg16", "eval", {"energy_j": "", "gpu_energy_j": "",
                                                "cpu_energy_j": "",
                                                "energy_missing_reason": "a counter read failed"})
    zero = shutil.copytree(pair[0], tmp_path / "zero")
    _edit_blocks(zero, "cpp-libtorch.resnet18.cifar100.r1", "train", {"energy_j": "0"})
    c = compare_packages(zero, b)
    row = c.configurations.set_index(["ecosystem", "architecture", "phase"]).loc[
        ("cpp-libtorch", "resnet18", "train")]
    assert row["energy_not_compared"] == ("a run of A has energy 0, so a ratio B/A can be "
                                          "undefined")
    c = compare_packages(pair[0], b)
    assert c.primary == "energy" and c.not_compared["energy"] is None
    row = c.configurations.set_index(["ecosystem", "architecture", "phase"]).loc[
        ("rust-tch", "vgg16", "eval")]
    assert row["energy_not_compared"] == ("no completed run of B has energy in every block of "
                                          "this phase")
    assert row["duration_ratio"] == 1.0
    v = c.verdicts.set_index(["stack", "phase", "metric"])
    assert v.loc[("rust-tch", "eval", "energy"), "verdict"] == "within"  # resnet18 is compared
    _no_nan(format_text(c))


def _every_compare_macro_is_defined(out: Path) -> None:
    """The comparison section, its conditionals reduced to the branches numbers.tex takes,
    quotes only Compare macros that numbers.tex defines (none fails the build)."""
    from deepgreen_audit.audit.checks.manuscript import taken_branches

    numbers = (out / "numbers.tex").read_text()
    flags = {name: value == "true" for name, value in
             re.findall(r"^\\(Compare[A-Za-z]*)(true|false)$", numbers, re.M)}
    section = taken_branches((out / "comparison.tex").read_text(), flags)
    used = set(re.findall(r"\\(Compare[A-Za-z]+)", section))
    assert used and used <= set(re.findall(r"\\newcommand\{\\(Compare[A-Za-z]+)\}", numbers))


def test_render_of_a_comparison_without_energy_quotes_no_nan(collected: Path,
                                                              tmp_path: Path) -> None:
    from deepgreen_audit.render import render

    copy = shutil.copytree(collected, tmp_path / "copy")
    render(copy, tmp_path / "out", compare=collected)
    _every_compare_macro_is_defined(tmp_path / "out")
    numbers = (tmp_path / "out" / "numbers.tex").read_text()
    section = (tmp_path / "out" / "comparison.tex").read_text()
    _no_nan(numbers)
    assert "\\CompareSharedtrue" in numbers
    if _energy_recorded(collected):
        return
    assert "\\CompareEnergyfalse" in numbers
    assert "\\newcommand{\\CompareEnergyNotComparedReason}{neither package measured energy" \
        in numbers
    assert "the median phase duration of this package" in section
    assert "\\CompareDriftTrainDurationLow{}" in section and "DriftTrainEnergy" not in section
    assert "Energy B/A" not in section and "{Duration B/A}" in section

    scoped = tmp_path / "scoped"  # energy in B only, and no stack kept its device
    write_synthetic(scoped, ecosystems=COLLECTED_STACKS, architectures=["resnet18"],
                    datasets=["digits"], repetitions=2, epochs=1, reason="the collected scope")
    render(scoped, tmp_path / "nocontrol", compare=collected)
    _every_compare_macro_is_defined(tmp_path / "nocontrol")
    section = (tmp_path / "nocontrol" / "comparison.tex").read_text()
    assert "\\CompareNoControlReason{}" in section

    other = _synth(tmp_path / "cifar")
    render(other, tmp_path / "apart", compare=collected)
    _every_compare_macro_is_defined(tmp_path / "apart")
    numbers = (tmp_path / "apart" / "numbers.tex").read_text()
    section = (tmp_path / "apart" / "comparison.tex").read_text()
    assert "\\CompareSharedfalse" in numbers and "\\CompareNoSharedReason{}" in section
    assert "tab:comparison}" not in section and "fig-comparison" not in section
