"""The report of scripts/bench/board-rtl.sh (scripts/bench/board-rtl-report.py), without a board:
rows and /proc figures of known values in the files board-rtl.sh writes, and the JSON checked
against the arithmetic worked by hand, so a slip in the marginal cost or the echo ratio fails
here rather than in a published figure after an hour of simulation.
"""

import json
import os
import subprocess
import sys

from conftest import SOC_DIR

REPORT = os.path.join(os.path.dirname(SOC_DIR), "scripts", "bench", "board-rtl-report.py")


def proc(cycles, user, system, softirq, ctxt, in_segs, aesd_utime=None):
    """One probe.py proc answer: the counter, /proc/stat's ticks, and a few net counters."""
    figures = {"cycles": cycles, "ctxt": ctxt, "intr": 2 * ctxt,
               "cpu_ticks": {"user": user, "nice": 0, "system": system, "idle": 10,
                             "iowait": 0, "irq": 0, "softirq": softirq},
               "net": {"Tcp.InSegs": in_segs, "eth0.rx_drop": 0}}
    if aesd_utime is not None:
        figures["aesd"] = {"utime": aesd_utime, "stime": 1}
    return figures


def run_report(tmp_path, rows, splits, json_out=True, primitives=""):
    files = {}
    for name, lines in (("rows", rows), ("splits", splits), ("backends", ["board-1c aes-insn"]),
                        ("steps", ['{"script": "S50aesd", "exit": 0, "ended_s": 9.5, "took_s": 4.68}'])):
        files[name] = tmp_path / name
        files[name].write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, REPORT, str(files["rows"]), str(out) if json_out else "", "1041211541",
         '{"rss_kib": 900}', "77", str(files["backends"]), "integrated RAM", str(files["splits"]),
         str(files["steps"]), primitives], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout, (json.loads(out.read_text()) if json_out else None)


ROWS = [
    # workload cores bytes cycles link: the echo costs 200 cycles a byte beyond 1 M fixed, aesd 280
    # beyond 3 M; the sink has one size only (no marginal).
    "tcp-sink 1 65536 7000000 100",
    "tcp-echo 1 65536 14107200 100",
    "tcp-echo 1 262144 53428800 100",
    "aesd-encrypt-aes-insn 1 65536 21350080 100",
    "aesd-encrypt-aes-insn 1 262144 76400320 100",
    "tcp-echo 1 262144 40000000 off",
    # aesd's CBC kernel alone, no network: 20 cycles a byte beyond 100 k.
    "cipher-aes-insn 1 65536 1410720 none",
    "cipher-aes-insn 1 262144 5342880 none",
]


def test_marginal_cost_and_echo_ratio_are_worked_per_link(tmp_path):
    stdout, doc = run_report(tmp_path, ROWS, [])
    marginal = {(m["workload"], m["link"]): m for m in doc["marginal"]}
    # Only the workloads measured at two sizes over one link have a marginal cost.
    assert set(marginal) == {("tcp-echo", "100 Mb/s"), ("aesd-encrypt-aes-insn", "100 Mb/s"),
                             ("cipher-aes-insn", "none")}
    echo, aesd = marginal["tcp-echo", "100 Mb/s"], marginal["aesd-encrypt-aes-insn", "100 Mb/s"]
    assert echo["marginal_cycles_per_byte"] == 200.0
    assert echo["fixed_cycles"] == 14107200 - 65536 * 200
    assert aesd["marginal_cycles_per_byte"] == 280.0
    assert aesd["fixed_cycles"] == 21350080 - 65536 * 280
    assert aesd["times_echo"] == 1.4 and echo["times_echo"] == 1.0
    assert aesd["mb_s_100mhz"] == round(100 / 280, 4)
    assert "1.40" in next(line for line in stdout.splitlines() if line.startswith("aesd-encrypt"))
    # Every row is kept, with its link named, and the unpaced one apart from the paced.
    assert len(doc["rows"]) == len(ROWS)
    unpaced = [r for r in doc["rows"] if r["link_mbit"] is None]
    assert [(r["workload"], r["link"]) for r in unpaced] == [
        ("tcp-echo", "unpaced"), ("cipher-aes-insn", "none"), ("cipher-aes-insn", "none")]
    # The cipher's rows have no echo on their (absent) link to be compared with.
    cipher = marginal["cipher-aes-insn", "none"]
    assert cipher["marginal_cycles_per_byte"] == 20.0 and cipher["times_echo"] is None
    assert doc["rows"][0]["cycles_per_byte"] == round(7000000 / 65536, 2)
    assert doc["boot_to_accepting_cycles"] == 1041211541
    assert doc["aes_backends"] == {"board-1c": "aes-insn"}
    assert doc["boot_steps"][0]["script"] == "S50aesd"
    assert doc["aesd_memory"] == {"rss_kib": 900}


def test_where_the_cycles_went_is_the_difference_of_the_two_reads(tmp_path):
    before = proc(1_000_000, user=100, system=200, softirq=5, ctxt=1000, in_segs=50, aesd_utime=7)
    after = proc(41_000_000, user=110, system=225, softirq=10, ctxt=1512, in_segs=435, aesd_utime=15)
    split = {"workload": "aesd-encrypt-aes-insn", "link": "100", "bytes": 262144,
             "before": before, "after": after}
    stdout, doc = run_report(tmp_path, ROWS[:1], [json.dumps(split)])
    (s,) = doc["where_cycles_went"]
    assert s["cycles"] == 40_000_000
    # 10 user, 25 system, 5 softirq, 0 idle ticks in the row: shares of 40.
    assert s["cpu_ticks"]["user"] == 10 and s["cpu_ticks"]["idle"] == 0
    assert s["share"] == {"user": 0.25, "system": 0.625, "irq": 0.125, "idle": 0.0}
    assert s["context_switches_per_kib"] == 2.0 and s["interrupts_per_kib"] == 4.0
    assert s["aesd"] == {"utime": 8, "stime": 0}
    assert s["net"] == {"Tcp.InSegs": 385, "eth0.rx_drop": 0}
    assert "what the network did" in stdout and "385" in stdout


def test_a_run_with_the_hosts_timers_in_wall_time_is_kept_apart(tmp_path):
    rows = ROWS[1:3] + [r.replace(" 100", " 100-wall-rto") for r in ROWS[1:3]]
    _, doc = run_report(tmp_path, rows, [])
    links = [(r["link"], r["link_mbit"], r["host_rto"]) for r in doc["rows"]]
    assert links == [("100 Mb/s", 100, "guest")] * 2 + [("100 Mb/s, host RTO in wall time", 100, "wall")] * 2
    # Each echo is the anchor of its own link only.
    assert [m["link"] for m in doc["marginal"]] == ["100 Mb/s", "100 Mb/s, host RTO in wall time"]
    assert all(m["times_echo"] == 1.0 for m in doc["marginal"])


def test_the_primitives_are_listed_and_a_thread_switch_worked_out(tmp_path):
    measured = {"null-syscall": 1500.0, "pipe-self": 6000.0, "thread-round-trip": 40000.0,
                "memcpy-16k": 81920.0}
    stdout, doc = run_report(tmp_path, ROWS, [], primitives=json.dumps(measured))
    # (40 000 - 2 x 6 000) / 2: the round trip's two switches, without its four system calls.
    assert doc["primitives_cycles"]["thread-switch"] == 14000.0
    assert doc["primitives_cycles"]["null-syscall"] == 1500.0
    assert "thread-switch" in stdout and "14000" in stdout
    assert "(5.00 per byte)" in stdout  # the memcpy of 16 KiB
    _, without = run_report(tmp_path, ROWS, [])
    assert without["primitives_cycles"] is None


def test_without_a_json_file_it_only_prints(tmp_path):
    stdout, doc = run_report(tmp_path, ROWS, [], json_out=False)
    assert doc is None and not (tmp_path / "out.json").exists()
    assert "marginal (between the two sizes)" in stdout
