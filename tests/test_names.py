"""A name a user gives (a scope label, a stack, a key, a verb, an option's value) that deepgreen
does not know is refused in one line with the valid names and, for a near miss, the closest;
a label the study leaves out says why; and an error names a TOML, JSON or INI field a key, a
CSV field a column (deepgreen_audit/errors.py)."""

from __future__ import annotations

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.collect import codecarbon_tracker
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.errors import UserError, closest, field_word, unknown_name
from deepgreen_audit.spec import load_spec, scope_labels
from deepgreen_audit.stacks.data import convert
from deepgreen_audit.synth.model import SynthModel

SPEC = load_spec()
ECOSYSTEMS = ", ".join(SPEC["S6_replication"]["ecosystems"])


@pytest.mark.parametrize("path, field, word", [
    ("pkg/runs.csv", "started_at_utc", "column"), ("emissions.CSV", "duration", "column"),
    ("plan.toml", "scope.device", "key"), ("datapackage.json", "scope.datasets", "key"),
    ("collect/codecarbon.ini", "tracking_mode", "key"), (None, "scope", "key"),
    (None, "--control", "option"), ("plan.toml", "--precision-change", "option"),
])
def test_a_field_is_a_column_of_a_table_and_a_key_of_a_document(path, field, word) -> None:
    assert field_word(path, field) == word
    where = f"{path}, " if path else ""
    assert str(UserError("bad", path=path, field=field)) == f"{where}{word} {field!r}: bad"


@pytest.mark.parametrize("name, close", [
    ("pytorch", ["python-pytorch"]), ("TensorFlow", ["python-tensorflow"]),
    ("PYTHON-JAX", ["python-jax"]), ("rust_tch", ["rust-tch"]),
    ("torch", ["python-pytorch", "cpp-libtorch", "r-torch"]), ("cobol", []),
])
def test_the_closest_names(name: str, close: list[str]) -> None:
    assert closest(name, SPEC["S6_replication"]["ecosystems"]) == close


def test_a_reason_replaces_the_guess() -> None:
    assert unknown_name("Matlab", ["python-pytorch"], "an ecosystem",
                        reasons={"MATLAB": "proprietary"}) == \
        "'Matlab' is not an ecosystem: proprietary (valid: python-pytorch)"
    assert unknown_name("x", [], "a stack both packages hold") == \
        "'x' is not a stack both packages hold (valid: none)"


def _refused(tmp_path, text: str) -> str:
    plan = tmp_path / "plan.toml"
    plan.write_text('campaign = "x"\n' + text, encoding="utf-8")
    with pytest.raises(UserError) as refused:
        load_plan(plan)
    message = str(refused.value)
    assert message.startswith(f"{plan}") and "\n" not in message
    return message[len(str(plan)):]


def test_a_plan_scope_holds_only_the_specifications_labels(tmp_path) -> None:
    """The runs schema knows `matlab` (the first campaign measured it); a plan's scope and
    its [stacks] tables must not: the study leaves MATLAB out, and the error says why."""
    reason = SPEC["S6_replication"]["out_of_scope"]["MATLAB"]
    assert _refused(tmp_path, '[scope]\necosystems = ["python-pytorch", "matlab"]\n') == (
        f", key 'scope.ecosystems': 'matlab' is not an ecosystem of the specification: MATLAB "
        f"is outside the study: {reason} (S6_replication.out_of_scope) (valid: {ECOSYSTEMS})")
    assert _refused(tmp_path, '[stacks.matlab]\nkind = "external"\ncommand = ["m"]\n') \
        .startswith(", key 'stacks.matlab': 'matlab' is not an ecosystem of the specification: "
                    "MATLAB is outside the study")
    assert _refused(tmp_path, '[scope]\necosystems = ["pytorch"]\n') == (
        ", key 'scope.ecosystems': 'pytorch' is not an ecosystem of the specification; did you "
        f"mean 'python-pytorch'? (valid: {ECOSYSTEMS})")
    assert "'resnet' is not an architecture of the specification; did you mean 'resnet18'?" \
        in _refused(tmp_path, '[scope]\narchitectures = ["resnet"]\n')
    datasets = ", ".join(scope_labels(SPEC, "datasets"))
    assert _refused(tmp_path, '[scope]\ndatasets = ["mnist"]\n') == (
        ", key 'scope.datasets': 'mnist' is not a dataset of the specification; did you mean "
        f"'fashion-mnist'? (valid: {datasets})")
    for dataset in ("digits", "imagenette", *SPEC["S3_data"]["datasets"]):
        assert load_plan_scope(tmp_path, f'[scope]\ndatasets = ["{dataset}"]\n')


def load_plan_scope(tmp_path, text: str) -> bool:
    plan = tmp_path / "ok.toml"
    plan.write_text('campaign = "x"\n' + text, encoding="utf-8")
    return bool(load_plan(plan).jobs)


def test_a_misspelt_key_of_a_plan_gets_the_key_it_meant(tmp_path) -> None:
    assert _refused(tmp_path, 'stack_from = "collect/plan.toml"\n').startswith(
        ": 'stack_from' is not a key of a plan; did you mean 'stacks_from'? (valid: campaign, ")
    assert _refused(tmp_path, "[scope]\nrepetition = 2\n").startswith(
        ", key 'scope': 'repetition' is not a key of [scope]; did you mean 'repetitions'?")
    assert _refused(tmp_path, '[hosts]\ndesing = "one-kind"\n').startswith(
        ", key 'hosts': 'desing' is not a key of [hosts]; did you mean 'design'?")
    assert _refused(tmp_path, '[hosts]\ndesign = "replicate"\n') == (
        ", key 'hosts.design': 'replicate' is not a host design; did you mean 'replicates'? "
        "(valid: one-kind, replicates)")
    assert _refused(tmp_path, '[stacks.python-jax]\nkind = "pyhton"\nprogram = "x.py"\n') == (
        ", key 'stacks.python-jax.kind': 'pyhton' is not a kind of stack; did you mean "
        "'python'? (valid: python, external)")


@pytest.mark.parametrize("argv, says", [
    (["comapre", "a", "b"], "argument VERB: 'comapre' is not a verb; did you mean 'compare'?"),
    (["synth", "--out", "x", "--defect", "short-block"],
     "argument --defect: 'short-block' is not one of its choices; did you mean 'short-blocks'?"),
    (["synth", "--out", "x", "--ecosystems", "python-pytorch,tensorflow"],
     "'tensorflow' is not an ecosystem in the experiment specification; did you mean "
     "'python-tensorflow'?"),
    (["synth", "--out", "x", "--ecosystems", "matlab"],
     "'matlab' is not an ecosystem in the experiment specification: MATLAB is outside the study"),
    (["synth", "--out", "x", "--precision-change", "tensorflow=2"],
     "option '--precision-change': 'tensorflow' is not an ecosystem of this campaign; did you "
     "mean 'python-tensorflow'?"),
    (["collect", "--executor", "slrum"], "'slrum' is not one of its choices; did you mean 'slurm'?"),
    (["build", "rustt"], "'rustt' is not a built stack; did you mean 'rust-tch'?"),
])
def test_a_misspelt_name_on_the_command_line(argv, says, tmp_path, monkeypatch, capsys) -> None:
    """Exit 2 and one error line (argparse prints its usage above its own)."""
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's errors end the program
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert says in err.splitlines()[-1] and "Traceback" not in err, err
    assert not (tmp_path / "x").exists()


def test_audit_select_suggests_a_check(tiny_package, capsys) -> None:
    assert main(["audit", str(tiny_package), "--select", "S5.shortblocks"]) == 2
    assert "--select S5.shortblocks matches no check (did you mean 'S5.short-blocks'?); " \
           "valid prefixes are the sections" in capsys.readouterr().err


def test_other_named_things_get_their_valid_names(tmp_path) -> None:
    config = codecarbon_tracker.load_config()
    bad = tmp_path / "codecarbon.ini"
    bad.write_text(config.path.read_text() + "measure_power_sec = 1\n")
    with pytest.raises(UserError, match=r"codecarbon.ini: 'measure_power_sec' is not a key of "
                                        r"\[codecarbon\] deepgreen pins; did you mean "
                                        r"'measure_power_secs'\?"):
        codecarbon_tracker.load_config(bad)
    with pytest.raises(UserError, match="'cifar10' is not a dataset with a converter; did you "
                                        "mean 'cifar100'"):
        convert("cifar10", [], tmp_path / "data")
    with pytest.raises(UserError, match="'noise_fraction' is not a parameter of the synthetic "
                                        "model"):
        SynthModel().with_overrides({"noise_fraction": 0.1})
