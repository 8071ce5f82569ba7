"""The line protocol that lets non-Python stacks use the harness (docs/protocol.md).

Transport: one TCP connection on the loopback interface per run.  Framing:
UTF-8 lines ending in LF, at most `MAX_LINE_BYTES`.  Every request gets exactly
one reply line, synchronously: `OK <COMMAND> ...` or `ERR <code> <message>`.
A boundary command (BEGIN, END) is answered only after its counter read.

`Session` is the protocol without sockets (request line in, reply line out);
`HarnessServer` serves one client over TCP.  A protocol error is answered and
also recorded: a run whose session saw one is not trusted and fails, as does
a client that disconnects without BYE (mid-block or not).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from deepgreen_audit.collect.errors import ProtocolViolation
from deepgreen_audit.collect.harness import ENVIRONMENT_KEYS, RUN_KEYS, _field_type
from deepgreen_audit.package.canonical import format_value, is_canonical, parse_value

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 4096


def _number(text: str, what: str) -> float:
    if text == "-":
        return None
    if not is_canonical(text, "number") and not is_canonical(text, "integer"):
        raise ProtocolViolation("bad-value", f"{what}={text!r} is not a decimal number")
    return float(text)


def _integer(text: str, what: str) -> int:
    if not is_canonical(text, "integer"):
        raise ProtocolViolation("bad-value", f"{what}={text!r} is not an integer")
    return int(text)


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
        pairs[key] = unquote(value)
    missing = [k for k in required if k not in pairs]
    if missing:
        raise ProtocolViolation("malformed", f"missing {', '.join(missing)}")
    return pairs


@dataclass
class Session:
    """One client's conversation with a harness; `handle(line) -> reply` (both without LF)."""

    harness: object
    hello: dict[str, str] = field(default_factory=dict)
    greeted: bool = False
    finished: bool = False
    errors: list[str] = field(default_factory=list)

    def handle(self, line: str) -> str:
        try:
            return "OK " + self._dispatch(line)
        except ProtocolViolation as exc:
            self.errors.append(f"{exc.code}: {exc.message} (in {line[:80]!r})")
            return f"ERR {exc.code} {exc.message}"

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
        reasons = []
        if self.errors:
            reasons.append(f"{len(self.errors)} protocol error(s), first: {self.errors[0]}")
        if disconnected and not self.finished:
            if self.harness.open_block:
                epoch, phase = self.harness.open_block
                reasons.append(f"client disconnected during epoch {epoch} {phase} (block left open)")
            else:
                reasons.append(f"client disconnected without BYE after {len(self.harness.blocks)} block(s)")
        return "; ".join(reasons) or None


class HarnessServer:
    """Serves one client on 127.0.0.1 (an ephemeral port unless given)."""

    def __init__(self, harness, hello: dict | None = None, port: int = 0,
                 accept_timeout_s: float = 120.0):
        self.session = Session(harness, dict(hello or {}))
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(accept_timeout_s)
        self.port = self.listener.getsockname()[1]
        self.failure: str | None = None
        self._thread: threading.Thread | None = None

    def serve(self) -> str | None:
        """Serve one client until BYE and disconnect; returns why the run failed, or None."""
        try:
            conn, _ = self.listener.accept()
        except TimeoutError:
            self.failure = "no client connected to the harness"
            return self.failure
        finally:
            self.listener.close()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = conn.makefile("rb")
            while True:
                try:
                    raw = reader.readline(MAX_LINE_BYTES + 1)
                except OSError:
                    raw = b""
                if not raw:
                    break
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    while raw and not raw.endswith(b"\n"):
                        raw = reader.readline(MAX_LINE_BYTES + 1)
                    reply = self._error("too-long", f"a line is at most {MAX_LINE_BYTES} bytes")
                elif not raw.endswith(b"\n"):
                    break  # a partial line and then EOF: the client went away mid-line
                else:
                    try:
                        reply = self.session.handle(raw[:-1].decode("utf-8"))
                    except UnicodeDecodeError:
                        reply = self._error("malformed", "the line is not UTF-8")
                try:
                    conn.sendall(reply.encode("utf-8") + b"\n")
                except OSError:
                    break
                if self.session.finished:
                    break
        self.failure = self.session.failure(disconnected=True)
        return self.failure

    def _error(self, code: str, message: str) -> str:
        self.session.errors.append(f"{code}: {message}")
        return f"ERR {code} {message}"

    def start(self) -> "HarnessServer":
        """Serve in a background thread; `join()` waits for the outcome."""
        self._thread = threading.Thread(target=self.serve, name="deepgreen-harness", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> str | None:
        self._thread.join(timeout)
        return self.failure
