"""rtlprobe (the simulated board's cycle meter, soc/sim/guest/rtlprobe.c) and its host side
(soc/sim/probe.py), without the simulation: rtlprobe built for riscv32 as build-board.sh builds
it (zig cc) and served under qemu-riscv32 on loopback, where its counter is qemu's and /proc is
the host's. Every command of the protocol is driven through probe.py, so a change to either side
that breaks the other fails here rather than an hour into a board run.
"""

import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from conftest import SOC_DIR

REPO = os.path.dirname(SOC_DIR)
sys.path.insert(0, os.path.join(SOC_DIR, "sim"))
import probe  # noqa: E402


def zig() -> str:
    """The zig that build-board.sh uses (scripts/cross/env.sh), installed by the test setup."""
    out = subprocess.run(["bash", "-c", '. scripts/cross/env.sh && printf %s "$AESD_ZIG"'],
                         cwd=REPO, capture_output=True, text=True, check=True)
    assert os.access(out.stdout, os.X_OK), f"no zig at {out.stdout!r} (scripts/cross/setup)"
    return out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """rtlprobe serving on a free loopback port under qemu-riscv32: (port, process)."""
    out = tmp_path_factory.mktemp("rtlprobe") / "rtlprobe"
    subprocess.run([zig(), "cc", "-target", "riscv32-linux-musl", "-mcpu=generic_rv32+m+a+c",
                    "-O2", "-static", "-s", "-Wall", "-Werror", "-o", str(out),
                    os.path.join(SOC_DIR, "sim", "guest", "rtlprobe.c"),
                    os.path.join(SOC_DIR, "sim", "guest", "primitives.c")], check=True)
    port = free_port()
    proc = subprocess.Popen(["qemu-riscv32", str(out), "serve", str(port)],
                            stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"rtlprobe did not listen on {port}: {proc.stderr.read()}")
    yield port, proc
    proc.kill()
    proc.wait()


def test_the_counter_moves_forward(served):
    port, _ = served
    first = probe.now("127.0.0.1", port)
    second = probe.now("127.0.0.1", port)
    assert 0 < first < second


def test_sink_and_echo_count_cycles_and_echo_checks_the_bytes(served):
    port, _ = served
    assert probe.sink("127.0.0.1", 300_000, port) > 0
    assert probe.echo("127.0.0.1", 300_000, port) > 0


def test_framed_echo_answers_only_whole_frames(served):
    port, _ = served
    # Its result over a length that is not a multiple of the frame (the last frame is short).
    assert probe.framed("127.0.0.1", 300_000, 16384, port) > 0
    with probe.connect("127.0.0.1", port) as sock:
        sock.sendall(b"F" + struct.pack("<QQ", 6000, 4096))
        sock.sendall(b"a" * 4000)
        sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            sock.recv(1)  # 4000 bytes of a 4096-byte frame: nothing comes back yet
        sock.settimeout(60)
        sock.sendall(b"b" * 2000)  # completes the first frame and sends the short last one
        back = probe.recv_exact(sock, 6000)
        assert back == b"a" * 4000 + b"b" * 2000
        assert probe.u64(probe.recv_exact(sock, 8)) > 0


def test_a_frame_out_of_range_closes_that_connection_and_the_server_goes_on(served):
    port, proc = served
    for frame in (0, probe.MAX_FRAME + 1):
        with probe.connect("127.0.0.1", port) as sock:
            sock.sendall(b"F" + struct.pack("<QQ", 100, frame))
            assert sock.recv(1) == b""  # closed without an answer
    assert proc.poll() is None
    with pytest.raises(ValueError, match="a frame is 1 to 65536 bytes"):
        probe.framed("127.0.0.1", 100, 0, port)
    with pytest.raises(SystemExit) as usage:  # the command line's refusal, before connecting
        probe.main(["127.0.0.1", "framed", "100", "--frame", "70000", "--port", str(port)])
    assert usage.value.code == 2
    assert probe.echo("127.0.0.1", 1000, port) > 0


def test_proc_reads_the_cpu_ticks_and_the_switch_counts(served):
    port, _ = served
    before = probe.proc("127.0.0.1", port)
    time.sleep(0.05)
    after = probe.proc("127.0.0.1", port)
    assert set(before["cpu_ticks"]) == set(probe.CPU_TICKS)
    assert after["cycles"] > before["cycles"]
    assert after["ctxt"] >= before["ctxt"] > 0
    assert after["intr"] >= before["intr"] > 0
    assert sum(after["cpu_ticks"].values()) >= sum(before["cpu_ticks"].values()) > 0
    # No aesd here: its pid file is the board's (/var/run/aesd/aesd.pid).
    if not os.path.exists("/var/run/aesd/aesd.pid"):
        assert "aesd" not in after


def test_proc_reads_the_network_counters_and_they_count_a_transfer(served):
    port, _ = served
    before = probe.proc("127.0.0.1", port)
    probe.sink("127.0.0.1", 300_000, port)
    after = probe.proc("127.0.0.1", port)
    for name in ("Tcp.InSegs", "Tcp.OutSegs", "Tcp.RetransSegs", "TcpExt.TCPRcvCollapsed",
                 "TcpExt.PruneCalled", "TcpExt.TCPPureAcks", "TcpExt.DelayedACKs"):
        assert name in after["net"], f"{name} missing from {sorted(after['net'])}"
    # The sink's 300 000 bytes came in as segments (loopback's are up to 64 KiB).
    assert after["net"]["Tcp.InSegs"] - before["net"]["Tcp.InSegs"] >= 300_000 // 65_536
    # Interfaces: every one but lo, each with its receive and send counts.
    interfaces = {name.split(".")[0] for name in after["net"] if "." in name
                  and not name.startswith(("Tcp.", "TcpExt."))}
    assert "lo" not in interfaces
    for iface in interfaces:
        for field in ("rx_packets", "rx_drop", "tx_packets"):
            assert f"{iface}.{field}" in after["net"]


def test_mem_without_aesd_is_a_clear_error(served):
    port, _ = served
    if os.path.exists("/var/run/aesd/aesd.pid"):
        pytest.fail("this machine has an aesd pid file; the test needs one without")
    with pytest.raises(probe.ProbeError, match="no memory figures.*no aesd pid file"):
        probe.mem("127.0.0.1", port)


PRIMITIVES = ("null-syscall", "clock-read", "page-map", "pipe-self", "thread-round-trip",
              "memcpy-16k", "memcpy-16k-offset")


def test_primitives_are_each_measured_the_number_of_times_asked(served):
    port, _ = served
    costs = probe.primitives("127.0.0.1", 50, port)
    assert sorted(costs) == sorted(PRIMITIVES)
    assert all(cost > 0 for cost in costs.values()), costs
    # Under qemu the counter is the host's clock, so only an order that holds on any
    # machine is checked: a round trip through another thread is four system calls and
    # two switches, more than one system call.
    assert costs["thread-round-trip"] > costs["null-syscall"], costs


def test_primitives_out_of_range_are_refused_on_both_sides_and_the_server_goes_on(served):
    port, proc = served
    for ops in (0, probe.MAX_PRIMITIVE_OPS + 1):
        with pytest.raises(ValueError, match="operations per primitive"):
            probe.primitives("127.0.0.1", ops, port)
        # The guest refuses it too (closes without an answer), and serves on.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"K" + struct.pack("<Q", ops))
            assert s.recv(1) == b""
    assert proc.poll() is None
    with pytest.raises(SystemExit) as usage:  # the command line's refusal, before connecting
        probe.main(["127.0.0.1", "primitives", "0", "--port", str(port)])
    assert usage.value.code == 2
    # The same connection with a count in range is answered: the count was the refusal's reason.
    assert probe.primitives("127.0.0.1", 1, port)["null-syscall"] > 0


def test_the_primitives_parser_refuses_a_guest_error_and_a_short_line(monkeypatch):
    answers = iter([b"null-syscall error getppid: Bad\n", b"null-syscall 7\n"])
    monkeypatch.setattr(probe, "text_answer", lambda *_: next(answers))
    with pytest.raises(probe.ProbeError, match="could not measure null-syscall: getppid: Bad"):
        probe.primitives("127.0.0.1", 7)
    with pytest.raises(probe.ProbeError, match="not a line NAME 7 CYCLES"):
        probe.primitives("127.0.0.1", 7)


def test_an_unknown_command_closes_that_connection_and_the_server_goes_on(served):
    port, proc = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"?")
        assert s.recv(1) == b""
    assert proc.poll() is None
    assert probe.now("127.0.0.1", port) > 0


def test_the_proc_parser_refuses_what_is_not_numbers(monkeypatch, served):
    port, _ = served

    class Garbled:
        def __init__(self, *_):
            self.sent = False

        def __enter__(self):
            return self

        def __exit__(self, *_):
            return False

        def sendall(self, _):
            pass

        def recv(self, _):
            if self.sent:
                return b""
            self.sent = True
            return b"cycles 12\ncpu 1 2 x\n"

    monkeypatch.setattr(probe, "connect", Garbled)
    with pytest.raises(probe.ProbeError, match="not a line of numbers"):
        probe.proc("127.0.0.1", port)
