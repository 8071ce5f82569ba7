"""False alarms of the audit: clean full-size synthetic campaigns of N seeds, audited in full.

Every check should pass a clean campaign; a check that fails or warns on one cries wolf.
Prints, per seed, the checks that did not pass, and the totals; the goal is none.

    .venv/bin/python benchmarks/bench_false_alarms.py [--seeds 20] [--first-seed 1]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

from deepgreen_audit.audit import audit
from deepgreen_audit.synth import write_synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    args = parser.parse_args()
    alarms = collections.Counter()
    campaigns_with_alarm = 0
    clock = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            pkg = Path(tmp) / "pkg"
            write_synthetic(pkg, seed=seed)
            report = audit(pkg)
        # a check that does not apply to a full campaign (S7: the contrast cell's) is no alarm
        raised = [f for f in report.findings if f.status != "pass" and f.basis != "not applicable"]
        campaigns_with_alarm += bool(raised)
        alarms.update(f"{f.id} ({f.status})" for f in raised)
        print(f"seed {seed:>4}: {report.counts['pass']} pass, {report.counts['fail']} fail, "
              f"{report.counts['warn']} warn, {report.counts['skip']} skip"
              + (": " + ", ".join(f"{f.id} {f.status}" for f in raised) if raised else ""),
              flush=True)
    print(f"{args.seeds} clean campaigns (210 runs each) in {time.perf_counter() - clock:.0f} s: "
          f"{campaigns_with_alarm} with a false alarm; alarms by check: "
          + (", ".join(f"{k} x{v}" for k, v in alarms.most_common()) or "none"))


if __name__ == "__main__":
    main()
