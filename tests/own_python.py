"""A script run in a Python of its own: the tests of interrupts send the signal to themselves,
and it must not reach pytest."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(script: str) -> subprocess.CompletedProcess:
    """`script` (indented as written in a test) with the checkout importable, and with
    Python's Ctrl-C handler: a Python started with SIGINT ignored (pytest run as a shell's
    background job, some CI runners) keeps it ignored, which the `deepgreen` program does not."""
    script = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
