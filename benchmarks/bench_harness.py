"""Block-boundary overhead of the Python harness and the protocol round trip from C.

Prints median and p99 of:
  * one block boundary in the Python harness (begin or end: sync hook, counter
    read, clocks), without CodeCarbon, over a fake powercap tree with two
    package domains (real file reads) and over no counters at all;
  * one request/reply of the line protocol from the compiled C reference
    client (PING, and BEGIN/END with their counter reads), over loopback TCP.
Peer figure for scale: a bare time.monotonic() call.  Goal: < 1 ms median.

    .venv/bin/python benchmarks/bench_harness.py [--n 2000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from collect_fakes import zone  # noqa: E402
from deepgreen_audit.collect.harness import Harness  # noqa: E402
from deepgreen_audit.collect.instruments import Instruments  # noqa: E402
from deepgreen_audit.collect.protocol import HarnessServer  # noqa: E402
from deepgreen_audit.device.rapl import Rapl  # noqa: E402


def stats_us(values_s):
    values = sorted(v * 1e6 for v in values_s)
    return statistics.median(values), values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]


def boundary_times(instruments, n):
    harness = Harness(instruments)
    times = []
    for epoch in range(1, n + 1):
        t0 = time.perf_counter()
        harness.begin(epoch, "train")
        t1 = time.perf_counter()
        harness.end(epoch, "train", samples_processed=1, loss=0.5)
        t2 = time.perf_counter()
        times += [t1 - t0, t2 - t1]
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    peer = []
    for _ in range(n):
        t0 = time.perf_counter()
        time.monotonic()
        peer.append(time.perf_counter() - t0)
    peer_med, _ = stats_us(peer)
    print(f"peer: bare time.monotonic()            median {peer_med:8.2f} us")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(2):
            zone(Path(tmp), f"intel-rapl:{i}", f"package-{i}", 1000 * i)
        cases = {"no counters": Instruments(),
                 "fake RAPL, 2 domains": Instruments(rapl=Rapl(Path(tmp)))}
        for label, inst in cases.items():
            med, p99 = stats_us(boundary_times(inst, n))
            print(f"harness boundary ({label:20}) median {med:8.2f} us   p99 {p99:8.2f} us   "
                  f"({med / peer_med:,.0f}x the peer)")
        compiler = shutil.which("gcc") or shutil.which("cc")
        if compiler is None:
            print("protocol round trip: skipped, no C compiler")
            return 0
        exe = Path(tmp) / "harness_client"
        subprocess.run([compiler, "-O2", "-o", str(exe), str(ROOT / "tests/clients/harness_client.c")],
                       check=True)
        server = HarnessServer(Harness(cases["fake RAPL, 2 domains"]), accept_timeout_s=30).start()
        out = subprocess.run([str(exe), str(server.port), "--bench", str(n)], capture_output=True,
                             text=True, timeout=300, check=True).stdout
        server.join(timeout=10)
        for line in out.splitlines():
            what, count, med, p99 = line.split()
            print(f"protocol round trip from C ({what:8}) {count:7}  {med.replace('_us=', ' ')} us   "
                  f"{p99.replace('_us=', ' ')} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
