"""`deepgreen compare`: a planted precision change lies beyond the control group's drift,
unchanged campaigns do not, the shipped package against a copy of itself is 1 everywhere,
the JSON document is stable, and bad input is one line with a non-zero exit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.compare import compare_packages
from deepgreen_audit.compare.output import format_text
from deepgreen_audit.synth import write_synthetic
from deepgreen_audit.synth.model import SynthModel

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
                         "drift", "configurations", "verdicts", "notes"]
    assert doc["schema"] == "deepgreen-compare/1"
    assert list(doc["a"]) == ["path", "title", "synthetic", "scope", "runs", "configurations"]
    assert list(doc["differences"][0]) == ["section", "item", "stacks", "a", "b"]
    assert list(doc["control"]) == ["stacks", "rule"]
    assert list(doc["drift"][0]) == ["phase", "metric", "low", "high", "stacks", "configurations"]
    assert list(doc["configurations"][0]) == [
        "ecosystem", "architecture", "dataset", "phase", "n_a", "n_b",
        "energy_ratio", "energy_low", "energy_high", "duration_ratio", "duration_low",
        "duration_high", "energy_band_low", "energy_band_high", "energy_beyond",
        "duration_band_low", "duration_band_high", "duration_beyond"]
    assert list(doc["verdicts"][0]) == ["stack", "phase", "metric", "control", "configurations",
                                        "beyond", "ratio_min", "ratio_max", "verdict"]
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
            "control": "--control names matlab", "invalid": "is not valid"}[case] in err[0]


def test_render_takes_a_comparison(pair: tuple[Path, Path], tmp_path: Path) -> None:
    from deepgreen_audit.render import render

    plain = render(pair[1], tmp_path / "plain")
    assert "\\Comparisonfalse" in (tmp_path / "plain" / "numbers.tex").read_text()
    assert "fig-comparison.pdf" not in plain.files
    render(pair[1], tmp_path / "with", compare=pair[0])
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
    import csv

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
