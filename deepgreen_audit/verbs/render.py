"""Verbs of the render layer: `deepgreen render` and `deepgreen paper` (thin)."""

from __future__ import annotations

from pathlib import Path

from deepgreen_audit.errors import UserError


def _notice(package) -> None:
    from deepgreen_audit.package.descriptor import Package

    notice = Package.open(package).notice()
    if notice:
        print(notice, flush=True)


def _companions(args) -> dict[str, Path | str | None]:
    """The packages rendered beside PKG (render's and build_paper's keyword arguments): each
    one given, else the checkout's default, each announced as PKG is (a synthetic one says so)."""
    from deepgreen_audit.render.build import default_contrast, default_initialiser_trial, default_pilot

    found = {"pilot": args.pilot or default_pilot(),
             "calibration": calibration_of(args.calibration, args.package),
             "initialiser_trial": args.initialiser_trial or default_initialiser_trial(),
             "contrast": args.contrast or default_contrast(),
             "compare": args.compare}
    for package in found.values():
        if package:
            _notice(package)
    return found


def _render(args) -> None:
    from deepgreen_audit.package.dispatch import check_verb
    from deepgreen_audit.render import render

    check_verb(args.package, args.verb)
    _notice(args.package)
    report = render(args.package, Path(args.out) if args.out else None, **_companions(args))
    parts = ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items())
    print(f"wrote {', '.join(f for f in report.files if not f.startswith('.'))} "
          f"to {report.out} ({parts})", flush=True)


def cmd_render(args) -> int:
    _render(args)
    return 0


def cmd_paper(args) -> int:
    from deepgreen_audit.audit.checks.manuscript import lint_paper
    from deepgreen_audit.render.build import build_paper, build_pdf, check_paper_out, paper_dir
    from deepgreen_audit.resources import project_file

    if args.out and args.no_data:
        raise UserError("--out renders PKG into a folder of its own; --no-data compiles the "
                        "checkout's paper/generated: choose one", code="usage-error")
    if args.out:
        check_paper_out(Path(args.out))
    manuscript = project_file("paper", "paper.tex") if args.out else paper_dir() / "paper.tex"
    typed = lint_paper(manuscript)
    if typed:
        raise UserError(f"the results text types {len(typed)} number(s) instead of quoting a "
                        f"macro; first: {typed[0]}", path=manuscript, row=typed[0].line)
    if args.out:
        from deepgreen_audit.package.dispatch import check_verb

        check_verb(args.package, args.verb)
        _notice(args.package)
        pdf = build_paper(args.package, Path(args.out), **_companions(args))
    else:
        if not args.no_data:
            _render(args)
        pdf = build_pdf(paper_dir())
    print(f"wrote {pdf}", flush=True)
    return 0


def calibration_of(given: str | None, package) -> Path | None:
    """--calibration CAL (refused unless a calibration package), else the checkout's
    calibration/ when PKG is the shipped package (render.build.default_calibration)."""
    from deepgreen_audit.render.build import default_calibration
    from deepgreen_audit.verbs.audit import calibration_of as given_calibration

    return given_calibration(given, package) if given else default_calibration(package)


def _companion_options(parser) -> None:
    """The options naming the packages rendered beside PKG (`_companions`)."""
    parser.add_argument("--pilot", metavar="PKG",
                        help="the measured pilot package the pilot section is rendered from "
                             "(default: the checkout's pilot/ when it exists; otherwise the "
                             "section says that no pilot has been collected)")
    parser.add_argument("--calibration", metavar="CAL",
                        help="the between-window calibration package (collect/calibration.toml) "
                             "that bounds the runs outside PKG's interleaved window in the "
                             "Limitations (default: the checkout's calibration/ when PKG is the "
                             "shipped package and it exists; otherwise the paragraph says that no "
                             "calibration was collected)")
    parser.add_argument("--initialiser-trial", metavar="PKG",
                        help="the initialiser-trial package (collect/initialiser-trial.toml) the "
                             "paragraph on initialisers and collapses is rendered from (default: "
                             "the checkout's initialiser-trial/ when it exists; otherwise the "
                             "paragraph says that no trial package was given), e.g. "
                             "--initialiser-trial initialiser-trial/")
    parser.add_argument("--contrast", metavar="PKG",
                        help="the contrast package (S7, collect/contrast.toml) the contrast "
                             "cell's paragraph is rendered from, beside the main campaign "
                             "(default: the checkout's contrast/ when it exists; otherwise the "
                             "paragraph says that no contrast package was given)")
    parser.add_argument("--compare", metavar="BASELINE",
                        help="also compare PKG with the package BASELINE ('deepgreen compare "
                             "BASELINE PKG') and render the paper's comparison section from it "
                             "(its numbers in numbers.tex; paper.tex inputs the section only "
                             "when this is given), e.g. --compare baseline/")


def register(verb) -> None:
    p = verb("render", cmd_render, "compute the paper's numbers, tables and figures from a package",
             "Read the package, verify its tables against their recorded hashes, compute every "
             "number the manuscript quotes (against the design of collect/experiment.toml) and "
             "write them to --out: numbers.tex (one macro per number, its header recording "
             "the package's hashes and provenance), booktabs tables and PDF figures. A missing "
             "column, configuration or value stops the render with its name; the previous "
             "generated files stay as they were.",
             [("deepgreen render --out generated/", "the shipped package's numbers"),
              ("deepgreen synth --out baseline/ --precision-change python-tensorflow=0.32",
               "a baseline whose TensorFlow allowed TF32"),
              ("deepgreen render --compare baseline/ --out generated/",
               "and the section comparing the shipped package with it"),
              ("deepgreen synth --plan collect/contrast.toml --out my-contrast/",
               "a synthetic contrast cell (S7), as set-up draws into contrast/"),
              ("deepgreen render --contrast my-contrast/ --out generated/",
               "its paragraph beside the shipped package's numbers")])
    p.add_argument("package", nargs="?", default="datapackage.json", metavar="PKG",
                   help="package folder or its datapackage.json (default: ./datapackage.json)")
    p.add_argument("--out", metavar="DIR",
                   help="folder to write (default: the checkout's paper/generated, which "
                        "paper/paper.tex inputs; when deepgreen is installed from a wheel, "
                        "paper/generated under the current folder)")
    _companion_options(p)

    p = verb("paper", cmd_paper, "render the package and build the PDF (latexmk)",
             "Check that the results text of paper/paper.tex types no number, run 'render' on "
             "PKG into paper/generated, then compile paper/paper.tex with latexmk into "
             "paper/build/paper.pdf. Names the missing TeX programs and packages (and the "
             "Debian packages providing them) when TeX Live is incomplete. A PDF built from "
             "a synthetic package is marked SYNTHETIC DATA on every page. With --out DIR "
             "the package is rendered and compiled in a scratch copy of paper/ and only "
             "DIR/paper.pdf and DIR/generated/ are written.",
             [("deepgreen paper --out my-paper",
               "the shipped package's PDF in a folder of its own: my-paper/paper.pdf")])
    p.add_argument("package", nargs="?", default="datapackage.json", metavar="PKG",
                   help="package folder or its datapackage.json (default: ./datapackage.json)")
    _companion_options(p)
    p.add_argument("--no-data", action="store_true",
                   help="compile only, from the files already in paper/generated")
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/paper.pdf and DIR/generated/ (the numbers, tables and "
                        "figures it was built from) instead of the checkout's paper/build and "
                        "paper/generated; DIR must be new, empty or an earlier --out of "
                        "'deepgreen paper' (refused before any work otherwise)")
