"""Collect the packages tests/data/collected/ holds: real stack runs, as a user's re-collection
makes them, for the tests of every analysis on the shapes real runs produce (fractional clocks,
eval blocks of a tenth of a second, CodeCarbon's models on a host without RAPL).

    .venv/bin/python scripts/collected_fixtures.py            # both, about four minutes on 2 cores

* cpu-no-counters: Python/PyTorch, C++/LibTorch, Rust/tch and Java/DL4J, ResNet-18 on digits,
  2 repetitions x 2 epochs, on the CPU of a host without NVML or RAPL
  (`collect --allow-missing-counters`): no energy, the reason in every block.
* cpu-fake-rapl: the three LibTorch stacks, the same scope, on a fake RAPL counter
  (tests/fakes/rapl.py; the package is marked synthetic): energy at the CPU boundary.

Each is collected in a scratch folder (its weight exports are large) and flattened into
tests/data/collected/<name>/, replacing what is there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deepgreen_audit.collect.plan import write_scoped_plan  # noqa: E402

OUT = ROOT / "tests" / "data" / "collected"
SCOPE = {"architectures": ["resnet18"], "datasets": ["digits"], "repetitions": 2, "epochs": 2,
         "device": "cpu"}
FIXTURES = {
    "cpu-no-counters": ["python-pytorch", "cpp-libtorch", "rust-tch", "java-dl4j"],
    "cpu-fake-rapl": ["python-pytorch", "cpp-libtorch", "rust-tch"],
}


def deepgreen(*args: str, env: dict | None = None) -> None:
    subprocess.run([sys.executable, "-m", "deepgreen_audit", *args], check=True, env=env)


def collect(name: str, ecosystems: list[str], scratch: Path, env: dict | None) -> None:
    reason = ("a re-collection on a CPU host without energy counters" if env is None
              else "a re-collection on a CPU host, its RAPL counter a fake one")
    plan = write_scoped_plan(scratch / f"{name}.toml", name.replace("-", ""), scratch / "data",
                             {"ecosystems": ecosystems, **SCOPE, "reason": reason})
    deepgreen("data", "prepare", "--plan", str(plan), env=env)
    deepgreen("collect", "--plan", str(plan), "--out", str(scratch / name),
              "--allow-missing-counters", env=env)
    deepgreen("flatten", str(scratch / name / "runs"), "--out", str(OUT / name), "--overwrite",
              env=env)


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fakes.rapl import advancing_powercap

    with tempfile.TemporaryDirectory(prefix="collected-fixtures.") as scratch_dir:
        scratch = Path(scratch_dir)
        collect("cpu-no-counters", FIXTURES["cpu-no-counters"], scratch, None)
        with advancing_powercap(scratch / "powercap") as root:
            env = dict(os.environ, DEEPGREEN_POWERCAP_ROOT=str(root))
            collect("cpu-fake-rapl", FIXTURES["cpu-fake-rapl"], scratch, env)


if __name__ == "__main__":
    main()
