"""The Slurm executor's own overhead per run, beside the local executor's.

Starts a single-node Slurm cluster (tests/slurm_cluster.py; root, Debian's
slurmctld, slurmd and munge), and collects one plan of N runs of a stack that
does no work (two empty blocks: what is measured is the executor, not
training) twice: locally, and through the array.  Per run it prints
  * submission (Slurm) or the previous run's end to the run's start: scheduling,
    process start, imports, opening the instruments up to the runner's clock;
  * the run's end to recorded: its directory renamed into runs/ (both), and
    for Slurm also to settled by the waiting collect (the job's end seen by sacct
    or scontrol, its energy read);
  * the whole collection's wall time minus the runs' own time, over N.

    .venv/bin/python benchmarks/bench_slurm.py [--runs 4]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import slurm_cluster  # noqa: E402
from deepgreen_audit.collect.driver import collect  # noqa: E402
from deepgreen_audit.collect.plan import load_plan  # noqa: E402
from deepgreen_audit.collect.slurm import SLURM_DIR, SlurmOptions, collect_slurm  # noqa: E402

EMPTY_STACK = '''
def check(job):
    pass

def run(harness, job):
    harness.report(framework="none")
    for epoch in range(1, job.epochs + 1):
        for phase in ("train", "eval"):
            with harness.block(epoch, phase) as block:
                block.samples_processed, block.loss = 1, 1.0
                if phase == "eval":
                    block.test_accuracy = 0.1
'''


def _when(text: str) -> float:
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Watcher(threading.Thread):
    """Notes when each run directory first appears in runs/ (polled every 20 ms)."""

    def __init__(self, runs_dir: Path):
        super().__init__(daemon=True)
        self.runs_dir, self.seen, self.stopped = runs_dir, {}, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.02):
            for manifest in self.runs_dir.glob("*/*/manifest.json"):
                self.seen.setdefault(manifest.parent.name, time.time())


def _runs(out: Path, plan, seen: dict[str, float]) -> list[dict]:
    """Per run in the order they ran: start, end (the runner's clocks), renamed into runs/."""
    rows = []
    for job in plan.jobs:
        run = json.loads((out / "runs" / job.campaign / job.run_id / "manifest.json").read_text())["run"]
        rows.append({"start": _when(run["started_at_utc"]), "end": _when(run["ended_at_utc"]),
                     "renamed": seen[job.run_id]})
    return sorted(rows, key=lambda r: r["start"])


def _timed(out: Path, collection) -> tuple[float, float, dict[str, float]]:
    """(start, end) of `collection()` and when each run appeared in out/runs."""
    watcher = Watcher(out / "runs")
    watcher.start()
    t0 = time.time()
    collection()
    t1 = time.time()
    time.sleep(0.1)
    watcher.stopped.set()
    watcher.join()
    return t0, t1, watcher.seen


def _report(name: str, rows: list[dict], first_from: float, wall_s: float, settled: float | None):
    starts = [rows[0]["start"] - first_from] + [b["start"] - a["end"] for a, b in zip(rows, rows[1:])]
    recorded = [r["renamed"] - r["end"] for r in rows]
    own = sum(r["end"] - r["start"] for r in rows)
    line = (f"{name:6}  {len(rows)} runs  to start: median {statistics.median(starts):6.2f} s "
            f"(first {starts[0]:.2f} s)  end to renamed: median {statistics.median(recorded):5.2f} s")
    if settled is not None:
        line += f"  last end to settled: {settled - rows[-1]['end']:5.2f} s"
    print(line + f"  overhead per run: {(wall_s - own) / len(rows):6.2f} s (wall {wall_s:.1f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4, help="runs of the plan (default 4)")
    args = parser.parse_args()
    why = slurm_cluster.unavailable()
    if why:
        print(f"bench_slurm: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        tmp = Path(tmp)
        (tmp / "empty_stack.py").write_text(EMPTY_STACK)
        (tmp / "plan.toml").write_text(
            f'campaign = "bench"\nmaster_seed = 1\nrun_timeout_s = 300\n[stacks.python-pytorch]\n'
            f'kind = "python"\nprogram = "{tmp / "empty_stack.py"}"\n[scope]\necosystems = ["python-pytorch"]\n'
            f'architectures = ["resnet18"]\ndatasets = ["digits"]\nrepetitions = {args.runs}\nepochs = 1\n')
        plan = load_plan(tmp / "plan.toml")
        t0, t1, seen = _timed(tmp / "local", lambda: collect(plan, tmp / "local", allow_missing_counters=True))
        _report("local", _runs(tmp / "local", plan, seen), t0, t1 - t0, None)
        cluster = slurm_cluster.Cluster(tmp / "cluster").start()
        try:
            os.environ.update(cluster.env)
            summaries = []
            t0, t1, seen = _timed(tmp / "slurm", lambda: summaries.append(collect_slurm(
                plan, tmp / "slurm", SlurmOptions(time_limit="10"), allow_missing_counters=True, poll_s=0.5)))
            (job_id,) = summaries[0].submitted
            submitted = _when(json.loads((tmp / "slurm" / SLURM_DIR / f"{job_id}.json").read_text())
                              ["submitted_at_utc"])
            _report("slurm", _runs(tmp / "slurm", plan, seen), submitted, t1 - t0, t1)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
