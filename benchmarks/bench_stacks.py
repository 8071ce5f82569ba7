"""Images per second of training epochs in each of the six stacks, side by side, on the same data and CPU.

Every stack runs under the real harness (one process a run, `deepgreen collect`)
on the digits smoke store (1,437 training images at 32x32x3, batch size from
the specification), from its canonical initial weights.  Epoch 1 includes each
framework's warm-up (XLA compilation in JAX, tf.function tracing, TorchScript
profiling, the JVM's JIT); epoch 2 is the steady state.  Ratios are against
Python/PyTorch in the same invocation.  The built stacks must be built
(`deepgreen build`, done by the set-up).

    .venv/bin/python benchmarks/bench_stacks.py [--architecture resnet18 --architecture vgg16] [--epochs 2]
        [--stack rust-tch ...] [--max-train-batches N] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.collect.prepare import prepare_plan
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.spec import DEVICES
from deepgreen_audit.stacks import native

STACKS = ("python-pytorch", "python-tensorflow", "python-jax", "cpp-libtorch", "rust-tch", "java-dl4j")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architecture", action="append", choices=("resnet18", "vgg16"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--stack", action="append", choices=STACKS, help="default: all six (python-pytorch "
                                                                          "always runs, as the peer)")
    parser.add_argument("--max-train-batches", type=int, help="fewer batches an epoch (VGG-16 on 2 cores)")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="the device the plan declares (default cpu; collect refuses a stack that "
                             "would place its work elsewhere)")
    args = parser.parse_args()
    architectures = args.architecture or ["resnet18"]
    stacks = tuple(dict.fromkeys(["python-pytorch", *(args.stack or STACKS)]))
    native.build_all([s for s in stacks if s in native.NATIVE_STACKS], progress=lambda line: None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        scope = {"ecosystems": list(stacks), "architectures": architectures, "datasets": ["digits"],
                 "repetitions": 1, "epochs": args.epochs, "device": args.device}
        if args.max_train_batches:
            scope.update(max_train_batches=args.max_train_batches, max_eval_batches=1)
        plan = load_plan(write_scoped_plan(work / "plan.toml", "bench", work / "data", scope, master_seed=3,
                                           run_timeout_s=7200))
        prepare_plan(plan)
        summary = collect(plan, work / "out", allow_missing_counters=True)
        if not summary.ok:
            raise SystemExit(f"runs failed: {summary.failed}")
        flatten(summary.runs_dir, work / "pkg")
        package = Package.open(work / "pkg")
        runs = {r["run_id"]: r for r in package.table("runs").to_pylist()}
        env = {r["run_id"]: r for r in package.table("environment").to_pylist()}
        rate = {}
        for b in package.table("blocks").to_pylist():
            if b["phase"] == "train":
                run = runs[b["run_id"]]
                rate[(run["architecture"], run["ecosystem"], b["epoch"])] = b["samples_processed"] / b["duration_s"]
        print(f"CPU: {env[next(iter(env))]['cpu_model']} ({os.cpu_count()} cores), {platform.platform()}")
        train_images = next(b["samples_processed"] for b in package.table("blocks").to_pylist()
                            if b["phase"] == "train")
        print(f"data: digits store, {train_images} training images per epoch, "
              f"batch {next(iter(runs.values()))['batch_size']}")
        versions = {r["run_id"].split(".")[0]: f"{r['framework']} {r['framework_version']}" for r in env.values()}
        for arch in architectures:
            print(f"\n{arch}: training images per second (ratio to python-pytorch)")
            print(f"  {'stack':18} {'framework':22} " + " ".join(f"{'epoch ' + str(e):>18}"
                                                               for e in range(1, args.epochs + 1)))
            for eco in stacks:
                cells = []
                for e in range(1, args.epochs + 1):
                    value, peer = rate[(arch, eco, e)], rate[(arch, "python-pytorch", e)]
                    cells.append(f"{value:9.1f} ({value / peer:4.2f}x)")
                print(f"  {eco:18} {versions[eco]:22} " + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
