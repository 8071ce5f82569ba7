"""The harness and its line protocol, from Python and from the compiled C reference client."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from collect_fakes import FakeNvmlState, fake_pynvml, set_energy, zone
from deepgreen_audit.collect.harness import Harness
from deepgreen_audit.collect.instruments import Instruments
from deepgreen_audit.collect.protocol import MAX_LINE_BYTES, HarnessServer, Session
from deepgreen_audit.collect.record import block_row
from deepgreen_audit.device.errors import ProtocolViolation
from deepgreen_audit.device.nvml import Nvml
from deepgreen_audit.device.rapl import Rapl
from deepgreen_audit.spec import boundary_counters

CLIENT_SOURCE = Path(__file__).parent / "clients" / "harness_client.c"


@pytest.fixture
def counters(tmp_path):
    """Instruments over a fake NVML and a fake powercap tree; the counters advance on each read."""
    state = FakeNvmlState(energy_mj=[1_000])
    z = zone(tmp_path / "powercap", "intel-rapl:0", "package-0", 262_143_328_000, max_uj=262_143_328_850)
    inst = Instruments(nvml=Nvml(fake_pynvml(state)), rapl=Rapl(tmp_path / "powercap"))
    real_read = inst.read
    ticks = iter(range(1, 10_000))

    def read():
        k = next(ticks)
        state.energy_mj = [1_000 + 2_500 * k]
        set_energy(z, (262_143_328_000 + 1_000 * k) % 262_143_328_850)
        return real_read()

    inst.read = read
    return inst


def test_harness_block_keeps_raw_readings_and_computes_energy_with_a_wrap(counters):
    synced = []
    harness = Harness(counters, sync=lambda: synced.append(1))
    with harness.block(1, "train") as block:
        block.samples_processed, block.loss = 128, 2.5
    rec = harness.blocks[0]
    assert len(synced) == 2 and rec.duration_s >= 0
    assert rec.nvml_start_mj == (3_500,) and rec.nvml_end_mj == (6_000,)
    assert rec.rapl_start_uj == (262_143_329_000 % 262_143_328_850,) == (150,)
    row = block_row(rec, "r1", counters.rapl.max_energy_range_uj, boundary_counters("cuda"), None)
    assert row["gpu_energy_j"] == 2.5 and row["cpu_energy_j"] == 0.001
    assert row["energy_j"] == 2.501 and row["energy_missing_reason"] is None
    with harness.block(1, "eval") as block:
        block.samples_processed, block.loss, block.test_accuracy = 64, 2.0, 0.5
    assert harness.blocks[1].test_accuracy == 0.5


@pytest.mark.parametrize("steps,code", [
    ([("end", 1, "train")], "no-open-block"),
    ([("begin", 1, "train"), ("begin", 1, "eval")], "block-open"),
    ([("begin", 1, "train"), ("end", 1, "eval")], "block-mismatch"),
    ([("begin", 2, "train"), ("end", 2, "train"), ("begin", 1, "train")], "epoch-backwards"),
    ([("begin", 1, "eval"), ("end", 1, "eval"), ("begin", 1, "train")], "phase-backwards"),
    ([("begin", 1, "train"), ("end", 1, "train"), ("begin", 1, "train")], "block-repeated"),
    ([("begin", 0, "train")], "bad-value"),
    ([("begin", 1, "test")], "bad-value"),
])
def test_harness_refuses_out_of_order_blocks(counters, steps, code):
    harness = Harness(counters)
    with pytest.raises(ProtocolViolation) as info:
        for op, epoch, phase in steps:
            if op == "begin":
                harness.begin(epoch, phase)
            else:
                harness.end(epoch, phase, samples_processed=1, loss=0.5)
    assert info.value.code == code


def test_harness_report_checks_names_and_types(counters):
    harness = Harness(counters)
    harness.report(learning_rate=1e-4, framework="torch")
    with pytest.raises(ProtocolViolation, match="bad-key"):
        harness.report(learning_rat=1e-4)
    with pytest.raises(ProtocolViolation, match="bad-value"):
        harness.report(batch_size=12.5)
    with pytest.raises(ProtocolViolation, match="bad-value"):
        harness.report(initial_weights_sha256="xyz")
    with pytest.raises(ProtocolViolation, match="device='gpu' is not one of cuda, cpu"):
        harness.report(device_name="NVIDIA H200", device="gpu")
    assert "device_name" not in harness.values     # all the values or none


def test_set_records_the_device_a_stack_reports(counters):
    session = _session(counters)
    session.handle("HELLO 1 c")
    assert session.handle("SET device=cuda device_name=NVIDIA%20H200 cudnn_enabled=true tf32_enabled=false") \
        == "OK SET device device_name cudnn_enabled tf32_enabled"
    assert session.harness.values == {"device": "cuda", "device_name": "NVIDIA H200", "cudnn_enabled": True,
                                      "tf32_enabled": False}
    assert session.handle("SET device=tpu").startswith("ERR bad-value device='tpu' is not one of")


def _session(counters):
    return Session(Harness(counters), hello={"run_id": "r 1", "epochs": 2})


@pytest.mark.parametrize("lines,last", [
    (["BEGIN 1 train"], "ERR out-of-order send HELLO first"),
    (["HELLO 2 c"], "ERR version-mismatch"),
    (["HELLO 1 c", "HELLO 1 c"], "ERR out-of-order"),
    (["HELLO 1 c", "FROB 1"], "ERR unknown-command"),
    (["HELLO 1 c", "BEGIN  1 train"], "ERR malformed"),
    (["HELLO 1 c", ""], "ERR malformed"),
    (["HELLO 1 c", "BEGIN one train"], "ERR bad-value"),
    (["HELLO 1 c", "END 1 train samples=1 loss=1"], "ERR no-open-block"),
    (["HELLO 1 c", "BEGIN 1 train", "END 1 train samples=1"], "ERR malformed missing loss"),
    (["HELLO 1 c", "BEGIN 1 train", "END 1 train samples=1 loss=nan"], "ERR bad-value"),
    (["HELLO 1 c", "BEGIN 1 train", "END 1 train samples=1 loss=1 colour=red"], "ERR bad-key"),
    (["HELLO 1 c", "BEGIN 1 train", "BYE"], "ERR block-open"),
    (["HELLO 1 c", "SET batch_size=1.5"], "ERR bad-value"),
    (["HELLO 1 c", "BYE", "PING"], "OK PONG"),
    (["HELLO 1 c", "BYE", "BEGIN 1 train"], "ERR out-of-order the session ended"),
    # issue 16: values beyond any plausible range
    (["HELLO 1 c", "BEGIN 99999999999999999999999 train"], "ERR bad-value epoch="),
    (["HELLO 1 c", "BEGIN 1 train", "END 1 train samples=100000000000000 loss=1"], "ERR bad-value samples="),
    (["HELLO 1 c", "BEGIN 1 train", "END 1 train samples=1 loss=1e+300"], "ERR bad-value loss="),
    (["HELLO 1 c", "BEGIN 1 eval", "END 1 eval samples=1 loss=1 accuracy=1.5"], "ERR bad-value"),
    (["HELLO 1 c", "SET learning_rate=1e+300"], "ERR bad-value learning_rate="),
    (["HELLO 1 c", "SET batch_size=99999999999999999999999"], "ERR bad-value batch_size="),
    (["HELLO 1 c", "SET loader_workers=-1"], "ERR bad-value"),
])
def test_session_replies(counters, lines, last):
    session = _session(counters)
    replies = [session.handle(line) for line in lines]
    assert replies[-1].startswith(last), replies
    assert bool(session.errors) == last.startswith("ERR")


def test_session_round_trip(counters):
    session = _session(counters)
    assert session.handle("HELLO 1 c") == "OK HELLO 1 run_id=r%201 epochs=2"
    assert session.handle("SET framework=c learning_rate=0.0001 framework_backend=nd4j-native") == \
        "OK SET framework learning_rate framework_backend"
    begin = session.handle("BEGIN 1 train")
    assert begin.startswith("OK BEGIN 1 train 20") and begin.endswith("Z")
    assert session.handle("END 1 train samples=128 loss=2.25").startswith("OK END 1 train duration_s=")
    assert session.harness.values == {"framework": "c", "learning_rate": 0.0001, "framework_backend": "nd4j-native"}
    assert session.failure(disconnected=True).startswith("client disconnected without BYE after 1")
    assert session.handle("BYE") == "OK BYE" and session.failure(disconnected=True) is None


def _server(counters, **kw):
    return HarnessServer(Harness(counters), hello={"epochs": 1}, accept_timeout_s=10, **kw).start()


def test_disconnect_mid_block_is_a_recorded_failure(counters):
    server = _server(counters)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        for line in (b"HELLO 1 py\n", b"BEGIN 1 train\n"):
            f.write(line)
            f.flush()
            assert f.readline().startswith(b"OK")
        f.write(b"END 1 tr")  # half a line, then gone
        f.flush()
        f.close()
    assert server.join(timeout=10) == "client disconnected during epoch 1 train (block left open)"


def test_too_long_and_non_utf8_lines_get_error_replies(counters):
    server = _server(counters)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        f.write(b"HELLO 1 py\n" + b"PING " + b"x" * (MAX_LINE_BYTES * 3) + b"\n" + b"\xff\xfe\n" + b"PING\n")
        f.flush()
        replies = [f.readline() for _ in range(4)]
        f.close()
    assert replies[0].startswith(b"OK HELLO")
    assert replies[1].startswith(b"ERR too-long") and replies[2].startswith(b"ERR malformed")
    assert replies[3] == b"OK PONG\n"
    assert "2 protocol error(s)" in server.join(timeout=10)


def test_no_client_is_a_failure_not_a_hang(counters):
    server = HarnessServer(Harness(counters), accept_timeout_s=0.2).start()
    assert server.join(timeout=5) == "no client connected to the harness"


@pytest.fixture(scope="module")
def c_client(tmp_path_factory):
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc/cc) on this host: the reference client cannot be built")
    exe = tmp_path_factory.mktemp("client") / "harness_client"
    subprocess.run([compiler, "-O2", "-Wall", "-Werror", "-o", str(exe), str(CLIENT_SOURCE)], check=True)
    return exe


def _run_client(exe, port, stdin: str):
    proc = subprocess.run([str(exe), str(port)], input=stdin, capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stdout.splitlines()


def test_c_client_round_trips_and_malformed_inputs(c_client, counters):
    server = _server(counters)
    script = "\n".join([
        "BEGIN 1 train",                       # before HELLO
        "HELLO 1 c-test",
        "PING",
        "WHAT is this",                        # unknown command
        "END 1 train samples=1 loss=1",        # end before begin
        "BEGIN 1 train",
        "BEGIN 1 eval",                        # a block is open
        "END 1 train samples=128 loss=2.25",
        "BEGIN 1 eval",
        "END 1 eval samples=64 loss=2.5 accuracy=0.125",
        "BEGIN 0 train",                       # epoch going backwards / invalid
        "BYE",
    ]) + "\n"
    rc, replies = _run_client(c_client, server.port, script)
    assert rc == 0, replies
    codes = [r.split(" ")[1] if r.startswith("ERR") else "OK" for r in replies]
    assert codes == ["out-of-order", "OK", "OK", "unknown-command", "no-open-block", "OK",
                     "block-open", "OK", "OK", "OK", "bad-value", "OK"]
    assert replies[1] == "OK HELLO 1 epochs=1" and replies[2] == "OK PONG"
    failure = server.join(timeout=10)
    assert failure.startswith("5 protocol error(s)")
    assert [(b.epoch, b.phase) for b in server.session.harness.blocks] == [(1, "train"), (1, "eval")]


def test_c_client_as_a_stack_completes_a_session(c_client, counters):
    server = HarnessServer(Harness(counters), hello={"epochs": 2}, accept_timeout_s=10).start()
    proc = subprocess.run([str(c_client), str(server.port), "--stack"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert server.join(timeout=10) is None
    blocks = server.session.harness.blocks
    assert [(b.epoch, b.phase) for b in blocks] == [(1, "train"), (1, "eval"), (2, "train"), (2, "eval")]
    assert blocks[1].test_accuracy == 0.125 and blocks[0].nvml_end_mj[0] > blocks[0].nvml_start_mj[0]


def test_c_client_never_hangs_when_the_server_goes_away(c_client, counters):
    server = _server(counters)
    rc, replies = _run_client(c_client, server.port, "HELLO 1 c\nBYE\nPING\n")
    assert replies[:2] == ["OK HELLO 1 epochs=1", "OK BYE"]
    assert rc == 4  # the server closed after BYE: the client says so and exits


# ---------------------------------------------------------------- issue 16: a server that cannot be stalled


def _exchange(f, line: bytes) -> bytes:
    f.write(line)
    f.flush()
    return f.readline()


def test_a_client_that_sends_nothing_is_dropped_not_waited_for(counters):
    server = HarnessServer(Harness(counters), accept_timeout_s=10, hello_timeout_s=0.3).start()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        failure = server.join(timeout=5)
    assert failure is not None and "sent no HELLO within 0.3 s" in failure


def test_a_session_is_bounded_in_time(counters):
    server = HarnessServer(Harness(counters), accept_timeout_s=10, session_timeout_s=0.5).start()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        assert _exchange(f, b"HELLO 1 py\n").startswith(b"OK HELLO")
        f.write(b"PING")  # a line that never ends
        f.flush()
        failure = server.join(timeout=5)
    assert "limit of 0.5 s" in failure or "deadline of 0.5 s" in failure


def test_the_line_limit_is_4096_bytes_with_the_newline(counters):
    server = _server(counters)
    longest = b"PING " + b"x" * (MAX_LINE_BYTES - 6) + b"\n"
    assert len(longest) == MAX_LINE_BYTES
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        assert _exchange(f, b"HELLO 1 py\n").startswith(b"OK HELLO")
        assert _exchange(f, longest).startswith(b"ERR malformed")  # in length, then parsed
        assert _exchange(f, longest[:-1] + b"x\n").startswith(b"ERR too-long")  # 4,097 bytes
        assert _exchange(f, b"PING\n") == b"OK PONG\n"
        f.close()
    assert "2 protocol error(s)" in server.join(timeout=10)


def test_an_error_fails_the_run_even_when_the_socket_stays_open(counters):
    """The stack exits after an ERR without BYE while another process holds the socket open."""
    server = _server(counters)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        assert _exchange(f, b"HELLO 1 py\n").startswith(b"OK HELLO")
        assert _exchange(f, b"BEGIN 0 train\n").startswith(b"ERR bad-value")
        failure = server.join(timeout=0.3)  # what the runner does once the stack has exited
        assert failure.startswith("1 protocol error(s)")
        assert "still open 0.3 s after the stack process ended" in failure


def test_errors_are_counted_without_growing_without_bound(counters):
    session = _session(counters)
    for _ in range(1000):
        session.handle("FROB")
    assert session.error_count == 1000 and len(session.errors) < 100
    assert session.failure(disconnected=False).startswith("1000 protocol error(s)")


@pytest.mark.parametrize("drip_s", [0.05, 0.15])
def test_a_hello_dripped_past_the_handshake_limit_is_cut(counters, drip_s):
    """The limit bounds the whole HELLO line, not each read: a client that sends a byte every
    `drip_s` (each read well within the limit) is cut at the limit, and the run fails."""
    import time

    server = HarnessServer(Harness(counters), accept_timeout_s=10, hello_timeout_s=0.5).start()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        with contextlib.suppress(OSError):
            for byte in b"HELLO 1 py-dripping-slowly\n":
                s.sendall(bytes([byte]))
                time.sleep(drip_s)
        failure = server.join(timeout=5)
    assert failure is not None and "sent no HELLO within 0.5 s" in failure
    assert time.monotonic() - started < 3


def test_a_hello_in_time_is_not_cut_afterwards(counters):
    import time

    server = HarnessServer(Harness(counters), accept_timeout_s=10, hello_timeout_s=0.3).start()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        assert _exchange(f, b"HELLO 1 py\n").startswith(b"OK HELLO")
        time.sleep(0.5)  # past the handshake's limit: the session goes on
        assert _exchange(f, b"PING\n") == b"OK PONG\n"
        assert _exchange(f, b"BYE\n") == b"OK BYE\n"
        f.close()
    assert server.join(timeout=5) is None


@pytest.mark.parametrize("value", ["%", "%2", "%zz", "a%g0", "%ff", "%c3", "%c3%28", "%ed%a0%80",
                                   "a\tb", "%00x%"])
def test_a_value_that_is_not_percent_encoded_is_refused(counters, value):
    session = _session(counters)
    assert session.handle("HELLO 1 c").startswith("OK HELLO")
    reply = session.handle(f"SET framework={value}")
    assert reply.startswith("ERR malformed framework="), reply
    assert session.harness.values == {} and session.failure(disconnected=False)


@pytest.mark.parametrize("value, text", [("py%20torch", "py torch"), ("caf%C3%A9", "café"),
                                         ("a%3Db", "a=b"), ("plain", "plain")])
def test_a_percent_encoded_value_is_decoded(counters, value, text):
    session = _session(counters)
    session.handle("HELLO 1 c")
    assert session.handle(f"SET framework={value}") == "OK SET framework"
    assert session.harness.values == {"framework": text}


# ---------------------------------------------------------------- the harness's own faults (issue 38)

def _gpu_lost(state, zone_path):
    from collect_fakes import _disk_fake

    state.fault = _disk_fake().NVMLError("GPU is lost")


def _nvml_reads_none(state, zone_path):
    state.energy_mj = [None]


def _nvml_reads_text(state, zone_path):
    state.energy_mj = ["12 mJ"]


def _sysfs_reads_text(state, zone_path):
    (zone_path / "energy_uj").write_text("not a number\n")


def _sysfs_zone_gone(state, zone_path):
    (zone_path / "energy_uj").unlink()


def _sysfs_unreadable_bytes(state, zone_path):
    (zone_path / "energy_uj").write_bytes(b"\xff\xfe\n")


#: A fault of a counter at the lowest layer (fake NVML, fake sysfs), what names it.
HARNESS_FAULTS = {
    "GPU lost (an NVML error)": (_gpu_lost, "NVMLError: GPU is lost"),
    "NVML reading of the wrong type": (_nvml_reads_none, "TypeError"),
    "NVML reading that is text": (_nvml_reads_text, "ValueError"),
    "RAPL counter that is text": (_sysfs_reads_text, "RaplUnavailable"),
    "RAPL counter gone": (_sysfs_zone_gone, "RaplUnavailable"),
    "RAPL counter not UTF-8": (_sysfs_unreadable_bytes, "RaplUnavailable"),
}


@pytest.fixture
def fault_host(tmp_path):
    """Instruments over a fake NVML and a fake powercap zone whose state a test breaks."""
    state = FakeNvmlState(energy_mj=[1_000])
    z = zone(tmp_path / "powercap", "intel-rapl:0", "package-0", 1_000)
    return state, z, Instruments(nvml=Nvml(fake_pynvml(state)), rapl=Rapl(tmp_path / "powercap"))


@pytest.mark.parametrize("fault", list(HARNESS_FAULTS))
@pytest.mark.parametrize("at", ["BEGIN 1 train", "END 1 train samples=1 loss=1"])
def test_a_fault_in_the_harness_is_an_err_line_and_a_failed_run_naming_it(fault, at, fault_host):
    """The counter fails at a boundary: the stack gets `ERR harness-error <cause>` (not a
    broken pipe), the session goes on (PING answers), and the run fails naming the cause."""
    state, z, instruments = fault_host
    server = HarnessServer(Harness(instruments), hello={"epochs": 1}, accept_timeout_s=10).start()
    breaks, cause = HARNESS_FAULTS[fault]
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        assert _exchange(f, b"HELLO 1 py\n").startswith(b"OK HELLO")
        if at.startswith("END"):
            assert _exchange(f, b"BEGIN 1 train\n").startswith(b"OK BEGIN")
        breaks(state, z)
        reply = _exchange(f, at.encode() + b"\n").decode()
        assert reply.startswith("ERR harness-error ") and cause in reply and reply.count("\n") == 1
        assert _exchange(f, b"PING\n") == b"OK PONG\n"
        f.close()
    failure = server.join(timeout=5)
    assert failure is not None and failure.startswith("the harness failed: ") and cause in failure
    assert at.split()[0] in failure


def test_a_fault_outside_a_line_ends_the_session_with_its_cause(counters, monkeypatch):
    """An exception in the server thread itself (here: writing a reply) is told to the stack
    where the socket still works and named in the run's failure, never lost with the thread."""
    server = _server(counters)
    monkeypatch.setattr(server, "_reply", lambda line: (_ for _ in ()).throw(
        MemoryError("no memory for the reply")))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        f = s.makefile("rwb")
        reply = _exchange(f, b"HELLO 1 py\n").decode()
        f.close()
    assert reply.startswith("ERR harness-error MemoryError: no memory for the reply")
    failure = server.join(timeout=5)
    assert failure is not None and "the harness failed: MemoryError: no memory" in failure
