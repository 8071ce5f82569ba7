"""Verbs of the stacks layer: `deepgreen data` (converters, weight exports), `deepgreen build`
(the C++, Rust and Java stacks) and `deepgreen parity`."""

from __future__ import annotations

import sys
from pathlib import Path

from deepgreen_audit.errors import UserError


def _checksums(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        name, sep, md5 = pair.partition("=")
        if not sep or len(md5) != 32:
            raise UserError(f"--expected-md5 {pair!r} is not FILENAME=32-hex-digit MD5", code="bad-option")
        out[name] = md5.lower()
    return out


def cmd_data(args) -> int:
    from deepgreen_audit.stacks import data, weights

    if args.action == "convert":
        if not args.dataset:
            raise UserError("convert needs a dataset name", code="bad-option")
        folder = data.convert(args.dataset, [Path(p) for p in args.inputs], Path(args.out),
                              checksums=_checksums(args.expected_md5), overwrite=args.overwrite)
        store = data.load_store(folder.parent, args.dataset)
        print(f"wrote {folder}: train {store.x_train.shape}, test {store.x_test.shape}, "
              f"fingerprint {store.fingerprint}")
        return 0
    if args.action == "weights":
        if not (args.architecture and args.classes and args.seed is not None):
            raise UserError("weights needs --architecture, --classes and --seed", code="bad-option")
        exp = weights.export(Path(args.out), args.architecture, args.classes, args.seed)
        print(f"wrote {exp.path} (sha256 {exp.sha256}), {exp.manifest_path.name}, {exp.torchscript_path.name}")
        return 0
    from deepgreen_audit.collect.plan import load_plan
    from deepgreen_audit.collect.prepare import prepare_plan

    plan = load_plan(Path(args.plan) if args.plan else None)
    done = prepare_plan(plan, progress=lambda i, n, name: print(f"  [{i}/{n}] {name}", file=sys.stderr))
    print(f"prepared {len(done)} input(s) of {plan.path} under {plan.jobs[0].data_dir}")
    return 0


def _executables(pairs: list[str] | None) -> dict[str, Path]:
    out = {}
    for pair in pairs or []:
        stack, sep, path = pair.partition("=")
        if not sep or not path:
            raise UserError(f"--executable {pair!r} is not STACK=PATH", code="bad-option")
        out[stack] = Path(path)
    return out


def cmd_build(args) -> int:
    from deepgreen_audit.stacks import native

    names = args.stack or list(native.NATIVE_STACKS)
    for name in names:
        native.get(name)            # R/torch, or a name that is no built stack: says why
    if args.available:
        missing = {n: native.get(n).missing_tools() for n in names}
        for name, tools in missing.items():
            if tools:
                print(f"build: skipping {name}: {', '.join(tools)} not on PATH ({native.TOOL_HINTS[name]})",
                      file=sys.stderr)
        names = [n for n in names if not missing[n]]
    native.build_all(names, quiet=not args.verbose, progress=lambda line: print("  " + line, flush=True),
                     backend=args.backend)
    return 0


def cmd_parity(args) -> int:
    from deepgreen_audit.collect import parity
    from deepgreen_audit.stacks import native

    stacks = tuple(args.stack or parity.STACKS)
    executables = parity.default_executables()
    if args.build:
        executables.update(native.build_all([s for s in stacks if s in native.NATIVE_STACKS],
                                            progress=lambda line: print("  " + line, file=sys.stderr)))
    executables.update(_executables(args.executable))
    status = 0
    for arch in args.architecture or ["resnet18", "vgg16"]:
        report = parity.run_parity(arch, Path(args.data_dir), dataset=args.dataset, seed=args.seed,
                                   count=args.count, stacks=stacks, executables=executables)
        print(report.to_json() if args.json else report.format_text())
        status = max(status, report.exit_status(args.strict))
    return status


def _parity_stacks() -> tuple[str, ...]:
    from deepgreen_audit.collect.parity import STACKS  # numpy: only when --stack is used

    return STACKS


def register(verb) -> None:
    from deepgreen_audit.console import LazyChoicesAppend, strict_option

    p = verb("data", cmd_data, "convert official dataset archives; write canonical weight exports",
             "Dataset and weight preparation for the stacks.  'convert DATASET FILE... --out DIR' "
             "checks each official archive against its published MD5, refuses wrong or corrupt files, "
             "resizes every image once (Pillow bilinear) and writes DIR/DATASET/{train,test}.npz and "
             "manifest.json with the fingerprint runs record ('digits' needs no file).  'weights' writes "
             "the canonical seeded initial weights of one (architecture, classes, seed): safetensors, "
             "manifest and TorchScript.  'prepare --plan PLAN' writes every store and export a plan's "
             "jobs read (needed by the C++ stack), and refuses before writing anything when the "
             "data folder's file system cannot hold what it would write ('deepgreen plan' states "
             "it; keeping only the exports' hashes: docs/collection.md, \"Disk\").")
    p.add_argument("action", choices=("convert", "weights", "prepare"),
                   help="convert an official dataset, write canonical weights, or prepare a plan's inputs")
    p.add_argument("dataset", nargs="?", help="convert: fashion-mnist, cifar100, tiny-imagenet, imagenette, digits")
    p.add_argument("inputs", nargs="*", help="convert: the downloaded official file(s)")
    p.add_argument("--out", default="data", help="the data folder (default: ./data)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("--expected-md5", action="append", metavar="FILE=MD5",
                   help="use this MD5 instead of the published one (a mirror you verified otherwise)")
    p.add_argument("--architecture", choices=("resnet18", "vgg16"), help="weights: the network")
    p.add_argument("--classes", type=int, help="weights: the number of output classes")
    p.add_argument("--seed", type=int, help="weights: the seed the initial weights are drawn from")
    p.add_argument("--plan", help="prepare: the campaign plan (default collect/plan.toml); its "
                                  "exports and the digits store are written under its data_dir")

    from deepgreen_audit.stacks.native import ACCELERATOR_VARIABLE, BACKEND_CHOICES, NATIVE_STACKS

    p = verb("build", cmd_build, "build the C++/LibTorch, Rust/tch and Java/DL4J stacks",
             "Build the stacks that are compiled before they run, incrementally: C++/LibTorch "
             "(CMake against the torch wheel's LibTorch), Rust/tch (cargo; tch pinned to the "
             "specification's version, linked to the same LibTorch) and Java/DL4J (Maven; DL4J at the "
             "specification's version, with the ND4J backend of the device --backend names, for "
             "linux-x86_64).  Products stay in each stack's "
             "build folder (see stacks/README.md).  R/torch cannot be built on this project's machines; "
             "asking for it says why.  The set-up (scripts/setup.sh) runs this.")
    p.add_argument("stack", nargs="*", metavar="STACK",
                   help=f"the stacks to build: {', '.join(NATIVE_STACKS)} (default: all)")
    p.add_argument("--available", action="store_true",
                   help="skip, with a note, the stacks whose build tools are not installed")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                   help="the device the Java/DL4J stack's ND4J backend is built for (the specification's "
                        "S4_backend.dl4j_backend): auto (default) is cuda where NVML finds an NVIDIA GPU "
                        f"or ${ACCELERATOR_VARIABLE} says cuda, else cpu; the other stacks run on either")
    p.add_argument("--verbose", action="store_true", help="show the build tools' own output")

    p = verb("parity", cmd_parity, "prove the stacks train the same model from the same state on the same pixels",
             "Probe every stack with the canonical initial weights and a fixed batch of the canonical "
             "store, and check: tensor names, shapes and counts; the exact initial weights; logits and "
             "loss in eval and train mode within stated float32 tolerances; BatchNorm running statistics; "
             "identical input pixels and data fingerprint; exact agreement of the two stacks that run the "
             "same TorchScript module (C++ and Rust); and that no stack source writes a number the "
             "specification owns.  The built stacks (C++, Rust, Java) are probed through their "
             "executables' probe mode; an unbuilt one is a skip.  Exit 1 when a check fails.")
    p.add_argument("--architecture", action="append", choices=("resnet18", "vgg16"),
                   help="the network probed (repeatable; default both)")
    p.add_argument("--stack", action=LazyChoicesAppend, load_choices=_parity_stacks, metavar="STACK",
                   help="a stack to probe (repeatable; default all six): %(choices)s")
    p.add_argument("--data-dir", default="data", help="the data folder holding the store (digits is derived)")
    p.add_argument("--dataset", default="digits",
                   help="the store the fixed batch is drawn from (default digits, which needs no download)")
    p.add_argument("--seed", type=int, default=0, help="the initial weights' seed (default 0)")
    p.add_argument("--count", type=int, default=16, help="images in the fixed batch")
    p.add_argument("--executable", action="append", metavar="STACK=PATH",
                   help="probe this program for a built stack (default: what 'deepgreen build' made)")
    p.add_argument("--build", action="store_true", help="build the C++, Rust and Java stacks first")
    p.add_argument("--json", action="store_true", help="print each architecture's report as JSON")
    strict_option(p)
