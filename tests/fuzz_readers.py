"""Property-based fuzzing of the readers (issue 16): no input may end in a traceback.

Four readers, each fed inputs mutated from a corpus seeded from the shipped
package (its first run, whole, with a few of its samples):

* the CSV tables, through `validate` (and, for what it calls valid, through
  restore's reader: what validate passes every verb must read);
* the descriptor, through `validate` (which opens it);
* a run directory tree, through `flatten` (read, write, validate);
* the harness protocol, through `Session.handle`;
* a CodeCarbon log, through `import codecarbon` and its audit;
* the first campaign's source files, through `import legacy` (a small layout of its files);
* a Greenlight/FECoM experiment record, through `import greenlight`;
* file and folder names of drawn bytes (not UTF-8, controls), through `import codecarbon`,
  `validate` and `audit --logs`.

An importer refuses in one line, or writes a package its own validator accepts.

Each target accepts any outcome but an exception other than `UserError`.
`tests/test_fuzz.py` runs them briefly in CI; `scripts/fuzz.py` runs them
for as long as asked and reports the number of inputs tried.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import tempfile
import types
from collections import Counter
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st

from deepgreen_audit.cli import main as cli_main
from deepgreen_audit.collect.harness import Harness
from deepgreen_audit.collect.instruments import CounterReading
from deepgreen_audit.collect.protocol import Session
from deepgreen_audit.device.rapl import RaplReading
from deepgreen_audit.errors import BUG_EXIT, UserError
from deepgreen_audit.package import rundirs
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.schema import TABLES
from deepgreen_audit.package.tables import TextTable
from deepgreen_audit.package.validate import validate
from deepgreen_audit.package.writer import write_package
from package_edits import rehash

ROOT = Path(__file__).resolve().parents[1]
SEED_SAMPLES = 12
#: Inputs tried per target, for the fuzz script's report.
TRIED: Counter = Counter()

#: Cells and fragments that broke readers before, or could.
INTERESTING = [
    "", "\ufeff", "\n", "\r\n", "\r", '"', '""', ",", "\x00", "nan", "NaN", "inf", "-inf", "-0",
    "1e400", "-1e400", "99999999999999999999", "-9223372036854775809", "9223372036854775807",
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-02-30T00:00:00Z", "true", "TRUE",
    "../../etc", "a/b", "é", "\udcff", "\u2028", " ", "0.1000", "1.0", "01", "+1", "ab" * 32 + "\n",
    # other spellings of one number or key (issue 27: canonical cells, keys included)
    "-0.0", "0.0", "+0", "0e0", "1E2", "1e+02", "1.50", ".5", "5.", "0x10", " 1", "1 ", "1_000",
    "-512.0", "sNaN", "-sNaN", "NAN", "Infinity", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.000Z", "2026-01-01 00:00:00Z",
]


@lru_cache(maxsize=1)
def seed_folder() -> Path:
    """A small valid package made of the shipped package's first run (written once a process)."""
    shipped = Package.open(ROOT / "datapackage.json")
    first = shipped.text("runs").rows[0][0]
    tables = {}
    for name in TABLES:
        table = shipped.text(name)
        rows = [r for r in table.rows if r[0] == first]
        tables[name] = TextTable(table.header, rows[:SEED_SAMPLES] if name == "samples" else rows)
    out = Path(tempfile.mkdtemp(prefix="deepgreen-fuzz-seed-")) / "pkg"
    atexit.register(shutil.rmtree, out.parent, ignore_errors=True)  # with the tree beside it
    write_package(tables, out, shipped.meta)
    return out


@lru_cache(maxsize=1)
def seed_tree() -> Path:
    out = seed_folder().parent / "tree"
    rundirs.restore(seed_folder(), out)
    return out


# ---------------------------------------------------------------- mutations


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """`data` after one to four mutations: byte-level, line-level and cell-level."""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "cell", "line"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
        elif kind == "insert":
            piece = draw(st.one_of(st.sampled_from(INTERESTING).map(
                lambda s: s.encode("utf-8", "surrogatepass")), st.binary(max_size=8)))
            data = data[:at] + piece + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 64)):]
        elif kind == "truncate":
            data = data[:at]
        elif kind == "cell":
            data = _replace_cell(data, draw)
        else:
            lines = data.split(b"\n")
            i, j = (draw(st.integers(0, max(len(lines) - 1, 0))) for _ in range(2))
            if draw(st.booleans()):
                lines.insert(j, lines[i])
            else:
                lines.pop(i)
            data = b"\n".join(lines)
    return data


def _replace_cell(data: bytes, draw) -> bytes:
    lines = data.split(b"\n")
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    cells = lines[i].split(b",")
    k = draw(st.integers(0, len(cells) - 1))
    value = draw(st.one_of(st.sampled_from(INTERESTING), st.text(max_size=12),
                           st.integers().map(str), st.floats().map(repr)))
    cells[k] = value.encode("utf-8", "surrogatepass")
    lines[i] = b",".join(cells)
    return b"\n".join(lines)


def _json_containers(inner):
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.sampled_from(INTERESTING),
    _json_containers, max_leaves=6)


@st.composite
def mutated_json(draw, obj):
    """`obj` with one value somewhere inside replaced by another JSON value (or deleted)."""
    if isinstance(obj, (dict, list)) and obj and draw(st.integers(0, 3)):
        keys = list(obj) if isinstance(obj, dict) else list(range(len(obj)))
        key = draw(st.sampled_from(keys))
        copy = dict(obj) if isinstance(obj, dict) else list(obj)
        if draw(st.integers(0, 9)) == 0:
            del copy[key]
        else:
            copy[key] = draw(mutated_json(obj[key]))
        return copy
    return draw(JSON_VALUES)


# ---------------------------------------------------------------- targets


@contextmanager
def scratch_copy(src: Path):
    """A copy of `src` in a fresh temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        dst = Path(scratch) / src.name
        shutil.copytree(src, dst, symlinks=True)
        yield dst


def _write_mutated_json(draw, path: Path, obj) -> None:
    """`obj` mutated, written ASCII-escaped or as raw UTF-8 (lone surrogates left as bytes)."""
    text = json.dumps(draw(mutated_json(obj)), ensure_ascii=draw(st.booleans()))
    path.write_bytes(text.encode("utf-8", "surrogatepass"))


def check_package(pkg: Path) -> None:
    """validate never raises; a package it calls valid restores (run by run), round-trips
    byte for byte and types without error."""
    report = validate(pkg)
    if report.valid:
        package = Package.open(pkg)
        for _ in rundirs.restored_runs(package):
            pass
        proof = rundirs.prove_round_trip(package)
        assert proof.error is None and not proof.changes, proof
        for name in TABLES:
            package.table(name)


def fuzz_table(draw) -> None:
    """One mutated table in a copy of the seed package (re-described half the time)."""
    TRIED["csv tables"] += 1
    name = draw(st.sampled_from(TABLES))
    with scratch_copy(seed_folder()) as pkg:
        path = pkg / f"{name}.csv"
        path.write_bytes(draw(mutated(path.read_bytes())))
        if draw(st.booleans()):
            rehash(pkg)
        check_package(pkg)


def fuzz_descriptor(draw) -> None:
    """A mutated datapackage.json (as JSON, or as bytes) in a copy of the seed package."""
    TRIED["descriptor"] += 1
    with scratch_copy(seed_folder()) as pkg:
        path = pkg / "datapackage.json"
        if draw(st.booleans()):
            _write_mutated_json(draw, path, json.loads(path.read_text()))
        else:
            path.write_bytes(draw(mutated(path.read_bytes())))
        check_package(pkg)


def fuzz_run_tree(draw) -> None:
    """One mutated file of a copy of the seed run tree, through flatten (read, write, validate)."""
    TRIED["run directories"] += 1
    with scratch_copy(seed_tree()) as tree:
        path = draw(st.sampled_from(sorted(p for p in tree.rglob("*") if p.is_file())))
        if path.suffix == ".json" and draw(st.booleans()):
            try:
                obj = json.loads(path.read_text())
            except ValueError:
                obj = None
            _write_mutated_json(draw, path, obj)
        else:
            path.write_bytes(draw(mutated(path.read_bytes())))
        with contextlib.suppress(UserError):
            rundirs.flatten(tree, tree.parent / "out")


class _Counters:
    """Instruments that count up on each read: enough for the harness's bookkeeping."""

    codecarbon = None

    def __init__(self):
        self.k = 0

    def read(self):
        self.k += 1
        return CounterReading(nvml_mj=(1000 + self.k,), rapl=RaplReading((5 + self.k,), (0,)))


TOKENS = ["HELLO", "SET", "BEGIN", "END", "PING", "BYE", "1", "0", "-1", "2", "train", "eval",
          "samples=128", "loss=2.5", "loss=-", "accuracy=0.5", "learning_rate=0.0001",
          "batch_size=128", "framework=x%20y", "cudnn_available=true", "epochs=1e400",
          "loss=nan", "samples=99999999999999999999", "=", "a=b=c", "%ZZ", "\r", "é", "\x00"]


def fuzz_protocol(draw) -> None:
    """A session of lines built from protocol tokens and arbitrary text."""
    TRIED["protocol"] += 1
    session = Session(Harness(types.SimpleNamespace(read=_Counters().read, codecarbon=None)),
                      {"epochs": 2})
    line = st.one_of(
        st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6).map(" ".join),
        st.text(max_size=40),
        st.sampled_from(["HELLO 1 fuzz", "BEGIN 1 train", "END 1 train samples=1 loss=1"]))
    for text in draw(st.lists(line, min_size=1, max_size=12)):
        reply = session.handle(text)
        assert reply.startswith(("OK ", "ERR ")) and "\n" not in reply, reply
    session.failure(disconnected=True)


#: A CodeCarbon 3.x log of three runs (two cumulative rows of one), the seed of its reader's fuzz.
CODECARBON_SEED = (
    b"timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,"
    b"gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,"
    b"country_iso_code,region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,"
    b"gpu_model,ram_total_size,tracking_mode,on_cloud,pue\r\n"
    b"2025-10-02T12:57:43,p,r1,e,60.0,1e-05,1.6e-07,42.5,120.5,10.0,0.000708,0.002008,0.000166,"
    b"0.002882,Spain,ESP,catalonia,Windows-11,3.11.9,3.0.5,16,AMD Ryzen 7 8845HS,1,"
    b"1 x NVIDIA GeForce RTX 4070 Laptop GPU,15.7,machine,N,1.0\r\n"
    b"2025-10-02T12:58:43,p,r1,e,120.0,2e-05,1.6e-07,42.5,118.1,10.0,0.001416,0.003944,0.000333,"
    b"0.005693,Spain,ESP,catalonia,Windows-11,3.11.9,3.0.5,16,AMD Ryzen 7 8845HS,1,"
    b"1 x NVIDIA GeForce RTX 4070 Laptop GPU,15.7,machine,N,1.0\r\n"
    b"2025-10-02T13:10:00,p,r2,e,2.5,1e-07,4e-08,360.0,0.0,10.0,0.00025,0.0,6.9e-06,0.000257,"
    b"Spain,ESP,catalonia,Windows-11,3.11.9,3.0.7,16,AMD Ryzen 7 8845HS,,,13.8,machine,N,1.0"
)


def fuzz_codecarbon(draw) -> None:
    """A mutated CodeCarbon log through `import codecarbon` and its audit: refused in one line,
    or imported into a valid package whose checks all run without crashing."""
    TRIED["codecarbon logs"] += 1
    from deepgreen_audit.codecarbon.audit import audit_log
    from deepgreen_audit.codecarbon.importer import import_logs

    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        log = Path(scratch) / "emissions.csv"
        log.write_bytes(draw(mutated(CODECARBON_SEED)))
        try:
            import_logs([log], Path(scratch) / "pkg")
        except UserError as exc:
            assert "\n" not in str(exc), str(exc)
            return
        report, _ = audit_log(Path(scratch) / "pkg")
        crashed = [f"{f.id}: {f.message}" for f in report.findings if "crashed" in f.message]
        assert not crashed and report.finding("integrity.validate").status == "pass", crashed


#: One row of the first campaign's logs (labels, CodeCarbon's R32 columns, model, language),
#: the seed of the legacy importer's fuzz: `legacy_seed` makes a layout of it, one run a stack.
LEGACY_HEADER = ("modello,dataset,fase,epoca,timestamp,project_name,run_id,experiment_id,duration,"
                 "emissions,emissions_rate,cpu_power,gpu_power,ram_power,cpu_energy,gpu_energy,"
                 "ram_energy,energy_consumed,country_name,country_iso_code,region,cloud_provider,"
                 "cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,"
                 "gpu_model,longitude,latitude,ram_total_size,tracking_mode,on_cloud,pue,model,"
                 "language")
LEGACY_ROW = ("vgg16,tiny,{phase},{epoch},2025-09-05T17:2{epoch}:51,codecarbon,97ef24db,5b0fa12a,"
              "20.33296251401771,0.0008821741300221,4.338640419043464e-05,42.5,248.44265440570052,"
              "188.83806037902832,0.0002399442872258,0.0013614774780705,0.0010660294469814,"
              "0.0026674512122779,Italy,ITA,tuscany,,,Linux-5.15.0-142-generic-x86_64,3.10.16,"
              "2.8.4,96,Intel(R) Xeon(R) Gold 5418Y,1,1 x NVIDIA L40S,11.2516,43.7825,"
              "503.5681610107422,machine,N,1.0,vgg16,{stack}")


@lru_cache(maxsize=1)
def legacy_seed() -> Path:
    """A legacy-campaign layout of two epochs of one configuration a stack, with the stacks'
    copies of their files (what `import legacy` requires)."""
    from deepgreen_audit.importers.legacy import STACKS

    root = Path(tempfile.mkdtemp(prefix="deepgreen-fuzz-legacy-")) / "legacy"
    atexit.register(shutil.rmtree, root.parent, ignore_errors=True)
    everything = []
    for stack, (_, _, copy, _) in STACKS.items():
        rows = [LEGACY_ROW.format(phase=phase, epoch=epoch, stack=stack)
                for epoch in (1, 2) for phase in ("train", "test")]
        everything += rows
        for rel in filter(None, (f"results/data/{stack}_combined_data.csv", copy)):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("\n".join([LEGACY_HEADER, *rows]) + "\n", encoding="utf-8")
    (root / "results/data/combined_data.csv").write_text(
        "\n".join([LEGACY_HEADER, *everything]) + "\n", encoding="utf-8")
    return root


def _import_refused_or_valid(run_import, validate_output, out: Path) -> None:
    """An import refuses in one line, or what it wrote validates."""
    try:
        run_import()
    except UserError as exc:
        assert "\n" not in str(exc), str(exc)
        assert not out.exists(), "a refused import wrote its output"
        return
    assert validate_output(out).valid, validate_output(out).format_text()


def fuzz_legacy(draw) -> None:
    """One mutated source file of the legacy layout, through `import legacy`."""
    TRIED["legacy sources"] += 1
    from deepgreen_audit.importers.legacy import import_source

    with scratch_copy(legacy_seed()) as root:
        path = draw(st.sampled_from(sorted(p for p in root.rglob("*.csv"))))
        path.write_bytes(draw(mutated(path.read_bytes())))
        out = root.parent / "pkg"
        _import_refused_or_valid(lambda: import_source(root, out), validate, out)


def greenlight_seed() -> list:
    """One Greenlight record of a plausible date (tests/test_greenlight_import.py's)."""
    from test_greenlight_import import record

    return [record()]


def fuzz_greenlight(draw) -> None:
    """A mutated experiment record (as JSON, or as bytes), in a folder whose name is drawn,
    through `import greenlight`."""
    TRIED["greenlight records"] += 1
    from deepgreen_audit.greenlight.importer import import_greenlight
    from deepgreen_audit.greenlight.package import validate_api_package

    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        folder = draw(st.sampled_from(["proj", "my proj", "é", "a\tb", "..x", "-"]))
        path = Path(scratch) / "records" / "dataset" / folder / "experiment-1.json"
        path.parent.mkdir(parents=True)
        if draw(st.booleans()):
            _write_mutated_json(draw, path, greenlight_seed())
        else:
            path.write_bytes(draw(mutated(json.dumps(greenlight_seed()).encode())))
        out = Path(scratch) / "pkg"
        _import_refused_or_valid(lambda: import_greenlight(path.parents[2], out),
                                 validate_api_package, out)


# ---------------------------------------------------------------- issue 27's shapes

#: What a file of a package or run tree can be replaced by (None: left a regular file).
FILE_KINDS = ["fifo", "socket", "folder", "empty", "dev-zero", "outside", "dangling", "loop"]


def _replace_with(path: Path, kind: str) -> None:
    """Make `path` a file of another kind; a FIFO must never be opened, a device never read."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()  # the socket file stays
    elif kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "outside":
        path.symlink_to(ROOT / "datapackage.json")
    elif kind == "dangling":
        path.symlink_to(path.with_name("no-such-file"))
    else:
        path.symlink_to(path.name)  # a link to itself


def fuzz_file_types(draw) -> None:
    """A file of a package or a run tree replaced by a FIFO, a socket, a folder, a device, a
    link out or a loop, through validate, flatten and audit: refused, never a hang."""
    TRIED["file types"] += 1
    from deepgreen_audit.package.dispatch import validate_package

    src = draw(st.sampled_from([seed_folder(), seed_tree(), "foreign"]))
    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        if src == "foreign":
            root = _foreign_package(Path(scratch) / "pkg", {}, ["oslo,2.5"])
        else:
            root = Path(scratch) / src.name
            shutil.copytree(src, root, symlinks=True)
        path = draw(st.sampled_from(sorted(p for p in root.rglob("*") if p.is_file())))
        _replace_with(path, draw(st.sampled_from(FILE_KINDS)))
        if src == seed_tree():
            with contextlib.suppress(UserError):
                rundirs.flatten(root, Path(scratch) / "out")
            return
        validate_package(root)
        if src == seed_folder() and draw(st.integers(0, 3)) == 0:
            with _quiet():
                assert cli_main(["audit", str(root)]) != BUG_EXIT


#: The Table Schema constraint keywords, with values of the right and of the wrong type.
CONSTRAINTS = {"required": st.booleans(), "unique": st.booleans(),
               "minimum": st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3),
               "maximum": st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3),
               "exclusiveMinimum": st.integers(-5, 5) | st.floats(allow_nan=False),
               "exclusiveMaximum": st.integers(-5, 5) | st.floats(allow_nan=False),
               "minLength": st.integers(-1, 5), "maxLength": st.integers(-1, 5),
               "pattern": st.sampled_from(["[a-z]+", "(", "\\d*", ".*", "a{99999}"]),
               "enum": st.lists(st.sampled_from(INTERESTING) | st.integers(-2, 2), max_size=3)}


def _foreign_package(folder: Path, constraints: dict, rows: list[str]) -> Path:
    """A foreign package of one table, rain.csv (station, rain_mm), its rain_mm constrained."""
    folder.mkdir()
    (folder / "rain.csv").write_bytes(("station,rain_mm\n" + "\n".join(rows) + "\n")
                                      .encode("utf-8", "surrogatepass"))
    field = {"name": "rain_mm", "type": "number", "constraints": constraints}
    (folder / "datapackage.json").write_text(json.dumps({"name": "rainfall", "resources": [
        {"name": "rain", "path": "rain.csv", "schema": {
            "fields": [{"name": "station", "type": "string"}, field],
            "primaryKey": ["rain_mm"]}}]}), encoding="utf-8")
    return folder


def fuzz_constraints(draw) -> None:
    """A foreign package whose schema draws constraint keywords (valid or not) and whose cells
    draw other spellings of one number (keys included), through validate."""
    TRIED["schema constraints"] += 1
    from deepgreen_audit.package.dispatch import validate_package

    constraints = {key: draw(CONSTRAINTS[key]) for key in
                   draw(st.lists(st.sampled_from(sorted(CONSTRAINTS)), max_size=4, unique=True))}
    cells = st.sampled_from(INTERESTING) | st.floats().map(repr) | st.integers().map(str)
    rows = [f"s{i},{draw(cells)}" for i in range(draw(st.integers(0, 4)))]
    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        validate_package(_foreign_package(Path(scratch) / "pkg", constraints, rows))


#: Where a verb's output could land on what it reads.
OVERLAPS = ["{pkg}", "{pkg}/runs.csv", "{pkg}/datapackage.json", "{pkg}/sub", "{pkg}/..",
            "{pkg}/SHA256SUMS"]


def fuzz_outputs(draw) -> None:
    """A verb whose output is, contains or lies inside its input: refused, the input unchanged."""
    TRIED["outputs over inputs"] += 1
    with scratch_copy(seed_folder()) as pkg:
        before = {p: p.read_bytes() for p in sorted(pkg.rglob("*")) if p.is_file()}
        out = draw(st.sampled_from(OVERLAPS)).format(pkg=pkg)
        verb = draw(st.sampled_from([
            ["restore", str(pkg), "--out", out], ["export", str(pkg), "--out", out],
            ["render", str(pkg), "--out", out], ["audit", str(pkg), "--html", out],
            ["audit", str(pkg), "--junit", out], ["audit", str(pkg), "--out", out]]))
        if verb[0] != "render" and draw(st.booleans()):
            verb.append("--overwrite")
        with _quiet():
            status = cli_main(verb)
        assert status != BUG_EXIT, verb
        after = {p: p.read_bytes() for p in sorted(pkg.rglob("*")) if p.is_file()}
        assert after == before, f"{verb} changed its input"


#: Bytes a drawn file name is made of: any a Linux name may hold (not NUL, not '/'), weighted
#: towards what is not UTF-8, control characters and what a shell or a format reads.
_NAME_BYTES = st.one_of(st.integers(0x80, 0xff), st.integers(0x01, 0x1f),
                        st.sampled_from(b" .-=+@$%&\\'\"<>`{}~#\xc3\xa9"),
                        st.integers(0x01, 0xff).filter(lambda b: b != 0x2f))


def _drawn_name(draw, suffix: bytes = b"") -> str:
    """A file name of drawn bytes (held as Python holds them: surrogateescape), a name that
    exists, never '.' or '..'."""
    raw = bytes(draw(st.lists(_NAME_BYTES, min_size=1, max_size=40))) + suffix
    return os.fsdecode(b"x" + raw if raw in (b".", b"..") else raw)


def fuzz_file_names(draw) -> None:
    """A CodeCarbon log and its folder under names of drawn bytes (not UTF-8, controls, a
    leading space), through `import codecarbon`, `validate` and `audit --logs` with every
    report file: exit 0 or a one-line input error, never exit 70; what is written is UTF-8."""
    TRIED["file names"] += 1
    with tempfile.TemporaryDirectory(prefix="deepgreen-fuzz-") as scratch:
        folder = Path(scratch) / _drawn_name(draw)
        folder.mkdir()
        log = folder / _drawn_name(draw, b".csv")
        log.write_bytes(CODECARBON_SEED)
        package = Path(scratch) / _drawn_name(draw)
        report = Path(scratch) / ("r-" + _drawn_name(draw))
        source = str(draw(st.sampled_from([folder, log])))
        with _quiet():
            statuses = [cli_main(["import", "codecarbon", source, "--out", str(package)]),
                        cli_main(["audit", "--logs", source, "--html", f"{report}.html",
                                  "--junit", f"{report}.xml", "--out", f"{report}.json"])]
        assert BUG_EXIT not in statuses and set(statuses) <= {0, 1, 2}, statuses
        if statuses[0] == 0:
            with _quiet():
                assert cli_main(["validate", str(package)]) == 0
        for written in Path(scratch).rglob("*"):
            if written.is_file() and written.suffix in (".csv", ".json", ".html", ".xml") \
                    and written.parent != folder:
                written.read_bytes().decode("utf-8")  # never a raw byte of a name


@contextmanager
def _quiet():
    """A verb run in-process, its output swallowed (the fuzz report is what matters)."""
    with open(os.devnull, "w") as sink, redirect_stdout(sink), redirect_stderr(sink):
        yield


TARGETS = {"csv tables": fuzz_table, "descriptor": fuzz_descriptor,
           "run directories": fuzz_run_tree, "protocol": fuzz_protocol,
           "codecarbon logs": fuzz_codecarbon, "legacy sources": fuzz_legacy,
           "greenlight records": fuzz_greenlight, "file types": fuzz_file_types,
           "schema constraints": fuzz_constraints, "outputs over inputs": fuzz_outputs,
           "file names": fuzz_file_names}
