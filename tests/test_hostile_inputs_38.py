"""Issue 38: the last hostile-input classes, each closed at its root (the input side; the
output-safety layer has its own tests).

Every verb that takes a path reads a name of any bytes the OS allows and shows it escaped;
special files are refused by name, never opened; writers publish exclusively and remove what
a failed run created; refusals of bad input are input errors (exit 2) worded as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit.cli import main
from deepgreen_audit.errors import path_text
from test_codecarbon_logs import clean, write_log
from test_greenlight_import import record

ROOT = Path(__file__).resolve().parents[1]


def _clean(capsys) -> tuple[str, str]:
    """stdout and stderr of the verbs just run, asserted free of tracebacks, internal errors
    and lone surrogates (a name's byte printed neither raw nor escaped)."""
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert "Traceback" not in both and "internal error" not in both, both
    assert not any("\ud800" <= c <= "\udfff" for c in both), both
    return captured.out, captured.err


def _name(tmp_path: Path, raw: bytes) -> Path:
    """`tmp_path` / the file name of bytes `raw` (held as Python holds it: surrogateescape)."""
    return tmp_path / os.fsdecode(raw)


def _assert_utf8_mentioning(path: Path, shown: str) -> str:
    text = path.read_bytes().decode("utf-8")  # strict: no raw byte, no encoded surrogate
    assert shown in text or json.dumps(shown)[1:-1] in text, (path, shown)
    return text


# ---------------------------------------------------------------- 5. names that are not UTF-8

#: Byte strings Linux allows in a name that are not UTF-8: a lone 0xff, Latin-1 text, bare
#: continuation bytes, a truncated two-byte sequence, an overlong encoding of '/'.
NOT_UTF8_NAMES = [b"log\xff", b"\xe9t\xe9", b"\x80\x81x", b"caf\xc3", b"a\xc0\xafb"]


@pytest.mark.parametrize("raw", NOT_UTF8_NAMES, ids=[n.hex() for n in NOT_UTF8_NAMES])
def test_a_name_that_is_not_utf8_is_read_and_shown_escaped(raw, tmp_path, capsys):
    """import codecarbon (a folder and a file), audit --logs with every report file, validate,
    audit and export of the package: exit 0, every output UTF-8 with the name's bytes as
    `\\xNN`, and the name shown so on the terminal."""
    folder = _name(tmp_path, b"logs-" + raw)
    log = write_log(_name(folder, raw + b".csv"), "3.x", clean("3.x"))
    shown = path_text(log.name)
    assert "\\x" in shown
    package = _name(tmp_path, b"pkg-" + raw)
    for source in (folder, log):
        assert main(["import", "codecarbon", str(source), "--out", str(package),
                     "--overwrite"]) == 0
        out, _ = _clean(capsys)
        assert shown in out and path_text(package) in out
    reports = {kind: _name(tmp_path, raw + b"." + kind.encode()) for kind in ("html", "json")}
    reports["junit"] = _name(tmp_path, raw + b".xml")
    for audited in (["--logs", str(folder)], ["--logs", str(log)], [str(package)]):
        status = main(["audit", *audited, "--html", str(reports["html"]), "--junit",
                       str(reports["junit"]), "--out", str(reports["json"]), "--overwrite"])
        assert status == 0
        _, err = _clean(capsys)
        assert path_text(reports["html"]) in err
        _assert_utf8_mentioning(reports["html"], shown)
        _assert_utf8_mentioning(reports["json"], shown)
        _assert_utf8_mentioning(reports["junit"], path_text(audited[-1]))
        json.loads(reports["json"].read_text(encoding="utf-8"))
    assert main(["validate", str(package)]) == 0
    assert shown in _clean(capsys)[0]
    assert main(["export", str(package), "--parquet", "--out",
                 str(_name(tmp_path, b"parquet-" + raw))]) == 0
    _clean(capsys)


@pytest.mark.parametrize("raw", NOT_UTF8_NAMES[:3], ids=[n.hex() for n in NOT_UTF8_NAMES[:3]])
def test_greenlight_records_under_a_name_that_is_not_utf8_import(raw, tmp_path, capsys):
    root = _name(tmp_path, b"records-" + raw)
    project = _name(root / "dataset", b"proj-" + raw)
    project.mkdir(parents=True)
    (project / "experiment-1.json").write_text(json.dumps([record()]), encoding="utf-8")
    package = _name(tmp_path, b"pkg-" + raw)
    assert main(["import", "greenlight", str(root), "--out", str(package)]) == 0
    assert path_text(package) in _clean(capsys)[0]
    calls = (package / "api_calls.csv").read_bytes().decode("utf-8")
    assert path_text(project.name) in calls
    assert main(["validate", str(package)]) == 0
    assert main(["api-audit", str(package)]) == 0
    _clean(capsys)


@pytest.mark.parametrize("raw", [b"missing\xff", b"\xfe\xfe/x"])
def test_a_missing_input_named_in_bytes_is_one_escaped_line(raw, tmp_path):
    """As the program prints it, in a process of its own: the name escaped on stderr, exit 2."""
    missing = os.fsdecode(bytes(tmp_path) + b"/" + raw)
    for verb in (["import", "codecarbon", missing, "--out", str(tmp_path / "p")],
                 ["audit", "--logs", missing], ["import", "greenlight", missing, "--out",
                                                str(tmp_path / "p")]):
        done = subprocess.run([sys.executable, "-m", "deepgreen_audit", *verb], cwd=ROOT,
                              capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
        assert done.returncode == 2, done.stderr
        err = done.stderr.decode("utf-8")
        assert err.count("\n") == 1 and path_text(missing) in err, err


# ---------------------------------------------------------------- 6. special files in a folder

def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    """A socket file at `path`: bound under a short name (a socket's path is at most 107 bytes,
    which a test's temporary folder may exceed) and moved there, as a file of its own."""
    import socket
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as short:
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(os.path.join(short, "s"))  # the file stays after the socket closes
        os.rename(os.path.join(short, "s"), path)


#: What may lie in an input folder under a name the folder's glob matches, and how the refusal
#: names it.  None of them is ever opened (a FIFO's open would block until a writer comes).
SPECIAL_FILES = {
    "FIFO": (_fifo, "a FIFO (named pipe)"),
    "link to /dev/zero": (lambda p: p.symlink_to("/dev/zero"), "a character device (a symbolic"),
    "link to /dev/null": (lambda p: p.symlink_to("/dev/null"), "a character device (a symbolic"),
    "socket": (_socket, "a socket"),
    "dangling link": (lambda p: p.symlink_to(p.parent / "nowhere"), "a symbolic link to nothing"),
    "link to itself": (lambda p: p.symlink_to(p), "a symbolic link to nothing"),
}


def _run_bounded(args: list[str]) -> subprocess.CompletedProcess:
    """The program in a process of its own, stopped after a minute: a hang fails the test."""
    return subprocess.run([sys.executable, "-m", "deepgreen_audit", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def _greenlight_root(tmp_path: Path) -> Path:
    project = tmp_path / "records" / "dataset" / "proj"
    project.mkdir(parents=True)
    (project / "experiment-1.json").write_text(json.dumps([record()]), encoding="utf-8")
    return tmp_path / "records"


@pytest.mark.parametrize("special", list(SPECIAL_FILES))
def test_a_special_file_in_an_input_folder_is_refused_by_name(special, tmp_path, capsys):
    """codecarbon logs (a folder, the file named), greenlight records and published summaries:
    exit 2, one line naming the file and what it is, nothing written; no hang."""
    make, said = SPECIAL_FILES[special]
    logs = tmp_path / "logs"
    write_log(logs / "a.csv", "3.x", clean("3.x"))
    make(logs / "b.csv")
    records = _greenlight_root(tmp_path)
    make(records / "dataset" / "proj" / "experiment-2.json")
    summaries = _greenlight_root(tmp_path / "s")
    make(summaries / "dataset" / "cpu_summary_mean.csv")
    cases = [(["import", "codecarbon", str(logs), "--out", str(tmp_path / "pkg")], logs / "b.csv"),
             (["audit", "--logs", str(logs)], logs / "b.csv"),
             (["audit", "--logs", str(logs / "b.csv")], logs / "b.csv"),
             (["import", "greenlight", str(records), "--out", str(tmp_path / "pkg")],
              records / "dataset" / "proj" / "experiment-2.json"),
             (["import", "greenlight", str(summaries), "--out", str(tmp_path / "pkg")],
              summaries / "dataset" / "cpu_summary_mean.csv")]
    for args, named in cases:
        if special == "FIFO":  # a process of its own: were it opened, the test would hang
            done = _run_bounded(args)
            status, err = done.returncode, done.stderr
        else:
            status, err = main(args), _clean(capsys)[1]
        assert status == 2, (args, err)
        assert err.count("\n") == 1 and f"{named}: " in err and said in err, err
        assert "Traceback" not in err and not (tmp_path / "pkg").exists(), args


# ---------------------------------------------------------------- 8. concurrent writers

@pytest.mark.parametrize("option, name", [("--html", "page.html"), ("--junit", "report.xml"),
                                          ("--out", "report.json")])
def test_two_audits_writing_one_report_at_once_one_wins(option, name, tmp_path):
    """Two `audit --logs` started together onto one report file without --overwrite: exactly
    one writes it and exits 0; the other exits 2 in one line, the winner's file intact."""
    log = write_log(tmp_path / "logs" / "a.csv", "3.x", clean("3.x"))
    target = tmp_path / "out" / name
    command = [sys.executable, "-m", "deepgreen_audit", "audit", "--logs", str(log), option,
               str(target)]
    runs = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = sorted((run.wait(timeout=120), run.stderr.read()) for run in runs)
    assert [status for status, _ in results] == [0, 2], results
    loser = results[1][1]
    assert loser.count("\n") == 1 and f"{target}: " in loser, loser
    assert "appeared while this command was writing it" in loser or "already exists" in loser
    assert target.read_bytes() and not [p for p in target.parent.iterdir() if p != target]


def test_a_file_published_without_overwrite_never_replaces_one_that_appeared(tmp_path):
    """The mechanism under the test above, on each file kind a writer stages."""
    from deepgreen_audit.errors import UserError
    from deepgreen_audit.package import atomic

    for data in (b"first", b"", "\u00e9".encode() * 1000):
        target = tmp_path / f"t{len(data)}"
        first, second = atomic.stage_file(target, data), atomic.stage_file(target, b"second")
        atomic.commit_file(first, target, overwrite=False)
        with pytest.raises(UserError, match="appeared while"):
            atomic.commit_file(second, target, overwrite=False)
        assert target.read_bytes() == data and not second.exists() and not first.exists()
        atomic.write_bytes(target, b"third")  # --overwrite replaces it
        assert target.read_bytes() == b"third"


# ---------------------------------------------------------------- 9. leftovers

def _refused_greenlight(tmp_path: Path) -> list[str]:
    project = tmp_path / "records" / "dataset" / "proj"
    project.mkdir(parents=True)
    dated_2128 = record(times__start_time_execution=5_000_000_000 * 10**9,
                        times__end_time_execution=5_000_000_001 * 10**9)
    (project / "experiment-1.json").write_text(json.dumps([dated_2128]), encoding="utf-8")
    return ["import", "greenlight", str(tmp_path / "records"), "--out"]


def _refused_codecarbon(tmp_path: Path) -> list[str]:
    """A log the staged package's validation refuses (its name starts with a space)."""
    write_log(tmp_path / "logs" / " a.csv", "3.x", clean("3.x"))
    return ["import", "codecarbon", str(tmp_path / "logs"), "--out"]


def _audit_onto_a_folder(tmp_path: Path) -> list[str]:
    """The JSON report is written first; the page's path is a folder, so the audit fails."""
    write_log(tmp_path / "logs" / "a.csv", "3.x", clean("3.x"))
    (tmp_path / "keep" / "a-folder").mkdir(parents=True)
    return ["audit", "--logs", str(tmp_path / "logs"), "--overwrite", "--html",
            str(tmp_path / "keep" / "a-folder"), "--out"]


FAILING_WRITERS = {"import greenlight": _refused_greenlight,
                   "import codecarbon": _refused_codecarbon,
                   "audit": _audit_onto_a_folder}


@pytest.mark.parametrize("writer", list(FAILING_WRITERS))
@pytest.mark.parametrize("depth", [1, 3])
def test_a_failed_command_removes_the_folders_it_made(writer, depth, tmp_path, capsys):
    """Exit 2, and the folder that held the output before (`keep`) holds what it held: the
    folders the command made on the way to its output are gone, the ones that were there stay."""
    args = FAILING_WRITERS[writer](tmp_path)
    keep = tmp_path / "keep"
    keep.mkdir(exist_ok=True)
    before = sorted(keep.rglob("*"))
    out = keep.joinpath(*[f"new{i}" for i in range(depth)], "out.json")
    assert main([*args, str(out)]) == 2
    _clean(capsys)
    assert sorted(keep.rglob("*")) == before


def test_a_failed_staging_leaves_no_folder_it_made(tmp_path, monkeypatch):
    """The writers' common parts, failing where a full disk or a signal would stop them."""
    from deepgreen_audit.errors import UserError
    from deepgreen_audit.package import atomic

    with pytest.raises(RuntimeError), atomic.StagedDirectory(tmp_path / "a" / "b" / "pkg") as s:
        (s.path / "table.csv").write_text("x")
        raise RuntimeError("stopped while staging")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(UserError, match="cannot write"):
        atomic.write_bytes(tmp_path / "c" / "d" / "file", b"data")
    with pytest.raises(UserError, match="cannot write"):
        atomic.write_files({tmp_path / "e" / "f": lambda: b"1"}, overwrite=False)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- 10. messages that mislead

@pytest.mark.parametrize("name", [" a.csv", "\ta.csv", " .csv", "  two spaces.csv"])
def test_a_log_the_schema_refuses_is_an_input_error_not_a_bug(name, tmp_path, capsys):
    """The staged package's validation refuses what the log holds (here its name): exit 2,
    one line naming the log and line, never "a bug in the importer"; nothing written."""
    write_log(tmp_path / "logs" / name, "3.x", clean("3.x"))
    assert main(["import", "codecarbon", str(tmp_path / "logs"), "--out",
                 str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)[1]
    assert err.count("\n") == 1 and "a bug" not in err and "nothing was written" in err
    assert f"{tmp_path / 'logs' / name}, row 2: " in err and not (tmp_path / "pkg").exists()


#: Cells that span lines, ahead of the row a message or a source_line names: (row index of the
#: spanning cell, its text).
SPANNING = [(0, "two\nlines"), (0, "three\n\nlines"), (1, "a\n\nb\n"), (2, "x\ny\nz\nw")]


def _spanning_log(tmp_path: Path, spans: list[tuple[int, str]]) -> tuple[Path, list[int]]:
    """A 3.x log whose project_name cells span lines; the line each row starts on."""
    rows = clean("3.x", n=5)
    for index, text in spans:
        rows[index]["project_name"] = '"' + text + '"'
    path = write_log(tmp_path / "logs" / "a.csv", "3.x", rows)
    starts, line = [], 2
    for r in rows:
        starts.append(line)
        line += 1 + r["project_name"].count("\n")
    return path, starts


@pytest.mark.parametrize("span", SPANNING, ids=range(len(SPANNING)))
def test_a_rows_source_line_is_where_it_starts_after_a_cell_that_spans_lines(span, tmp_path):
    """codecarbon: each row's source_line, and the line a torn row is named by."""
    import csv as csv_module
    import io

    path, starts = _spanning_log(tmp_path, [span])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("torn,row\n")
    assert main(["import", "codecarbon", str(path), "--out", str(tmp_path / "pkg")]) == 0
    table = (tmp_path / "pkg" / "codecarbon_log.csv").read_text(encoding="utf-8")
    lines = [int(r["source_line"]) for r in csv_module.DictReader(io.StringIO(table))]
    assert lines == starts
    sources = json.loads((tmp_path / "pkg" / "codecarbon-sources.json").read_text())
    [torn] = sources["sources"][0]["rejected_rows"]
    assert torn["line"] == path.read_bytes().count(b"\n")


@pytest.mark.parametrize("span_line", [2, 3, 5])
def test_a_legacy_refusal_names_the_line_the_row_starts_on(span_line, tmp_path, capsys):
    """import legacy: a bad value below a cell that spans lines is named by its own line."""
    import csv as csv_module
    import io
    import shutil

    from conftest import shared_data

    root = tmp_path / "legacy"
    shutil.copytree(shared_data("legacy-campaign"), root)
    path = root / "results/data/pytorch_combined_data.csv"
    rows = list(csv_module.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    rows[span_line - 1][rows[0].index("project_name")] = "code\ncarbon\nthesis"
    rows[7][rows[0].index("duration")] = "twelve"  # the row that starts on line 8 + 2
    out = io.StringIO()
    csv_module.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    assert main(["import", "legacy", str(root), "--out", str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)[1]
    assert "pytorch_combined_data.csv, row 10, column 'duration'" in err, err


# ---------------------------------------------------------------- 10, 11. runs that never completed

def _run_tree(tmp_path: Path) -> Path:
    """A run tree of the real collection's package, restored."""
    tree = tmp_path / "tree"
    assert main(["restore", str(ROOT / "tests/data/collected/cpu-no-counters"), "--out",
                 str(tree)]) == 0
    return tree


def _empty_campaign(tree: Path) -> Path:
    campaign = next(p for p in tree.iterdir() if p.is_dir())
    for run in campaign.iterdir():
        for file in run.iterdir():
            file.unlink()
        run.rmdir()
    return campaign


def _empty_run_folder(tree: Path) -> Path:
    campaign = next(p for p in tree.iterdir() if p.is_dir())
    (campaign / "python-pytorch.resnet18.digits.r9").mkdir()
    return campaign / "python-pytorch.resnet18.digits.r9"


def _no_campaign(tree: Path) -> Path:
    campaign = _empty_campaign(tree)
    campaign.rmdir()
    return tree


def _empty_run_folder_deeper(tree: Path) -> Path:
    run = next(next(p for p in tree.iterdir() if p.is_dir()).iterdir())
    (run / "extra").mkdir()
    return run / "extra"


NO_COMPLETED_RUN = {
    "campaign folder, no run": (_empty_campaign, "no run of this campaign completed"),
    "no campaign folder": (_no_campaign, "no run completed, so there is nothing to flatten"),
    "empty run folder beside runs": (_empty_run_folder, "not a completed run"),
    "empty folder in a run": (_empty_run_folder_deeper, "is an empty folder"),
}


@pytest.mark.parametrize("case", list(NO_COMPLETED_RUN))
def test_a_run_that_never_completed_is_named_not_flattened(case, tmp_path, capsys):
    """An empty folder in a run tree (a campaign none of whose runs completed, a run folder
    without its files) is refused in one line naming it, never an empty or short package."""
    tree = _run_tree(tmp_path)
    damage, said = NO_COMPLETED_RUN[case]
    named = damage(tree)
    _clean(capsys)
    assert main(["flatten", str(tree), "--out", str(tmp_path / "pkg")]) == 2
    err = _clean(capsys)[1]
    assert err.count("\n") == 1 and f"{named}: " in err and said in err, err
    assert not (tmp_path / "pkg").exists()


# ---------------------------------------------------------------- 11. still open from the second set

@pytest.mark.parametrize("name", [["runs"], ["a", "b"], {"name": "runs"}, [["runs"]], 5, True])
def test_a_resource_name_that_is_not_text_is_a_finding(name, tmp_path, capsys):
    """A foreign package whose resource is named by a JSON list, object, number or boolean:
    validate reports it (exit 1) and every other verb refuses the package; never exit 70."""
    (tmp_path / "a.csv").write_text("x\n1\n", encoding="utf-8")
    (tmp_path / "datapackage.json").write_text(json.dumps({"name": "x", "resources": [
        {"name": name, "path": "a.csv", "schema": {"fields": [{"name": "x", "type": "integer"}]}}]}))
    assert main(["validate", str(tmp_path)]) == 1
    out, _ = _clean(capsys)
    words = " ".join(out.split())   # the report wraps its lines to the terminal's width
    assert "resource 1's name is a JSON" in words and "not a string" in words
    for verb in (["audit"], ["export", "--parquet", "--out", str(tmp_path / "x")],
                 ["compare", str(tmp_path)], ["restore", "--out", str(tmp_path / "r")]):
        assert main([verb[0], str(tmp_path), *verb[1:]]) in (1, 2), verb
        _clean(capsys)


def _frame(values: list[float]) -> str:
    return json.dumps({"columns": ["time_elapsed", "energy (J)"], "index": list(range(len(values))),
                       "data": [[0.5 * (i + 1), v] for i, v in enumerate(values)]})


def _gpu(values: list[float]) -> str:
    return json.dumps({"columns": ["timestamp", "power_draw (W)", "time_elapsed", "temperature"],
                       "index": list(range(len(values))),
                       "data": [[1.0 + 0.5 * i, v, 0.5 * (i + 1), 30] for i, v in enumerate(values)]})


OVERFLOWING_RECORDS = {
    "cpu energies near the largest double": dict(energy_data__cpu=_frame([1.7e308] * 4)),
    "ram energies near the largest double": dict(energy_data__ram=_frame([1.7e308] * 4)),
    "ten cpu energies of 1e308": dict(energy_data__cpu=_frame([1e308] * 10)),
    "a sampling interval of 1e308 s": dict(settings__measurement_interval_s=1e308),
    "gpu powers x interval past a double": dict(energy_data__gpu=_gpu([1.7e308] * 3),
                                                settings__measurement_interval_s=2.0),
}


@pytest.mark.parametrize("case", list(OVERFLOWING_RECORDS))
def test_greenlight_numbers_whose_figures_overflow_are_refused(case, tmp_path, capsys):
    """Exit 2 naming the record and the figure, no numpy warning, nothing written."""
    import warnings

    project = tmp_path / "records" / "dataset" / "proj"
    project.mkdir(parents=True)
    (project / "experiment-1.json").write_text(json.dumps([record(**OVERFLOWING_RECORDS[case])]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        status = main(["import", "greenlight", str(tmp_path / "records"), "--out",
                       str(tmp_path / "pkg")])
    err = _clean(capsys)[1]
    assert status == 2 and err.count("\n") == 1, err
    named = tmp_path / "records" / "dataset" / "proj" / "experiment-1.json"
    assert f"{named}: record 1" in err and "1.8e308" in err and "RuntimeWarning" not in err
    assert not (tmp_path / "pkg").exists()
