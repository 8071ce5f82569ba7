"""The experiment specification and its generated Markdown."""

from __future__ import annotations

from deepgreen_audit import spec
from deepgreen_audit.cli import main


def test_docs_spec_md_is_what_the_generator_makes():
    assert spec.markdown_path().read_text(encoding="utf-8") == spec.to_markdown()


def test_every_section_and_recipe_value_appears_in_the_markdown():
    s = spec.load_spec()
    text = spec.to_markdown(s)
    assert spec.section_ids(s) == ["S1_model", "S2_optimisation", "S3_data", "S4_backend",
                                   "S5_measurement", "S6_replication"]
    for key in spec.section_ids(s):
        assert f"## {spec.short_section(key)} {s[key]['title']}" in text
    for column, value in spec.recipe(s).items():
        assert f"| `{column}` |" in text and str(value) in text
    for fw, version in s["S4_backend"]["pinned_versions"].items():
        assert f"| `{fw}` | {version} |" in text


def test_recipe_sections_cover_the_recipe_once():
    columns = [c for cols in spec.RECIPE_SECTIONS.values() for c in cols]
    assert sorted(columns) == sorted(spec.recipe()) and len(set(columns)) == len(columns)


def test_trainable_parameters_per_architecture_and_classes():
    s = spec.load_spec()
    # torchvision definitions: backbone + (features + 1) x classes for the last layer
    assert spec.trainable_parameters("resnet18", 100) == 11_176_512 + 513 * 100
    assert spec.trainable_parameters("vgg16", 200) == 134_260_544 + 4097 * 200
    classes = {s["S3_data"]["classes"][d] for d in s["S3_data"]["datasets"]}
    for arch in s["S1_model"]["architectures"]:
        assert {int(k) for k in s["S1_model"]["trainable_parameters"][arch]} >= classes


def test_spec_verb_check_and_stdout(capsys):
    assert main(["spec", "--markdown", "--check"]) == 0
    assert "current" in capsys.readouterr().out
    assert main(["spec", "--markdown", "--stdout"]) == 0
    assert capsys.readouterr().out == spec.to_markdown()


def test_the_audit_tolerances_are_typed_once_and_a_fault_is_named(tmp_path, capsys):
    import copy

    import pytest

    from deepgreen_audit.errors import UserError

    shipped = spec.load_spec()
    tolerances = spec.AuditTolerances.of(shipped)
    assert tolerances.cpu_power_range_w == (1.0, 800.0)
    assert tolerances.gpu_board_power_limit_w["NVIDIA H100 80GB HBM3"] == 700.0
    with pytest.raises(TypeError):
        tolerances.gpu_board_power_limit_w["NVIDIA H100 80GB HBM3"] = 1.0  # type: ignore[index]
    for change, said in ((lambda a: a.update(max_run_gap=1.0), "did you mean 'max_run_gap_s'"),
                         (lambda a: a.pop("gpu_power_min_w"), "audit.gpu_power_min_w"),
                         (lambda a: a.update(gpu_power_min_w="five"), "'five' is not a number")):
        broken = copy.deepcopy(shipped)
        change(broken["audit"])
        with pytest.raises(UserError, match=said.replace("(", r"\(")):
            spec.AuditTolerances.of(broken)
    # a user's specification with a misspelt tolerance stops the audit before any check: exit 2
    text = spec.spec_path().read_text(encoding="utf-8")
    (tmp_path / "spec.toml").write_text(text.replace("max_run_gap_s =", "max_run_gaps =", 1),
                                        encoding="utf-8")
    assert main(["audit", "--spec", str(tmp_path / "spec.toml")]) == 2
    err = capsys.readouterr().err
    assert "max_run_gaps" in err and "max_run_gap_s" in err and "Traceback" not in err
