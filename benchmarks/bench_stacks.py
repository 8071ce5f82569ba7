"""Images per second of training epochs in each stack, side by side, on the same data and CPU.

Every stack runs under the real harness (one process a run, `deepgreen collect`)
on the digits smoke store (1,437 training images at 32x32x3, batch size from
the specification), from its canonical initial weights.  Epoch 1 includes each
framework's warm-up (XLA compilation in JAX, tf.function tracing, TorchScript
profiling); epoch 2 is the steady state.  Ratios are against Python/PyTorch in
the same invocation.

    .venv/bin/python benchmarks/bench_stacks.py [--architecture resnet18 --architecture vgg16] [--epochs 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten
from deepgreen_audit.stacks import cpp
from deepgreen_audit.stacks.prepare import prepare_plan

STACKS = ("python-pytorch", "python-tensorflow", "python-jax", "cpp-libtorch")


def plan_text(work: Path, executable: Path, architectures: list[str], epochs: int) -> str:
    stacks = "".join(f'[stacks.{eco}]\nkind = "python"\nprogram = "stacks/{eco.replace("-", "_")}/train.py"\n'
                     for eco in STACKS if eco.startswith("python"))
    stacks += f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["{executable}", "train"]\n'
    scope = (f"ecosystems = {list(STACKS)}\narchitectures = {architectures}\ndatasets = ['digits']\n"
             f"repetitions = 1\nepochs = {epochs}\n").replace("'", '"')
    return (f'campaign = "bench"\nmaster_seed = 3\nrun_timeout_s = 7200\ndata_dir = "{work / "data"}"\n'
            f"{stacks}[scope]\n{scope}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architecture", action="append", choices=("resnet18", "vgg16"))
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    architectures = args.architecture or ["resnet18"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "plan.toml").write_text(plan_text(work, cpp.build(), architectures, args.epochs))
        plan = load_plan(work / "plan.toml")
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
            for eco in STACKS:
                cells = []
                for e in range(1, args.epochs + 1):
                    value, peer = rate[(arch, eco, e)], rate[(arch, "python-pytorch", e)]
                    cells.append(f"{value:9.1f} ({value / peer:4.2f}x)")
                print(f"  {eco:18} {versions[eco]:22} " + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
