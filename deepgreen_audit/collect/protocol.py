"""The line protocol that lets non-Python stacks use the harness (docs/protocol.md).

Transport: one TCP connection on the loopback interface per run.  Framing:
UTF-8 lines ending in LF, at most `MAX_LINE_BYTES`.  Every request gets exactly
one reply line, synchronously: `OK <COMMAND> ...` or `ERR <code> <message>`.
A boundary command (BEGIN, END) is answered only after its counter read.

`Session` is the protocol without sockets (request line in, reply line out);
`HarnessServer` serves one client over TCP.  A fault of the harness itself (a counter it
cannot read, a reading of the wrong type, CodeCarbon failing; in a line's handling or
anywhere in the server's thread) is answered `ERR harness-error <cause>` and fails the run
with its cause, never a silent end of the thread.  A protocol error is answered and
also recorded: a run whose session saw one is not trusted and fails, as does
a client that disconnects without BYE (mid-block or not), however the
connection ends (closed, timed out, or cut by the runner because the stack
exited while another process kept the socket open).

The server cannot be stalled: the first line must arrive within
`HELLO_TIMEOUT_S`, every read times out at the session's deadline, the whole
session is bounded by `session_timeout_s` (a watchdog closes the connection
then), lines by `MAX_LINE_BYTES` including the LF, and every numeric value
by `PLAUSIBLE_RANGES`.
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from deepgreen_audit.collect.harness import ENVIRONMENT_KEYS, RUN_KEYS, Harness, _field_type
from deepgreen_audit.device.errors import ProtocolViolation
from deepgreen_audit.package.canonical import format_value, is_canonical, parse_value

PROTOCOL_VERSION = 1
#: The longest request line, its LF included (docs/protocol.md, Framing).
MAX_LINE_BYTES = 4096
#: Seconds a client has, once connected, to send its first line (HELLO).
HELLO_TIMEOUT_S = 60.0
#: The longest session by default (a day); the runner passes the plan's run timeout.
SESSION_TIMEOUT_S = 86400.0
#: Errors kept word for word in a session's record; later ones are only counted.
KEPT_ERRORS = 20
#: The ERR code of a fault of the harness itself (docs/protocol.md), and the most characters
#: of its cause a reply carries (a reply is one line, well within `MAX_LINE_BYTES`).
HARNESS_ERROR = "harness-error"
MAX_FAULT_CHARS = 300
#: The closed range of every numeric value a client can send (docs/protocol.md).
PLAUSIBLE_RANGES: dict[str, tuple[float, float]] = {
    "epoch": (1, 10_000), "epochs": (1, 10_000), "samples": (0, 10 ** 10),
    "loss": (0, 1e6), "accuracy": (0, 1), "learning_rate": (0, 10), "weight_decay": (0, 10),
    "batch_size": (1, 1 << 20), "eval_batch_size": (1, 1 << 20),
    "input_resolution_px": (1, 1 << 16), "loader_workers": (0, 1024),
}


def _in_range(value, what: str):
    low, high = PLAUSIBLE_RANGES[what]
    if not (math.isfinite(value) and low <= value <= high):
        raise ProtocolViolation("bad-value", f"{what}={value!r} is outside [{low}, {high}]")
    return value


def _number(text: str, what: str) -> float | None:
    if text == "-":
        return None
    if not is_canonical(text, "number") and not is_canonical(text, "integer"):
        raise ProtocolViolation("bad-value", f"{what}={text!r} is not a decimal number")
    return _in_range(float(text), what)


def _integer(text: str, what: str) -> int:
    if not is_canonical(text, "integer"):
        raise ProtocolViolation("bad-value", f"{what}={text!r} is not an integer")
    return _in_range(int(text), what)


#: A value's text: any character but %, space and control characters, or a %XX escape.
_PERCENT_ENCODED = re.compile(r"(?:[^%\x00-\x20\x7f]|%[0-9A-Fa-f]{2})*")


def _unquoted(value: str, key: str) -> str:
    """A value's percent-encoding decoded; a `%` without two hex digits after it, or escapes
    that decode to no UTF-8 text, are refused (urllib would pass the first through as text
    and turn the second into U+FFFD)."""
    if not _PERCENT_ENCODED.fullmatch(value):
        raise ProtocolViolation("malformed", f"{key}={value[:40]!r} is not percent-encoded "
                                "(a % is followed by two hex digits)")
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise ProtocolViolation("malformed", f"{key}={value[:40]!r} decodes to bytes that "
                                "are not UTF-8") from None


def _pairs(tokens: list[str], allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ProtocolViolation("malformed", f"{token!r} is not key=value")
        if key not in allowed:
            raise ProtocolViolation("bad-key", f"{key!r} is not one of {', '.join(allowed)}")
        if key in pairs:
            raise ProtocolViolation("malformed", f"{key!r} given twice")
        pairs[key] = _unquoted(value, key)
    missing = [k for k in required if k not in pairs]
    if missing:
        raise ProtocolViolation("malformed", f"missing {', '.join(missing)}")
    return pairs


@dataclass
class Session:
    """One client's conversation with a harness; `handle(line) -> reply` (both without LF)."""

    harness: Harness
    hello: dict[str, str] = field(default_factory=dict)
    greeted: bool = False
    finished: bool = False
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    #: the harness's own faults (a counter it could not read, a reading of the wrong type,
    #: CodeCarbon failing), the first `KEPT_ERRORS` word for word: each fails the run
    faults: list[str] = field(default_factory=list)

    def handle(self, line: str) -> str:
        try:
            return "OK " + self._dispatch(line)
        except ProtocolViolation as exc:
            return self.error(exc.code, exc.message, line)
        except Exception as exc:  # the harness failed, not the client: say so to both
            return self.fault(exc, line)

    def fault(self, exc: BaseException, line: str | None = None) -> str:
        """Record a fault of the harness itself (not of the client's line) and the ERR reply
        that tells the stack: the run fails with the cause, not with a broken pipe."""
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:MAX_FAULT_CHARS]
        if len(self.faults) < KEPT_ERRORS:
            self.faults.append(cause + (f" (answering {line[:80]!r})" if line else ""))
        return f"ERR {HARNESS_ERROR} {cause}"

    def error(self, code: str, message: str, line: str | None = None) -> str:
        """Record a protocol error (the first `KEPT_ERRORS` word for word) and its reply."""
        self.error_count += 1
        if len(self.errors) < KEPT_ERRORS:
            self.errors.append(f"{code}: {message}" + (f" (in {line[:80]!r})" if line else ""))
        return f"ERR {code} {message}"

    def _dispatch(self, line: str) -> str:
        if line.endswith("\r"):
            line = line[:-1]
        tokens = line.split(" ")
        if not line or "" in tokens:
            raise ProtocolViolation("malformed", "empty line or empty token (separate tokens by one space)")
        command, args = tokens[0], tokens[1:]
        if command == "HELLO":
            if self.greeted:
                raise ProtocolViolation("out-of-order", "HELLO was already sent")
            if len(args) != 2:
                raise ProtocolViolation("malformed", "HELLO <version> <stack-name>")
            if args[0] != str(PROTOCOL_VERSION):
                raise ProtocolViolation("version-mismatch", f"this harness speaks version "
                                        f"{PROTOCOL_VERSION}, the client {args[0]!r}")
            self.greeted = True
            params = " ".join(f"{k}={quote(str(v), safe='')}" for k, v in self.hello.items())
            return f"HELLO {PROTOCOL_VERSION}" + (f" {params}" if params else "")
        if command == "PING":
            if args:
                raise ProtocolViolation("malformed", "PING takes no argument")
            return "PONG"
        if command not in ("SET", "BEGIN", "END", "BYE"):
            raise ProtocolViolation("unknown-command", f"{command[:40]!r} (known: HELLO, SET, "
                                    "BEGIN, END, PING, BYE)")
        if not self.greeted:
            raise ProtocolViolation("out-of-order", "send HELLO first")
        if self.finished:
            raise ProtocolViolation("out-of-order", "the session ended with BYE")
        if command == "SET":
            keys = RUN_KEYS + ENVIRONMENT_KEYS
            pairs = _pairs(args, keys, ())
            if not pairs:
                raise ProtocolViolation("malformed", "SET key=value [key=value ...]")
            values = {}
            for key, text in pairs.items():
                type_ = _field_type(key)
                if not is_canonical(text, type_) or text == "":
                    raise ProtocolViolation("bad-value", f"{key}={text!r} is not a canonical {type_}")
                values[key] = parse_value(text, type_)
                if key in PLAUSIBLE_RANGES:
                    _in_range(values[key], key)
            self.harness.report(**values)
            return "SET " + " ".join(pairs)
        if command == "BYE":
            if args:
                raise ProtocolViolation("malformed", "BYE takes no argument")
            if self.harness.open_block:
                epoch, phase = self.harness.open_block
                raise ProtocolViolation("block-open", f"epoch {epoch} {phase} is still open")
            self.finished = True
            return "BYE"
        if len(args) < 2:
            raise ProtocolViolation("malformed", f"{command} <epoch> <phase> ...")
        epoch = _integer(args[0], "epoch")
        phase = args[1]
        if command == "BEGIN":
            if len(args) != 2:
                raise ProtocolViolation("malformed", "BEGIN <epoch> <phase>")
            utc = self.harness.begin(epoch, phase)
            return f"BEGIN {epoch} {phase} {format_value(utc, 'datetime')}"
        pairs = _pairs(args[2:], ("samples", "loss", "accuracy"), ("samples", "loss"))
        record = self.harness.end(
            epoch, phase, samples_processed=_integer(pairs["samples"], "samples"),
            loss=_number(pairs["loss"], "loss"),
            test_accuracy=_number(pairs["accuracy"], "accuracy") if "accuracy" in pairs else None)
        return f"END {epoch} {phase} duration_s={record.duration_s!r}"

    def failure(self, disconnected: bool) -> str | None:
        """Why this session cannot count as a completed run (None when it can)."""
        reasons = [f"the harness failed: {'; '.join(self.faults)}"] if self.faults else []
        if self.error_count:
            reasons.append(f"{self.error_count} protocol error(s), first: {self.errors[0]}")
        if disconnected and not self.finished:
            if self.harness.open_block:
                epoch, phase = self.harness.open_block
                reasons.append(f"client disconnected during epoch {epoch} {phase} (block left open)")
            else:
                reasons.append(f"client disconnected without BYE after {len(self.harness.blocks)} block(s)")
        return "; ".join(reasons) or None


class HarnessServer:
    """Serves one client on 127.0.0.1 (an ephemeral port unless given), within time limits."""

    def __init__(self, harness, hello: dict | None = None, port: int = 0,
                 accept_timeout_s: float = 120.0, hello_timeout_s: float = HELLO_TIMEOUT_S,
                 session_timeout_s: float = SESSION_TIMEOUT_S):
        self.session = Session(harness, dict(hello or {}))
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(accept_timeout_s)
        self.port = self.listener.getsockname()[1]
        self.hello_timeout_s = hello_timeout_s
        self.session_timeout_s = session_timeout_s
        self._conn: socket.socket | None = None
        self._cut: str | None = None  # why the server, not the client, ended the connection
        self._no_client = False
        self._thread: threading.Thread | None = None

    @property
    def failure(self) -> str | None:
        """Why the run cannot count (None when it can): computed from the session so far."""
        if self._no_client:
            return "no client connected to the harness"
        reasons = [r for r in (self.session.failure(disconnected=True), self._cut) if r]
        return "; ".join(reasons) or None

    def serve(self) -> str | None:
        """Serve one client until BYE, disconnect or a time limit; returns why the run failed."""
        try:
            conn, _ = self.listener.accept()
        except OSError:  # timed out, or closed by join()
            self._no_client = True
            return self.failure
        finally:
            self.listener.close()
        self._conn = conn
        watchdog = threading.Timer(self.session_timeout_s, self.cut,
                                   (f"the session exceeded its limit of {self.session_timeout_s:g} s",))
        # The handshake's limit bounds the whole HELLO line: a socket timeout bounds each read
        # only, and a client that drips a byte a second would never reach it.
        handshake = threading.Timer(self.hello_timeout_s, self._cut_unless_greeted)
        for timer in (watchdog, handshake):
            timer.daemon = True
            timer.start()
        try:
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    self._converse(conn, time.monotonic() + self.session_timeout_s)
                except Exception as exc:  # the thread's own fault: told, recorded, never silent
                    reply = self.session.fault(exc)
                    with contextlib.suppress(OSError):
                        conn.sendall(reply.encode("utf-8") + b"\n")
        finally:
            watchdog.cancel()
            handshake.cancel()
        return self.failure

    def _cut_unless_greeted(self) -> None:
        if not self.session.greeted:
            self.cut(f"the client sent no HELLO within {self.hello_timeout_s:g} s")

    def _converse(self, conn: socket.socket, deadline: float) -> None:
        reader = conn.makefile("rb")
        while not self.session.finished:
            if self.session.greeted:
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
            else:
                conn.settimeout(self.hello_timeout_s)
            try:
                raw = reader.readline(MAX_LINE_BYTES + 1)
                if len(raw) > MAX_LINE_BYTES:
                    while raw and not raw.endswith(b"\n"):
                        raw = reader.readline(MAX_LINE_BYTES + 1)
                    reply = self.session.error("too-long", f"a line is at most {MAX_LINE_BYTES} "
                                               "bytes, its LF included")
                elif not raw.endswith(b"\n"):
                    return  # EOF, possibly after half a line: the client went away
                else:
                    reply = self._reply(raw[:-1])
                conn.sendall(reply.encode("utf-8") + b"\n")
            except TimeoutError:
                waited = "sent no HELLO within" if not self.session.greeted else "reached the deadline of"
                limit = self.hello_timeout_s if not self.session.greeted else self.session_timeout_s
                self._cut = self._cut or f"the client {waited} {limit:g} s"
                return
            except OSError:
                return

    def _reply(self, line: bytes) -> str:
        try:
            return self.session.handle(line.decode("utf-8"))
        except UnicodeDecodeError:
            return self.session.error("malformed", "the line is not UTF-8")

    def cut(self, reason: str) -> None:
        """End the connection from this side (a time limit, or the stack process exited)."""
        self._cut = self._cut or reason
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.shutdown(socket.SHUT_RDWR)

    def start(self) -> HarnessServer:
        """Serve in a background thread; `join()` waits for the outcome."""
        self._thread = threading.Thread(target=self.serve, name="deepgreen-harness", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> str | None:
        """The outcome; a session still open after `timeout` is cut and counts as failed."""
        thread = self._thread
        assert thread is not None, "join() before start()"
        thread.join(timeout)
        if thread.is_alive():
            if self._conn is None:
                with contextlib.suppress(OSError):
                    self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            self.cut(f"the connection was still open {timeout:g} s after the stack process ended")
            thread.join(5)
        return self.failure
