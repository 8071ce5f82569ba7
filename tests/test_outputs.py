"""Issue 16: outputs never destroy inputs or each other (overlap, lock, kills, full disks)."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.package import atomic, rundirs
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.validate import validate

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))
CLI = [sys.executable, "-m", "deepgreen_audit.cli"]


def leftovers(folder: Path) -> list[str]:
    """Hidden entries a writer may leave beside its output: staging folders, old outputs, locks."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def table_bytes(location) -> dict[str, bytes]:
    package = Package.open(location)
    return {name: package.table_path(name).read_bytes() for name in TABLES}


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def tree(tiny_package, tmp_path) -> Path:
    out = tmp_path / "tree"
    rundirs.restore(tiny_package, out)
    return out


# ---------------------------------------------------------------- outputs that are inputs


def test_restore_into_its_own_package_is_refused_and_the_package_survives(tiny_package, capsys):
    before = table_bytes(tiny_package)
    assert main(["restore", str(tiny_package), "--out", str(tiny_package), "--overwrite"]) == 2
    assert "would destroy what the command reads" in capsys.readouterr().err
    assert validate(tiny_package).valid and table_bytes(tiny_package) == before


@pytest.mark.parametrize("where", ["inside", "around"])
def test_restore_into_or_around_its_package_is_refused(tiny_package, where, capsys):
    out = tiny_package / "runs" if where == "inside" else tiny_package.parent
    assert main(["restore", str(tiny_package), "--out", str(out), "--overwrite"]) == 2
    assert ("lies inside" if where == "inside" else "contains") in capsys.readouterr().err
    assert validate(tiny_package).valid and not (tiny_package / "runs").exists()


def test_flatten_into_its_own_tree_is_refused_and_the_tree_survives(tree, capsys):
    before = tree_bytes(tree)
    assert main(["flatten", str(tree), "--out", str(tree), "--overwrite"]) == 2
    assert "is the input" in capsys.readouterr().err
    assert tree_bytes(tree) == before and leftovers(tree.parent) == []


def test_out_dot_is_a_one_line_refusal_and_leaves_nothing(tiny_package, monkeypatch, capsys):
    monkeypatch.chdir(tiny_package)
    before = sorted(os.listdir(tiny_package))
    assert main(["restore", ".", "--out", ".", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert sorted(os.listdir(tiny_package)) == before and leftovers(tiny_package.parent) == []


def test_out_dot_elsewhere_is_written_whole_and_leaves_nothing(tiny_package, tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["restore", str(tiny_package), "--out", ".", "--overwrite"]) == 0
    rundirs.restore(tiny_package, tmp_path / "expected")
    assert tree_bytes(here) == tree_bytes(tmp_path / "expected")
    assert leftovers(tmp_path) == []


def test_shipped_package_cannot_be_restored_over_the_project(tmp_path, capsys):
    assert main(["restore", str(ROOT / "datapackage.json"), "--out", str(ROOT / "replication"),
                 "--dry-run"]) == 2
    assert "would destroy what the command reads" in capsys.readouterr().err


# ---------------------------------------------------------------- one writer at a time


def test_a_second_writer_fails_at_once_while_the_lock_is_held(tiny_package, tmp_path, capsys):
    out = tmp_path / "runs"
    lock = atomic.OutputLock(Path(os.path.abspath(out))).acquire()
    try:
        started = time.monotonic()
        assert main(["restore", str(tiny_package), "--out", str(out)]) == 2
        assert time.monotonic() - started < 5
        assert "another deepgreen command is writing this output" in capsys.readouterr().err
    finally:
        lock.release()
    assert not out.exists() and leftovers(tmp_path) == []
    assert main(["restore", str(tiny_package), "--out", str(out)]) == 0


def test_a_folder_that_appears_meanwhile_is_not_replaced(tiny_package, tmp_path, monkeypatch, capsys):
    out = tmp_path / "runs"
    real = Path.write_bytes

    def someone_else_writes_too(path, data):
        if not out.exists():  # while restore stages its first file, another program writes OUT
            out.mkdir()
            (out / "precious.txt").write_text("theirs")
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", someone_else_writes_too)
    assert main(["restore", str(tiny_package), "--out", str(out)]) == 2
    assert "appeared while this command was writing it" in capsys.readouterr().err
    assert (out / "precious.txt").read_text() == "theirs" and os.listdir(out) == ["precious.txt"]
    assert leftovers(tmp_path) == []


def test_leftovers_of_a_killed_writer_are_cleaned_and_an_old_output_put_back(tiny_package, tmp_path):
    out = tmp_path / "runs"
    assert main(["restore", str(tiny_package), "--out", str(out)]) == 0
    expected = tree_bytes(out)
    stale = tmp_path / ".runs.k1ll3d.staged"
    (stale / "a" / "b").mkdir(parents=True)
    (stale / "a" / "b" / "manifest.json").write_text("{")
    os.rename(out, tmp_path / f".runs.{os.getpid() + 1}.old")  # killed between the two renames
    (tmp_path / ".runs.x.lock").write_text("")  # another output's lock: not ours
    (tmp_path / ".runs.other.abc.staged").mkdir()  # staging of an output named `runs.other`
    assert main(["restore", str(tiny_package), "--out", str(out)]) == 2  # the old one is back
    assert tree_bytes(out) == expected
    assert leftovers(tmp_path) == [".runs.other.abc.staged", ".runs.x.lock"]


# ---------------------------------------------------------------- outputs that hold something else


SYNTH_SMALL = ["--ecosystems", "python-pytorch", "--architectures", "resnet18", "--datasets",
               "cifar100", "--repetitions", "1", "--epochs", "1"]


def _no_work(monkeypatch) -> None:
    """Make the work of flatten and synth fail loudly: a refusal must come before it."""
    import importlib

    generate = importlib.import_module("deepgreen_audit.synth.generate")

    def work_started(*args, **kwargs):
        raise AssertionError("the command started its work before refusing its --out")

    monkeypatch.setattr(rundirs, "flatten_tables", work_started)
    monkeypatch.setattr(generate, "generate", work_started)


def _held(kind: str, folder: Path, tree: Path) -> Path:
    """A folder holding `kind`: files of the user's, a collect output folder, a run tree."""
    if kind == "other files":
        folder.mkdir()
        (folder / "thesis.tex").write_text("mine")
    elif kind == "collect output":
        (folder / "runs").mkdir(parents=True)
        (folder / "runs" / "package.json").write_text('{"name": "mycpu"}')
    else:
        import shutil

        shutil.copytree(tree, folder)
    return folder


@pytest.mark.parametrize("verb", ["flatten", "synth"])
@pytest.mark.parametrize("kind, says", [("other files", "1 unrelated file(s) or folder(s) (thesis.tex)"),
                                        ("collect output", "the collect output folder of campaign 'mycpu' (runs/package.json)"),
                                        ("run tree", "a run tree of 'tiny-test-package' (package.json)")])
@pytest.mark.parametrize("overwrite", [False, True])
def test_an_out_that_holds_something_else_is_refused_before_any_work_even_with_overwrite(
        verb, kind, says, overwrite, tree, tmp_path, monkeypatch, capsys):
    out = _held(kind, tmp_path / "out", tree)
    before = tree_bytes(out)
    _no_work(monkeypatch)
    source = [str(tree)] if verb == "flatten" else SYNTH_SMALL
    assert main([verb, *source, "--out", str(out), *(["--overwrite"] if overwrite else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out}: holds {says}, not a package: choose another --out" in err
    assert tree_bytes(out) == before and leftovers(tmp_path) == []


@pytest.mark.parametrize("verb", ["flatten", "synth"])
def test_an_existing_package_needs_overwrite_and_is_refused_before_any_work(verb, tree, tiny_package,
                                                                           monkeypatch, capsys):
    before = tree_bytes(tiny_package)
    source = [str(tree)] if verb == "flatten" else SYNTH_SMALL
    with monkeypatch.context() as patched:
        _no_work(patched)
        assert main([verb, *source, "--out", str(tiny_package)]) == 2
    assert (f"{tiny_package}: already exists and holds a package (datapackage.json: "
            "'A tiny hand-written package for tests'); pass --overwrite to replace it") in capsys.readouterr().err
    assert tree_bytes(tiny_package) == before
    assert main([verb, *source, "--out", str(tiny_package), "--overwrite"]) == 0
    assert validate(tiny_package).valid   # replaced: flatten's round trip, or synth's package
    assert (tiny_package / "synth-truth.json").exists() == (verb == "synth")


def test_overwrite_replaces_a_descriptor_only(tree, tmp_path, monkeypatch, capsys):
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n')
    _no_work(monkeypatch)
    assert main(["flatten", str(tree), "--out", str(tmp_path / "flat"), "--descriptor", str(notes),
                 "--overwrite"]) == 2
    assert "notes.json: is not a package descriptor" in capsys.readouterr().err
    assert notes.read_text() == '{"mine": true}\n' and not (tmp_path / "flat").exists()


# ---------------------------------------------------------------- full disks, read-only folders


def _fail_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


def test_a_full_disk_is_one_line_and_leaves_nothing(tiny_package, tmp_path, monkeypatch, capsys):
    out = tmp_path / "runs"
    monkeypatch.setattr(Path, "write_bytes", _fail_with(errno.ENOSPC))
    assert main(["restore", str(tiny_package), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "[write-error]" not in err
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_read_only_target_is_one_line_and_leaves_nothing(tree, tmp_path, monkeypatch, capsys):
    out = tmp_path / "pkg-out"
    make_folder = os.mkdir

    def staging_refused(path, *args, **kwargs):   # the file system refuses the staging folder
        if str(path).endswith(atomic.STAGED_SUFFIX):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return make_folder(path, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "mkdir", staging_refused)
    assert main(["flatten", str(tree), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Read-only file system" in err.splitlines()[-1]
    assert not out.exists() and list(leftovers(tmp_path)) == []


def test_a_read_only_descriptor_target_is_one_line(tree, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(atomic.tempfile, "mkstemp", _fail_with(errno.EACCES))
    assert main(["flatten", str(tree), "--out", str(tmp_path / "p"),
                 "--descriptor", str(tmp_path / "d" / "datapackage.json")]) == 2
    assert "Permission denied" in capsys.readouterr().err


# ---------------------------------------------------------------- SIGTERM, SIGKILL, concurrency


@pytest.fixture(scope="module")
def medium_package(tmp_path_factory) -> Path:
    """42 runs of 4 epochs (about 250 files restored): long enough to be killed mid-write."""
    out = tmp_path_factory.mktemp("medium") / "pkg"
    assert main(["synth", "--out", str(out), "--repetitions", "1", "--epochs", "4"]) == 0
    return out


def _start(*args) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *map(str, args)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_staging(folder: Path, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.endswith(atomic.STAGED_SUFFIX) for p in folder.iterdir()):
            return True
        time.sleep(0.002)
    return False


def test_sigterm_removes_the_staging_folder(medium_package, tmp_path):
    proc = _start("restore", medium_package, "--out", tmp_path / "runs")
    if not _wait_for_staging(tmp_path, proc):
        pytest.skip("the restore finished before it could be terminated")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    if proc.returncode == 0:
        pytest.skip("the restore finished before the signal arrived")
    assert proc.returncode == 128 + signal.SIGTERM and "terminated; nothing was half-written" in err
    assert "Traceback" not in err and leftovers(tmp_path) == [] and not (tmp_path / "runs").exists()


def test_sigkill_at_random_points_leaves_the_old_state_or_the_new(medium_package, tmp_path):
    """20 restores and 20 flattens killed at random: the target is absent or complete and valid,
    and the next run cleans what the killed one left."""
    rng = random.Random(16)
    expected_tables = table_bytes(medium_package)
    source_tree = tmp_path / "source-tree"
    rundirs.restore(medium_package, source_tree)
    expected_tree = tree_bytes(source_tree)
    mid_write = 0
    for verb in ("restore", "flatten"):
        work = tmp_path / verb
        work.mkdir()
        source = medium_package if verb == "restore" else source_tree
        started = time.monotonic()
        assert subprocess.run([*CLI, verb, str(source), "--out", str(work / "calibrate")], env=ENV,
                              capture_output=True).returncode == 0
        duration = time.monotonic() - started
        for i in range(20):
            target = work / f"out{i}"
            proc = _start(verb, source, "--out", target)
            time.sleep(rng.uniform(0.3, 1.1) * duration)
            proc.kill()
            proc.communicate()
            mid_write += any(n.startswith(f".{target.name}.") for n in leftovers(work))
            if target.exists():
                if verb == "restore":
                    assert tree_bytes(target) == expected_tree
                else:
                    assert validate(target).valid and table_bytes(target) == expected_tables
            assert main([verb, str(source), "--out", str(target), "--overwrite"]) == 0
            assert [n for n in leftovers(work) if n.startswith(f".{target.name}.")] == []
    assert mid_write > 0, "no kill landed while a writer was staging: the test tested nothing"


#: The command line on a disk that stalls for 0.3 s at its first write, so that a writer is
#: caught mid-write however fast it writes (synth stages its files in about a millisecond).
STALLING_DISK_CLI = [sys.executable, "-c", """
import pathlib, sys, time
from deepgreen_audit.cli import main
def stalled_once(write):
    def first_write_stalls(self, *args, **kwargs):
        pathlib.Path.write_bytes, pathlib.Path.write_text = write_bytes, write_text
        time.sleep(0.3)
        return write(self, *args, **kwargs)
    return first_write_stalls
write_bytes, write_text = pathlib.Path.write_bytes, pathlib.Path.write_text
pathlib.Path.write_bytes = stalled_once(write_bytes)
pathlib.Path.write_text = stalled_once(write_text)
sys.exit(main(sys.argv[1:]))
"""]


def _frozen_mid_write(argv: list, out: Path) -> subprocess.Popen | None:
    """A writer started and stopped (SIGSTOP) while it holds the output's lock, or None if
    it finished before it could be caught."""
    lock = out.with_name(f".{out.name}.lock")
    proc = subprocess.Popen([*STALLING_DISK_CLI, *map(str, argv)], env=ENV, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        if lock.exists():
            proc.send_signal(signal.SIGSTOP)
            if any(p.name.endswith(atomic.STAGED_SUFFIX) for p in out.parent.iterdir()):
                return proc
            proc.send_signal(signal.SIGCONT)
    proc.communicate()
    return None


@pytest.mark.parametrize("verb", ["restore", "flatten", "synth"])
def test_two_writers_into_one_out_one_wins_one_says_why(verb, medium_package, tmp_path):
    """The first writer is frozen mid-write; the second, run meanwhile, must fail at once with a
    message and write nothing; the first then finishes, and its output is whole."""
    source_tree = tmp_path / "source-tree"
    if verb == "flatten":
        rundirs.restore(medium_package, source_tree)
    out = tmp_path / "out"
    argv = {"restore": ["restore", medium_package], "flatten": ["flatten", source_tree],
            "synth": ["synth", "--repetitions", "1", "--epochs", "4"]}[verb] + ["--out", out]
    for _ in range(10):
        first = _frozen_mid_write(argv, out)
        if first is not None:
            break
        atomic.shutil.rmtree(out)
    else:
        pytest.fail("could not catch a writer while it held its lock in 10 tries")
    try:
        second = subprocess.run([*CLI, *map(str, argv)], env=ENV, cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=120) == 0, first.communicate()
    assert second.returncode == 2, second.stderr
    assert "another deepgreen command is writing this output now" in second.stderr
    assert "Traceback" not in second.stderr
    if verb == "restore":
        rundirs.restore(medium_package, tmp_path / "expected")
        assert tree_bytes(out) == tree_bytes(tmp_path / "expected")
    else:
        assert validate(out).valid and table_bytes(out) == table_bytes(medium_package)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("source", ["legacy", "greenlight"])
def test_an_import_into_its_own_source_is_refused(source, tmp_path, capsys):
    """An --out inside the records is refused before any write (on a temporary copy of them)."""
    import shutil

    from conftest import SHARED

    original = SHARED / ("legacy-campaign" if source == "legacy" else "greenlight")
    if not original.is_dir():
        pytest.skip(f"{original} is not here")
    folder = shutil.copytree(original, tmp_path / original.name)
    assert main(["import", source, str(folder), "--out", str(folder / "pkg")]) == 2
    assert "would destroy what the command reads" in capsys.readouterr().err
    assert not (folder / "pkg").exists()


@pytest.mark.parametrize("verb", ["flatten", "synth"])
def test_an_out_that_is_a_file_is_refused_even_with_overwrite(verb, tree, tmp_path, monkeypatch,
                                                               capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    _no_work(monkeypatch)
    source = [str(tree)] if verb == "flatten" else SYNTH_SMALL
    assert main([verb, *source, "--out", str(notes), "--overwrite"]) == 2
    assert f"{notes}: is a file, not a folder" in capsys.readouterr().err
    assert notes.read_text() == "mine"
