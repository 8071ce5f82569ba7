"""The one command-line entry point, `deepgreen`; thin: parsing and printing only.

Each verb calls one library function.  Problems with the user's input are
`UserError`s, printed as one line naming the file, row and column, with a
non-zero exit and no traceback.  Any other exception is a bug: one line that
says so and exit status 70 (`errors.BUG_EXIT`), never a stack trace unless
DEEPGREEN_TRACEBACK=1 asks for it.  SIGTERM unwinds like Ctrl-C, so an
interrupted write removes its staging folder.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m deepgreen_audit.cli`: Ctrl-C exits 130 from here on
    from deepgreen_audit.program import quiet_interrupt

    quiet_interrupt()

import argparse
import errno
import io
import os
import signal
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TextIO, cast

from deepgreen_audit import __version__
from deepgreen_audit.console import (
    HelpFormatter,
    LazyChoicesAppend,
    Parser,
    examples_epilog,
    positive_int,
    strict_option,
)
from deepgreen_audit.errors import BUG_EXIT, EXIT_CODES, NAME_BYTES, USAGE_EXIT, Terminated, UserError
from deepgreen_audit.program import interrupts_raise
from deepgreen_audit.safe import TerminalStream, json_text


def exit_code_lines() -> list[str]:
    """The exit-code table (errors.EXIT_CODES) as `deepgreen --help` prints it."""
    return [textwrap.fill(meaning, 79, initial_indent=f"  {code:<4}", subsequent_indent=" " * 6)
            for code, meaning in EXIT_CODES]


EPILOG = """\
The replication package is four tables (runs, blocks, samples, environment)
plus SHA256SUMS, described by datapackage.json, which declares the package's
kind (deepgreen:package: replication, api-profiles for the API-level
package of 'import greenlight', or codecarbon-log for anyone's CodeCarbon
logs of 'import codecarbon'); each verb says when it does not apply to a
kind. PKG is a folder holding datapackage.json, or the descriptor itself; by
default the shipped package described by ./datapackage.json.

exit codes (every verb; validate, audit, api-audit, parity and preflight alike):
""" + "\n".join(exit_code_lines()) + """

""" + examples_epilog([
    ("deepgreen validate", "check the shipped package"),
    ("deepgreen restore datapackage.json --out runs/", "back to run directories"),
    ("deepgreen flatten runs/ --out pkg/", "and those into a package"),
    ("deepgreen audit examples/first-campaign", "audit the first campaign (exit 1)")])


def _say(text: str = "") -> None:
    print(text, flush=True)


def _progress(done: int, total: int, label: str) -> None:
    if done == total or done % max(1, total // 10) == 0:
        print(f"  [{done}/{total}] {label}", file=sys.stderr, flush=True)


def _notice_for(location) -> None:
    from deepgreen_audit.package.descriptor import Package

    try:
        notice = Package.open(location).notice()
    except UserError:
        return
    if notice:
        _say(notice)


# ---------------------------------------------------------------- verbs


def cmd_validate(args) -> int:
    from deepgreen_audit.package.dispatch import validate_package

    report = validate_package(args.package, hide_pandas=args.owns_process)
    if args.json:
        _say(report.to_json())
        return report.exit_status(args.strict)
    _say(report.format_text())
    if report.valid:
        stats = report.stats
        tables = stats["tables"]
        _say("  " + "   ".join(f"{name}: {stats[name]['rows']:,}" for name in tables))
        checked = (f"checked by {stats['checked_by']} (a package not of a deepgreen kind)"
                   if "checked_by" in stats else "SHA256SUMS and descriptor hashes match")
        _say(f"  kind: {stats['kind']}; bytes: {stats['bytes']:,} in {len(tables)} "
             f"table{'' if len(tables) == 1 else 's'}; {checked}")
        prov = stats.get("provenance", {})
        if prov.get("title"):
            _say(f"  title: {prov['title']}")
        if prov.get("provenance"):
            _say("  provenance: " + json_text(prov["provenance"], indent=None))
    return report.exit_status(args.strict)


def cmd_flatten(args) -> int:
    from deepgreen_audit.package.rundirs import flatten

    path = flatten(Path(args.runs), Path(args.out), overwrite=args.overwrite,
                   descriptor_path=Path(args.descriptor) if args.descriptor else None,
                   progress=_progress)
    _notice_for(path)
    _say(f"wrote {args.out} (described by {path})")
    return 0


def cmd_restore(args) -> int:
    from deepgreen_audit.package.dispatch import check_verb
    from deepgreen_audit.package.rundirs import restore

    check_verb(args.package, "restore")
    _notice_for(args.package)
    summary = restore(args.package, Path(args.out), overwrite=args.overwrite, dry_run=args.dry_run)
    verb = "would write" if args.dry_run else "wrote"
    _say(f"{verb} {summary['runs']} run directories, {summary['files']} files, "
         f"{summary['bytes']:,} bytes to {summary['out']}")
    return 0


def cmd_export(args) -> int:
    from deepgreen_audit.package.export import export_parquet

    if not args.parquet:
        raise UserError("choose a format: --parquet")
    _notice_for(args.package)
    counts = export_parquet(args.package, Path(args.out), overwrite=args.overwrite)
    _say(f"wrote {', '.join(f'{n}.parquet ({c:,} rows)' for n, c in counts.items())} to {args.out}")
    return 0


def _plan_scope(path: Path) -> dict:
    """The scope a campaign plan declares, as synth's overrides: the synthetic counterpart of
    that campaign (its smoke-run batch limits do not apply; a `cpu` scope draws a host without
    a GPU, whose energy is its CPU packages')."""
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.synth.generate import SCOPE_OVERRIDES

    scope = load_plan(path).scope
    return {k: scope[k] for k in (*SCOPE_OVERRIDES, "reason", "schedule") if k in scope}


def _precision_changes(values: list[str]) -> dict[str, float]:
    """--precision-change STACK=FACTOR options as {stack: factor}."""
    changes: dict[str, float] = {}
    for value in values:
        stack, sep, text = value.partition("=")
        try:
            factor = float(text) if sep and stack else None
        except ValueError:
            factor = None
        if factor is None:
            raise UserError(f"--precision-change {value!r}: expected STACK=FACTOR, e.g. "
                            "python-tensorflow=3.14", field="--precision-change")
        changes[stack] = factor
    return changes


def cmd_synth(args) -> int:
    from deepgreen_audit.synth import write_synthetic
    from deepgreen_audit.synth.model import SynthModel

    if args.copies > 1 and (args.defect or args.precision_change):
        raise UserError("--copies does not combine with --defect or --precision-change: the "
                        "copies repeat the drawn runs under new run ids, and a planted defect or "
                        "a changed precision policy names the drawn runs only")
    overrides = _plan_scope(Path(args.plan)) if args.plan else {}
    if args.copies > 1 and overrides.get("initialisers"):
        raise UserError("--copies does not combine with an initialiser trial's plan: a copy is "
                        "named <configuration>.r<n>, a trial's run names its initialiser too",
                        path=args.plan)
    model = SynthModel.from_toml(Path(args.model)) if args.model else SynthModel()
    if args.precision_change:
        model = model.with_overrides({"precision_change": _precision_changes(args.precision_change)})
    overrides.update({k: v for k, v in {
        "ecosystems": args.ecosystems.split(",") if args.ecosystems else None,
        "architectures": args.architectures.split(",") if args.architectures else None,
        "datasets": args.datasets.split(",") if args.datasets else None,
        "repetitions": args.repetitions, "epochs": args.epochs, "batch_size": args.batch_size,
        "input_resolution_px": args.input_resolution_px, "device": args.device,
        "reason": args.reason}.items()
        if v is not None})
    path = write_synthetic(Path(args.out), seed=args.seed, model=model,
                           defects=tuple(args.defect or ()),
                           descriptor_path=Path(args.descriptor) if args.descriptor else None,
                           overwrite=args.overwrite, progress=lambda line: _say("  " + line),
                           copies=args.copies, **overrides)
    _notice_for(path)
    _say(f"wrote a synthetic package to {args.out} (described by {path}); "
         "its planted parameters are in synth-truth.json beside the tables")
    return 0


# ---------------------------------------------------------------- parser


def defect_names() -> list[str]:
    from deepgreen_audit.synth.defects import DEFECTS

    return list(DEFECTS)


def build_parser(verb_named: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser, every verb in it; or, where `verb_named` (the first word of
    the command line) is a verb, only as far as the verb module (`VERB_MODULES`, in order)
    that registers it: the others a command such as validate or audit would only pay to
    import."""
    parser = Parser(
        prog="deepgreen", formatter_class=HelpFormatter,
        description="DeepGreen Audit: collect, audit and render auditable energy "
                    "measurements of deep-learning training and inference.",
        epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"deepgreen {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    def verb(name, func, help_, description, examples=()):
        sub = verbs.add_parser(name, help=help_, description=description,
                               epilog=examples_epilog(examples) or None,
                               formatter_class=HelpFormatter)
        sub.set_defaults(func=func)
        return sub

    for add in (_add_validate, _add_flatten, _add_restore, _add_export, _add_synth):
        add(verb)
    import importlib

    for module in VERB_MODULES:
        if verb_named in verbs.choices:  # the verb asked for is there: the rest are not needed
            break
        importlib.import_module(module).register(verb)
    return parser


def _add_validate(verb: VerbAdder) -> None:
    """Add the verb `validate`: a package's integrity."""
    p = verb("validate", cmd_validate, "check a package's integrity (checksums, schemas, keys)",
             "Check a package of any kind its descriptor declares (a replication package, an "
             "API-level package): the descriptor, SHA256SUMS and each resource's "
             "bytes and hash, every row against its Table Schema (types, constraints, canonical "
             "form), primary keys and foreign keys. A Frictionless data package not written by "
             "deepgreen is checked by frictionless itself. Exit 0 when valid, 1 with a report "
             "naming resource, row and field otherwise.",
             [("deepgreen validate", "the shipped package (./datapackage.json)"),
              ("deepgreen validate examples/first-campaign --json", "the report as JSON")])
    p.add_argument("package", nargs="?", default="datapackage.json", metavar="PKG",
                   help="package folder or its datapackage.json (default: ./datapackage.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    strict_option(p)


def _add_flatten(verb: VerbAdder) -> None:
    """Add the verb `flatten`: run directories to a package."""
    p = verb("flatten", cmd_flatten, "turn a tree of run directories into a package",
             "Read RUNS/<campaign>/<run_id>/ directories (as 'collect' or 'restore' write them) "
             "and write the four canonical tables, SHA256SUMS and datapackage.json to PKG. "
             "Refuses symbolic links, unsafe names, and anything that would not validate; says "
             "so when RUNS is a package, a collect output folder (flatten its runs/) or a tree "
             "that mixes campaigns. PKG is checked before anything is read: an existing PKG needs "
             "--overwrite, and a folder that holds anything but a package is refused.",
             [("deepgreen restore examples/first-campaign --out runs/", "run directories"),
              ("deepgreen flatten runs/ --out pkg/", "back to a package, byte for byte")])
    p.add_argument("runs", metavar="RUNS", help="folder of run directories")
    p.add_argument("--out", required=True, metavar="PKG",
                   help="package folder to write: new, or (with --overwrite) an empty folder or a "
                        "package")
    p.add_argument("--descriptor", metavar="FILE",
                   help="write datapackage.json here instead of inside PKG")
    p.add_argument("--overwrite", action="store_true",
                   help="replace PKG (and FILE) if it is a package (a descriptor); a folder of "
                        "anything else is refused")


def _add_restore(verb: VerbAdder) -> None:
    """Add the verb `restore`: a package back to run directories."""
    p = verb("restore", cmd_restore, "turn a package back into run directories",
             "Validate PKG, then write one directory per run (manifest.json, blocks.csv, "
             "codecarbon.csv, metrics.csv, samples.csv) under OUT/<campaign>/<run_id>/. "
             "Flattening the result gives back the package byte for byte. Only a replication "
             "package has runs; other kinds are refused.",
             [("deepgreen restore examples/first-campaign --out runs/ --dry-run", "what it would write"),
              ("deepgreen restore examples/first-campaign --out runs/", "write it")])
    p.add_argument("package", metavar="PKG", help="package folder or its datapackage.json")
    p.add_argument("--out", required=True, metavar="RUNS", help="folder to write the runs to")
    p.add_argument("--overwrite", action="store_true", help="replace RUNS if it exists")
    p.add_argument("--dry-run", action="store_true", help="say what would be written; write nothing")


def _add_export(verb: VerbAdder) -> None:
    """Add the verb `export`: a package's tables as Parquet."""
    p = verb("export", cmd_export, "export a package's tables for fast analysis (Parquet)",
             "Write each table of the package (of whichever deepgreen kind), typed from its "
             "schema, as OUT/<table>.parquet. The CSV tables remain the archive format.",
             [("deepgreen export examples/first-campaign --parquet --out parquet/", "")])
    p.add_argument("package", nargs="?", default="datapackage.json", metavar="PKG",
                   help="package folder or its datapackage.json (default: ./datapackage.json)")
    p.add_argument("--parquet", action="store_true", help="write Parquet files (the one format)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the files to")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")


def _add_synth(verb: VerbAdder) -> None:
    """Add the verb `synth`: a synthetic campaign; its options in three groups (what is drawn,
    the scope, what is written), in the order its --help lists them."""
    p = verb("synth", cmd_synth, "generate a synthetic campaign (clearly marked as such)",
             "Generate a full-size synthetic campaign from a documented generative model "
             "(deepgreen_audit/synth/model.py), deterministic from --seed, with optional planted "
             "defects, and write it as a package with its truth file (synth-truth.json). "
             "Its descriptor and every command that reads it say that it is synthetic. PKG is "
             "checked before anything is drawn: an existing PKG needs --overwrite, and a folder "
             "that holds anything but a package is refused.",
             [("deepgreen synth --out synth/ --plan collect/contrast.toml",
               "the S7 contrast cell, synthetic"),
              ("deepgreen synth --out planted/ --plan collect/contrast.toml --defect short-blocks "
               "--defect kwh-as-joules", "two planted defects"),
              ("deepgreen audit planted/", "which the audit finds (exit 1)"),
              ("deepgreen synth --out x3/ --plan collect/contrast.toml --copies 3",
               "that cell written three times in a row, 3x the runs")])
    p.add_argument("--out", required=True, metavar="PKG",
                   help="package folder to write: new, or (with --overwrite) an empty folder or a "
                        "package")
    _add_synth_draw_options(p)
    _add_synth_scope_options(p)
    _add_synth_output_options(p)


def _add_synth_draw_options(p: argparse.ArgumentParser) -> None:
    """synth's options on what is drawn: the seed, the generative model, planted defects and
    changed precision policies."""
    p.add_argument("--seed", type=int, help="master seed (default: the specification's "
                   "S6_replication.master_seed)")
    p.add_argument("--model", metavar="TOML", help="overrides of the generative model's parameters")
    p.add_argument("--defect", action=LazyChoicesAppend, load_choices=defect_names, metavar="NAME",
                   help="plant a defect (repeatable), one of: %(choices)s (what each does: "
                        "deepgreen_audit/synth/defects.py)")
    p.add_argument("--precision-change", action="append", metavar="STACK=FACTOR",
                   help="run STACK under the specification's precision policy with its TF32 flag "
                        "flipped (recorded in its runs' precision_policy and tf32_enabled), its "
                        "training time and energy multiplied by FACTOR; every other draw is the "
                        "same as without it (repeatable), e.g. python-tensorflow=3.14")


def _add_synth_scope_options(p: argparse.ArgumentParser) -> None:
    """synth's options that narrow the design, as a plan's [scope] does (and the plan itself)."""
    p.add_argument("--ecosystems", metavar="A,B", help="only these ecosystems (default: the spec's)")
    p.add_argument("--architectures", metavar="A,B",
                   help="only these architectures (default: the spec's)")
    p.add_argument("--datasets", metavar="A,B", help="only these datasets (default: the spec's)")
    p.add_argument("--repetitions", type=int, metavar="N",
                   help="repetitions of each configuration (default: the spec's)")
    p.add_argument("--epochs", type=int, metavar="N", help="epochs of each run (default: the spec's)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="training batch size (default: the spec's; time per sample follows it)")
    p.add_argument("--input-resolution-px", type=int, metavar="PX",
                   help="input side in pixels (default: the spec's; time per sample follows it)")
    p.add_argument("--device", choices=("cuda", "cpu"),
                   help="where every run places its work (default: the spec's, cuda); cpu draws a "
                        "host without a GPU: no NVML, no GPU samples, the CPU packages' energy "
                        "as the blocks' energy, blocks cpu_fallback_time_factor longer")
    p.add_argument("--plan", metavar="TOML",
                   help="draw the campaign a plan declares: its [scope] (labels, repetitions, "
                        "epochs, batch size, resolution, device, reason; an initialiser trial's "
                        "initialisers, with the study's collapses planted per initialiser), e.g. "
                        "collect/contrast.toml or collect/initialiser-trial.toml; the options "
                        "above override it")
    p.add_argument("--reason", metavar="TEXT",
                   help="why the campaign narrows the design, for its declared scope (the paper "
                        "quotes it)")


def _add_synth_output_options(p: argparse.ArgumentParser) -> None:
    """synth's options on what is written: copies of the campaign, the descriptor, overwriting."""
    p.add_argument("--copies", type=positive_int, default=1, metavar="N",
                   help="write the drawn campaign N times in a row as one package of N times its "
                        "runs (copy k of run <config>.r<n> is <config>.r<n + k x repetitions>, "
                        "later by k x the campaign's span, with new seeds and process ids; the "
                        "descriptor says so), its rows streamed to disk so memory holds one "
                        "campaign; not with --defect or --precision-change (default 1), e.g. "
                        "--plan collect/contrast.toml --copies 3")
    p.add_argument("--descriptor", metavar="FILE", help="write datapackage.json here instead")
    p.add_argument("--overwrite", action="store_true",
                   help="replace PKG (and FILE) if it is a package (a descriptor); a folder of "
                        "anything else is refused")


#: What adds one verb to the parser: `verb(name, func, help, description, examples)`, returning
#: the verb's own parser for its options.
VerbAdder = Callable[..., argparse.ArgumentParser]


#: Modules that add verbs of their own layer: each has register(verb).  The audit's first: a
#: command line imports them in this order only until its verb is registered.
VERB_MODULES: tuple[str, ...] = ("deepgreen_audit.verbs.audit", "deepgreen_audit.verbs.collect",
                                 "deepgreen_audit.verbs.importers", "deepgreen_audit.verbs.render",
                                 "deepgreen_audit.verbs.greenlight", "deepgreen_audit.verbs.stacks",
                                 "deepgreen_audit.verbs.compare")


#: Verbs whose program ends the moment they return (`_exit_now`): they leave nothing behind to
#: clean up (what they write is written, and closed, before they return).
QUICK_EXIT_VERBS = ("validate", "audit")
#: Verbs that measure for hours (a campaign, API profiles) and so keep Python's cycle collector.
HOURS_LONG_VERBS = ("collect", "profile-api")


def main(argv: list[str] | None = None, *, owns_process: bool = False) -> int:
    """Run the command line `argv` (default: the program's); its exit status.  `owns_process`
    says the process ends when it returns (the `deepgreen` program), which lets a verb leave
    the process in a state another caller would not expect (`validate`: pandas hidden), fork
    it (`audit`: the round trip beside the checks) and end it at once (QUICK_EXIT_VERBS).
    Whatever it prints goes through `safe.terminal_text` (a report, an error naming a file, an
    importer's summary): a control sequence in a log's cell or file name reaches no terminal."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (cast(TextIO, TerminalStream(stream)) for stream in streams)
    try:
        return _main(argv, owns_process)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str] | None, owns_process: bool) -> int:
    # Ctrl-C raises KeyboardInterrupt and SIGTERM `Terminated` while the command runs, parsing
    # included, so that both unwind (removing staging folders) into one line; the handlers
    # the caller had (`__main__`'s quiet exit 130) come back when it returns.
    with interrupts_raise():
        return _command(argv, owns_process)


def _command(argv: list[str] | None, owns_process: bool) -> int:
    stream_errors = _show_name_bytes_escaped()
    name = "deepgreen"
    try:
        words = sys.argv[1:] if argv is None else argv
        parser = build_parser(next((w for w in words if not w.startswith("-")), None))
        if any("\0" in arg for arg in words):
            parser.error("an argument holds a NUL byte, which no path or option can hold")
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return USAGE_EXIT
        name = f"deepgreen {args.verb}"
        args.owns_process = owns_process
        status = _run(args)
        if owns_process and args.verb in QUICK_EXIT_VERBS:
            _exit_now(status)
        return status
    except UserError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    except BrokenPipeError:  # the reader (e.g. `| head`) stopped reading: not an error of ours
        sys.stderr.close()
        return 0
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            return _report_bug(name, exc)
        # Path.exists() and kin raise it for a name the file system cannot hold: the user's path
        print(f"{name}: error: {exc.filename}: the name is longer than the file "
              "system allows", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print(f"{name}: interrupted; nothing was half-written", file=sys.stderr)
        return 130
    except Terminated:
        print(f"{name}: terminated; nothing was half-written", file=sys.stderr)
        return 128 + signal.SIGTERM
    except Exception as exc:
        return _report_bug(name, exc)
    finally:
        for stream, errors in stream_errors.items():
            stream.reconfigure(errors=errors)


def _show_name_bytes_escaped() -> dict[io.TextIOWrapper, str | None]:
    r"""Set stdout and stderr to print a byte of a file name that is not UTF-8 as `\xff`
    (`errors.NAME_BYTES`), neither raw nor as a crash; the error handlers they had, to put
    back."""
    previous: dict[io.TextIOWrapper, str | None] = {}
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors != NAME_BYTES:
            previous[stream] = stream.errors
            stream.reconfigure(errors=NAME_BYTES)
    return previous


def _run(args) -> int:
    """The verb, with Python's cycle collector paused unless it runs for hours."""
    from contextlib import nullcontext

    from deepgreen_audit.package.tables import cycle_collection_paused

    # A verb over a package builds millions of small objects and ends: with the cycle
    # collector paused it takes about two thirds of the time (the audit: 3.0 s -> 2.0 s) and
    # no more memory.  A campaign runs for hours, so it keeps the collector.
    paused = nullcontext() if args.verb in HOURS_LONG_VERBS else cycle_collection_paused()
    with paused:
        return args.func(args)


def _exit_now(status: int) -> None:
    """End the program with `status` once its output is out, without Python's teardown, which
    frees every module, array and object one by one (0.05 s after a validation: a fifth of it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _report_bug(name: str, exc: Exception) -> int:
    """One line for an internal error: it is ours, not the user's input."""
    import traceback

    if os.environ.get("DEEPGREEN_TRACEBACK"):
        traceback.print_exc()
    where = traceback.extract_tb(exc.__traceback__)[-1]
    print(f"{name}: internal error: {type(exc).__name__}: {exc} (at "
          f"{Path(where.filename).name}:{where.lineno}); this is a bug in deepgreen, please "
          "report it with the command line (DEEPGREEN_TRACEBACK=1 shows the traceback)",
          file=sys.stderr)
    return BUG_EXIT


if __name__ == "__main__":
    from deepgreen_audit.program import exit_with

    exit_with(main())
