"""The project installed as a wheel (`pip install .`, not editable) into a new virtual
environment validates, audits and renders the shipped package from an empty folder elsewhere:
it reads the Table Schemas, the specification and the templates it ships, not the checkout's.

The new environment borrows the dependencies the running interpreter already has through a
.pth file naming its site-packages (installing them from PyPI would take minutes).  A .pth
inside a folder that a .pth names is not processed, so the editable install of the running
interpreter (its own .pth) stays invisible; the test asserts that."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from deepgreen_audit.resources import SHIPPED

ROOT = Path(__file__).resolve().parents[1]
#: What of the checkout the build reads besides the folders deepgreen_audit/project/ links to.
BUILD_INPUTS = ("pyproject.toml", "README.md", "deepgreen_audit")
#: Build outputs and caches, which the wheel must not depend on.
NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "target", "generated",
                                     "*.staged")

pytestmark = pytest.mark.slow


def copy_sources(target: Path) -> Path:
    """The checkout's build inputs, without its build outputs (a stale build/lib would leak
    into the wheel): the package with its links, and the folders they reach."""
    target.mkdir()
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, symlinks=True, ignore=NOT_SOURCES)
        else:
            shutil.copy(source, target / name)
    for link in (ROOT / "deepgreen_audit" / SHIPPED).iterdir():
        linked = link.resolve()
        shutil.copytree(linked, target / linked.relative_to(ROOT), ignore=NOT_SOURCES)
    return target


def new_venv(folder: Path) -> Path:
    """A virtual environment whose own site-packages is empty but for a .pth naming the
    running interpreter's site-packages (the dependencies, and pip)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    (Path(own) / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the new environment's bin folder, an environment without this checkout on any path)"""
    work = tmp_path_factory.mktemp("wheel")
    source = copy_sources(work / "source")
    python = new_venv(work / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", str(source)], check=True, env=env, cwd=work)
    return python.parent, env


def run(bin_dir: Path, env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_the_wheel_validates_audits_and_renders_from_an_empty_folder(installed, tmp_path):
    bin_dir, env = installed
    package = tmp_path / "package"
    package.mkdir()
    shutil.copy(ROOT / "datapackage.json", package / "datapackage.json")
    shutil.copytree(ROOT / "replication", package / "replication")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    where = run(bin_dir, env, elsewhere, "python", "-c",
                "import deepgreen_audit, deepgreen_audit.resources as r; "
                "print(deepgreen_audit.__file__); print(r.checkout()); print(r.project_file('schemas'))")
    module, checkout, schemas = where.stdout.split()
    venv = bin_dir.parent.resolve()
    assert Path(module).resolve().is_relative_to(venv), module
    assert checkout == "None"
    assert Path(schemas).is_relative_to(venv) and not Path(schemas).is_relative_to(ROOT)

    validated = run(bin_dir, env, elsewhere, "deepgreen", "validate", str(package / "datapackage.json"))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "runs: 210" in validated.stdout

    audited = run(bin_dir, env, elsewhere, "deepgreen", "audit", str(package), "--json")
    assert audited.returncode == 0, audited.stderr
    report = json.loads(audited.stdout)
    assert report["finished"], [f for f in report["findings"] if f["status"] == "skip"]
    sources = {f["id"]: f["status"] for f in report["findings"] if f["id"].startswith("source.")}
    assert sources and set(sources.values()) == {"pass"}, sources

    rendered = run(bin_dir, env, elsewhere, "deepgreen", "render", str(package))
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert (elsewhere / "paper" / "generated" / "numbers.tex").is_file()


@pytest.mark.parametrize("argv, purpose", [
    (["paper", "datapackage.json"], "building the paper"),
    (["build", "cpp-libtorch"], "building the native stacks"),
    (["spec", "--markdown", "--check"], "writing or checking docs/spec.md"),
    (["plan"], "the relative path 'stacks/"),
])
def test_what_needs_a_checkout_says_so_in_an_installed_copy(monkeypatch, capsys, argv, purpose):
    """Verbs that build or run the stacks, or write docs/ and the paper, stop with one line."""
    from deepgreen_audit import resources
    from deepgreen_audit.cli import main

    monkeypatch.setattr(resources, "checkout", lambda: None)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert purpose in err and "needs a checkout of the project" in err, err
