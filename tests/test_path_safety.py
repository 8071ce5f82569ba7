"""The one path gate (issue 27): outputs never over an input, regular files only, names the
file system can hold; every case a clear error (exit 2), never a hang or an internal error.

Commands that could hang run in a subprocess under a timeout, so a hang fails the test."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.package.dispatch import validate_package
from deepgreen_audit.package.rundirs import restore

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 60


def _run(*args: str) -> subprocess.CompletedProcess:
    """`deepgreen ARGS` in a subprocess; a hang raises TimeoutExpired, failing the test."""
    return subprocess.run([sys.executable, "-m", "deepgreen_audit.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_S)


def _said(done: subprocess.CompletedProcess) -> str:
    """The command's stdout on one line, whatever width the report was wrapped to."""
    return " ".join(done.stdout.split())


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def shipped(tmp_path) -> Path:
    """A copy of the shipped package: the descriptor at its top, the tables in replication/."""
    pkg = tmp_path / "shipped"
    pkg.mkdir()
    shutil.copy(ROOT / "datapackage.json", pkg)
    shutil.copytree(ROOT / "replication", pkg / "replication")
    return pkg


# ---------------------------------------------------------------- outputs over inputs


@pytest.mark.parametrize("option, target", [("--html", "replication/runs.csv"),
                                            ("--junit", "datapackage.json")])
def test_audit_refuses_a_report_over_its_own_package(shipped, option, target, capsys):
    before = _digests(shipped)
    assert main(["audit", str(shipped), option, str(shipped / target), "--overwrite"]) == 2
    assert "writing it would destroy what the command reads" in capsys.readouterr().err
    assert _digests(shipped) == before


def test_flatten_descriptor_into_an_unwritable_place_leaves_nothing(tiny_package, tmp_path,
                                                                    capsys):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = tmp_path / "out"
    assert main(["flatten", str(runs), "--out", str(out),
                 "--descriptor", str(blocker / "sub" / "datapackage.json")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "pkg", "runs"]


def test_every_verb_that_writes_refuses_an_output_over_its_input(tiny_package, tmp_path):
    from tests.test_codecarbon_logs import row, write_log

    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    log = write_log(tmp_path / "logs" / "emissions.csv", "3.x", [row("3.x", i) for i in range(3)])
    before = {folder: _digests(folder) for folder in (tiny_package, runs, log.parent)}
    for argv in (["restore", str(tiny_package), "--out", str(tiny_package), "--overwrite"],
                 ["export", str(tiny_package), "--out", str(tiny_package / "parquet")],
                 ["flatten", str(runs), "--out", str(runs / "pkg")],
                 ["flatten", str(runs), "--out", str(tmp_path / "flat"),
                  "--descriptor", str(runs / "datapackage.json")],
                 ["import", "codecarbon", str(log), "--out", str(log.parent), "--overwrite"],
                 ["render", str(tiny_package), "--out", str(tiny_package)],
                 ["audit", str(tiny_package), "--out", str(tiny_package / "runs.csv"),
                  "--overwrite"]):
        assert main(argv) == 2, argv
    assert {folder: _digests(folder) for folder in before} == before
    assert not (tmp_path / "flat").exists()


@pytest.mark.parametrize("executor", ["local", "slurm"])
def test_collect_refuses_an_out_over_its_plan_or_its_data(tmp_path, executor, capsys):
    """`collect --out` onto the plan file, or into the data folder the runs read, is refused
    before the host is probed or anything is written, by either executor."""
    from deepgreen_audit.collect.plan import write_scoped_plan

    scope = {"ecosystems": ["python-pytorch"], "architectures": ["resnet18"], "datasets": ["digits"],
             "repetitions": 1, "epochs": 1, "device": "cpu"}
    plan = write_scoped_plan(tmp_path / "plan.toml", "smoke", tmp_path / "data", scope)
    (tmp_path / "data").mkdir()
    before = _digests(tmp_path)
    extra = ["--executor", "slurm", "--dry-run"] if executor == "slurm" else []
    for out, said in ((plan, "is not a folder"), (tmp_path / "data" / "out", "data folder")):
        assert main(["collect", "--plan", str(plan), "--out", str(out), *extra]) == 2
        assert said in capsys.readouterr().err
    assert _digests(tmp_path) == before
    assert not (tmp_path / "data" / "out").exists()


# ---------------------------------------------------------------- non-regular inputs


def test_a_fifo_in_a_run_directory_is_refused_without_a_hang(tiny_package, tmp_path):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    run_dir = next(p for p in runs.glob("*/*") if p.is_dir())
    (run_dir / "samples.csv").unlink()
    os.mkfifo(run_dir / "samples.csv")
    done = _run("flatten", str(runs), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "samples.csv: is a FIFO" in done.stderr
    assert not (tmp_path / "out").exists()


def _foreign(folder: Path) -> Path:
    """A foreign (non-deepgreen) package of one table, rain.csv."""
    folder.mkdir()
    (folder / "rain.csv").write_text("station,rain_mm\noslo,2.5\n", encoding="utf-8")
    (folder / "datapackage.json").write_text(json.dumps({"name": "rainfall", "resources": [
        {"name": "rain", "path": "rain.csv", "schema": {"fields": [
            {"name": "station", "type": "string"}, {"name": "rain_mm", "type": "number"}]}}]}),
        encoding="utf-8")
    return folder


def test_a_fifo_as_a_foreign_data_file_is_refused_without_a_hang(tmp_path):
    pkg = _foreign(tmp_path / "rain")
    (pkg / "rain.csv").unlink()
    os.mkfifo(pkg / "rain.csv")
    done = _run("validate", str(pkg))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is a FIFO (named pipe), not a regular file" in _said(done)
    descriptor = json.loads((pkg / "datapackage.json").read_text())
    descriptor["resources"][0]["schema"] = "rain.csv"  # a schema file read by frictionless too
    (pkg / "datapackage.json").write_text(json.dumps(descriptor))
    done = _run("validate", str(pkg))
    assert done.returncode == 1 and _said(done).count("is a FIFO") == 2


def test_every_part_of_a_multipart_foreign_path_goes_through_the_gate(tmp_path):
    """A resource's path may be a list of files read as one table: each part is checked."""
    pkg = _foreign(tmp_path / "rain")
    (pkg / "rain2.csv").write_text("bergen,9.0\n", encoding="utf-8")
    descriptor = json.loads((pkg / "datapackage.json").read_text())
    descriptor["resources"][0]["path"] = ["rain.csv", "rain2.csv"]
    (pkg / "datapackage.json").write_text(json.dumps(descriptor))
    assert _run("validate", str(pkg)).returncode == 0
    (pkg / "rain2.csv").unlink()
    os.mkfifo(pkg / "rain2.csv")
    done = _run("validate", str(pkg))
    assert done.returncode == 1 and "is a FIFO (named pipe)" in _said(done)
    (pkg / "rain2.csv").unlink()
    outside = tmp_path / "secret.csv"
    outside.write_text("bergen,9.0\n", encoding="utf-8")
    (pkg / "rain2.csv").symlink_to(outside)
    done = _run("validate", str(pkg))
    assert done.returncode == 1 and "leads out of the package folder" in _said(done)


def test_a_socket_as_a_data_file_is_refused(tiny_package, tmp_path):
    pkg = _foreign(tmp_path / "rain")
    (pkg / "rain.csv").unlink()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(pkg / "rain.csv"))
        findings = validate_package(pkg).findings
        assert [f.id for f in findings] == ["not-a-file"]
        (tiny_package / "runs.csv").unlink()
        sock.close()
        os.rename(pkg / "rain.csv", tiny_package / "runs.csv")
    done = _run("validate", str(tiny_package))
    assert done.returncode == 1 and "is a socket, not a regular file" in _said(done)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_character_device_as_a_data_file_is_refused(tmp_path, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    pkg = _foreign(tmp_path / "rain")
    (pkg / "rain.csv").unlink()
    (pkg / "rain.csv").symlink_to(device)
    done = _run("validate", str(pkg))
    assert done.returncode == 1 and "leads out of the package folder" in _said(done)
    done = _run("validate", device)  # the device as the descriptor itself
    assert done.returncode == 1 and "is a character device" in _said(done)


def test_a_device_read_through_the_gate_is_refused(tmp_path):
    from deepgreen_audit.errors import UserError
    from deepgreen_audit.package import paths

    with pytest.raises(UserError, match="is a character device"):
        paths.read_bytes("/dev/zero")
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 11)
    with pytest.raises(UserError, match="larger than 10 bytes"):
        paths.read_bytes(big, limit_bytes=10)
    with pytest.raises(UserError, match="is a folder"):
        paths.read_bytes(tmp_path)


def test_a_symlink_out_of_a_foreign_package_is_refused(tmp_path):
    pkg = _foreign(tmp_path / "rain")
    outside = tmp_path / "elsewhere.csv"
    shutil.move(pkg / "rain.csv", outside)
    (pkg / "rain.csv").symlink_to(outside)
    report = validate_package(pkg)
    assert [(f.id, f.resource) for f in report.findings] == [("unsafe-path", "rain")]
    assert not report.valid
    (pkg / "rain.csv").unlink()
    (pkg / "rain.csv").symlink_to("rain.csv")  # a loop: a clear error, not an internal one
    assert [f.id for f in validate_package(pkg).findings] == ["read-error"]


def test_a_fifo_as_a_table_of_the_audited_package(shipped):
    (shipped / "replication" / "samples.csv").unlink()
    os.mkfifo(shipped / "replication" / "samples.csv")
    for verb in ("validate", "audit"):
        done = _run(verb, str(shipped))
        assert done.returncode == 1, done.stderr
        assert "samples.csv: is a FIFO (named pipe)" in _said(done)


# ---------------------------------------------------------------- odd but legal paths


def test_an_output_name_beyond_the_file_system_limit(tiny_package, tmp_path, capsys):
    runs = tmp_path / "runs"
    restore(tiny_package, runs)
    long_name = "a" * 300
    assert main(["flatten", str(runs), "--out", str(tmp_path / long_name)]) == 2
    assert "choose a shorter one" in capsys.readouterr().err
    assert main(["restore", str(tiny_package), "--out", str(tmp_path / long_name)]) == 2
    assert main(["audit", str(tiny_package), "--junit", str(tmp_path / long_name)]) == 2
    assert "choose a shorter one" in capsys.readouterr().err
    for verb in ("validate", "audit"):  # as an input: no package there, a failed check
        assert main([verb, str(tmp_path / long_name)]) == 1


def test_render_out_onto_a_file(tiny_package, tmp_path, capsys):
    target = tmp_path / "numbers.txt"
    target.write_text("mine\n")
    assert main(["render", str(tiny_package), "--out", str(target)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert target.read_text() == "mine\n"


def test_a_nul_byte_in_a_path(tiny_package, tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:
        main(["validate", f"{tiny_package}\0x"])
    assert usage.value.code == 2
    assert "NUL byte" in capsys.readouterr().err
    pkg = _foreign(tmp_path / "rain")
    descriptor = json.loads((pkg / "datapackage.json").read_text())
    descriptor["resources"][0]["path"] = "rain.csv\u0000.txt"
    (pkg / "datapackage.json").write_text(json.dumps(descriptor))
    report = validate_package(pkg)
    assert [f.id for f in report.findings] == ["unsafe-path"]
    assert "NUL byte" in report.findings[0].message
