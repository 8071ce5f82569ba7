"""A test stand-in between a built stack and its harness, for the protocol tests.

The plan runs `python protocol_proxy.py --mode MODE --report FILE -- STACK COMMAND...` as
the stack's command; the runner (which hosts the harness) hands it DEEPGREEN_HARNESS_PORT.
It listens on a port of its own, starts the real stack pointed at it, and relays every
line both ways.  Modes:

* delay: every `OK BEGIN` reply is held for --hold-s seconds; meanwhile it watches whether
  the stack sends anything (a stack that starts its phase before the answer would go on
  to send END early).
* kill: right after relaying `OK BEGIN 1 train`, it waits --hold-s seconds (the stack is
  now inside its phase) and SIGKILLs its parent, the runner and with it the harness; the
  harness's side closes, so the stack's next request finds no harness.

Either way it waits for the stack to exit and writes a JSON report to FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time


def receive(sock: socket.socket) -> bytes:
    """The next bytes, or b"" when the peer closed or went away (a killed harness resets)."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("delay", "kill"), required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--hold-s", type=float, default=2.0)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()

    harness = socket.create_connection(("127.0.0.1", int(os.environ["DEEPGREEN_HARNESS_PORT"])))
    listener = socket.create_server(("127.0.0.1", 0))
    env = dict(os.environ, DEEPGREEN_HARNESS_PORT=str(listener.getsockname()[1]))
    started = time.monotonic()
    stack = subprocess.Popen(args.command, env=env)
    listener.settimeout(120)
    client, _ = listener.accept()
    report = {"holds": [], "killed_harness_at_s": None}
    pending = b""
    killed = False
    while True:
        readable, _, _ = select.select([client, harness], [], [], 1.0)
        if client in readable:
            data = receive(client)
            if not data:
                break
            try:
                harness.sendall(data)
            except OSError:
                break
        if harness in readable:
            data = receive(harness)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if args.mode == "delay" and line.startswith(b"OK BEGIN"):
                    sent_during_hold = 0
                    until = time.monotonic() + args.hold_s
                    while (left := until - time.monotonic()) > 0:
                        if select.select([client], [], [], left)[0]:
                            sent_during_hold = len(client.recv(65536, socket.MSG_PEEK))
                            break
                    time.sleep(max(0.0, until - time.monotonic()))
                    report["holds"].append({"reply": line.decode(), "bytes_sent_during_hold": sent_during_hold})
                client.sendall(line + b"\n")
                if args.mode == "kill" and line.startswith(b"OK BEGIN 1 train") and not killed:
                    time.sleep(args.hold_s)
                    report["killed_harness_at_s"] = time.monotonic() - started
                    os.kill(os.getppid(), signal.SIGKILL)
                    killed = True
    client.close()
    harness.close()
    try:
        report["stack_returncode"] = stack.wait(timeout=60)
    except subprocess.TimeoutExpired:
        stack.kill()
        report["stack_returncode"] = "hung"
    report["stack_exited_at_s"] = time.monotonic() - started
    with open(args.report + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(report, fh)
    os.replace(args.report + ".tmp", args.report)
    return 0 if report["stack_returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
