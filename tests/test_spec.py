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
