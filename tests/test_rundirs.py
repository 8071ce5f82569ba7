"""Run directories: flatten and restore are exact inverses, and refuse what is unsafe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.rundirs import block_files, flatten, restore
from deepgreen_audit.package.schema import TABLES


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def package_bytes(pkg: Path) -> dict[str, bytes]:
    names = [f"{t}.csv" for t in TABLES] + ["SHA256SUMS", "datapackage.json"]
    return {n: (pkg / n).read_bytes() for n in names}


def test_round_trip_both_ways_is_byte_exact(tiny_package, tmp_path):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    again = tmp_path / "again"
    flatten(runs, again)
    assert package_bytes(again) == package_bytes(tiny_package)
    runs2 = tmp_path / "runs2"
    restore(again, runs2)
    assert tree_bytes(runs2) == tree_bytes(runs)


def test_run_directory_layout(tiny_package, tmp_path):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    run = runs / "tiny" / "r-torch.vgg16.cifar100.r1"
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["manifest.json", "samples.csv", *block_files()])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["run"]["learning_rate"] == 0.0001
    assert manifest["environment"]["rapl_available"] is False
    assert manifest["environment"]["host"] == "hôte-Zürich"
    assert (run / "codecarbon.csv").read_text().startswith("epoch,phase,codecarbon_duration_s")
    assert json.loads((runs / "package.json").read_text())["name"] == "tiny-test-package"


def test_restore_refuses_to_overwrite_and_dry_run_writes_nothing(tiny_package, tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["restore", str(tiny_package), "--out", str(runs), "--dry-run"]) == 0
    assert not runs.exists()
    assert "would write 2 run directories" in capsys.readouterr().out
    restore(tiny_package, runs)
    assert main(["restore", str(tiny_package), "--out", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--overwrite" in err and "Traceback" not in err
    assert main(["restore", str(tiny_package), "--out", str(runs), "--overwrite"]) == 0


def test_restore_refuses_an_invalid_package(tiny_package, tmp_path, capsys):
    (tiny_package / "blocks.csv").write_bytes((tiny_package / "blocks.csv").read_bytes()[:-5])
    assert main(["restore", str(tiny_package), "--out", str(tmp_path / "runs")]) == 2
    assert "not valid" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_flatten_refuses_symlinks(tiny_package, tmp_path, capsys):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    run = runs / "tiny" / "r-torch.vgg16.cifar100.r1"
    target = tmp_path / "outside.csv"
    (run / "samples.csv").rename(target)
    (run / "samples.csv").symlink_to(target)
    before = tree_bytes(runs)
    assert main(["flatten", str(runs), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "samples.csv" in err
    assert not (tmp_path / "out").exists()
    assert tree_bytes(runs) == before


def _restored_with_run_field(package, tmp_path, name: str, value) -> Path:
    """The package restored, with one field of one run's manifest replaced."""
    runs = tmp_path / "runs"
    restore(package, runs)
    manifest = runs / "tiny" / "r-torch.vgg16.cifar100.r1" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["run"][name] = value
    manifest.write_text(json.dumps(data))
    return runs


def test_flatten_refuses_a_run_id_that_escapes(tiny_package, tmp_path, capsys):
    runs = _restored_with_run_field(tiny_package, tmp_path, "run_id", "../../etc")
    assert main(["flatten", str(runs), "--out", str(tmp_path / "out")]) == 2
    assert "run_id" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_restore_refuses_a_run_id_that_escapes(tiny_package, tmp_path):
    # A package whose run_id would escape does not validate, so restore writes nothing.
    from test_package import _resign

    path = tiny_package / "runs.csv"
    path.write_text(path.read_text().replace("r-torch.vgg16.cifar100.r1,tiny", "..,tiny"))
    _resign(tiny_package)
    with pytest.raises(UserError, match="not valid"):
        restore(tiny_package, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_flatten_names_the_file_and_row_of_a_bad_cell(tiny_package, tmp_path):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    metrics = runs / "tiny" / "r-torch.vgg16.cifar100.r1" / "metrics.csv"
    lines = metrics.read_text().split("\n")
    lines[2] = lines[2] + ",extra"
    metrics.write_text("\n".join(lines))
    with pytest.raises(UserError) as info:
        flatten(runs, tmp_path / "out")
    assert "metrics.csv" in str(info.value) and "row 3" in str(info.value)


def test_flatten_refuses_an_invalid_result_and_unexpected_files(tiny_package, tmp_path):
    runs = _restored_with_run_field(tiny_package, tmp_path, "status", "exploded")
    with pytest.raises(UserError, match="status"):
        flatten(runs, tmp_path / "out")
    run_dir = runs / "tiny" / "r-torch.vgg16.cifar100.r1"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["run"]["status"] = "completed"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "notes.txt").write_text("hello")
    with pytest.raises(UserError, match="notes.txt"):
        flatten(runs, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_interrupted_write_leaves_the_old_package(tiny_package, tmp_path, monkeypatch):
    import deepgreen_audit.package.writer as writer

    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    before = package_bytes(tiny_package)

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "format_sums", boom)
    with pytest.raises(KeyboardInterrupt):
        flatten(runs, tiny_package, overwrite=True)
    assert package_bytes(tiny_package) == before
    assert not [p for p in tiny_package.parent.iterdir() if p.name.endswith(".staged")]


def test_export_parquet(tiny_package, tmp_path):
    import pyarrow.parquet as pq

    assert main(["export", str(tiny_package), "--parquet", "--out", str(tmp_path / "pq")]) == 0
    table = pq.read_table(tmp_path / "pq" / "blocks.parquet")
    assert table.num_rows == 8
    assert table.column("duration_s")[0].as_py() == 12.345678901234567


# ---------------------------------------------------------------- what is not a run tree (issue 36)


def test_flatten_of_a_package_or_a_collect_folder_says_what_it_is(tiny_package, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["flatten", str(tiny_package), "--out", str(out)]) == 2
    assert (f"{tiny_package}: is a package (datapackage.json), not a run tree: 'deepgreen restore "
            f"{tiny_package} --out RUNS' writes its run directories") in capsys.readouterr().err
    collected = tmp_path / "collected"
    restore(tiny_package, collected / "runs")
    assert main(["flatten", str(collected), "--out", str(out)]) == 2
    assert (f"is a collect output folder, not a run tree: its run tree is {collected / 'runs'}"
            in capsys.readouterr().err)
    assert not out.exists()


def _two_campaigns(tiny_package, tmp_path, collected: bool) -> Path:
    """A run tree holding the tiny campaign's runs twice, the copies as campaign 'other': under
    the same run ids, or (`collected`: a tree whose package.json 'deepgreen collect' wrote for
    campaign 'tiny') under run ids of their own."""
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    for run in sorted((runs / "tiny").iterdir()):
        run_id = run.name.replace(".r1", ".r9") if collected else run.name
        copy = runs / "other" / run_id
        copy.mkdir(parents=True)
        for name in [*block_files(), "samples.csv"]:
            (copy / name).write_bytes((run / name).read_bytes())
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["run"].update(campaign="other", run_id=run_id)
        (copy / "manifest.json").write_text(json.dumps(manifest))
    if collected:
        meta = json.loads((runs / "package.json").read_text())
        meta.update(name="tiny", provenance={"collected_by": "deepgreen collect"})
        (runs / "package.json").write_text(json.dumps(meta))
    return runs


@pytest.mark.parametrize("collected, says", [
    (False, "mixes campaigns: run python-pytorch.resnet18.cifar100.r1 lies in the folders of "
            "'other' and 'tiny', and a package names each run once"),
    (True, "mixes campaigns: its package.json describes campaign 'tiny', which 'deepgreen "
           "collect' measured, and it also holds 'other'")])
def test_flatten_of_a_tree_that_mixes_campaigns_says_so(collected, says, tiny_package, tmp_path,
                                                        capsys):
    runs = _two_campaigns(tiny_package, tmp_path, collected)
    assert main(["flatten", str(runs), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert says in err and "unique" not in err
    assert not (tmp_path / "out").exists()
