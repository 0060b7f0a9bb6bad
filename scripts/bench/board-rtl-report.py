#!/usr/bin/env python3
"""The tables and JSON of scripts/bench/board-rtl.sh, from the files it wrote.

Usage: board-rtl-report.py ROWS JSON_OUT BOOT_CYCLES RSS_JSON WALL_S BACKENDS MEMORY SPLITS BOOT_STEPS
                           [PRIMITIVES_JSON]

ROWS holds one measured row per line ("workload cores bytes cycles link");
SPLITS one JSON line per row with the guest's /proc figures before and after
it; BOOT_STEPS the init scripts' JSON lines; BACKENDS "variant backend" lines.
PRIMITIVES_JSON is probe.py primitives' answer (cycles per operation by name).
JSON_OUT, BOOT_CYCLES, RSS_JSON and PRIMITIVES_JSON may be empty (no JSON
file, not measured).
Prints the marginal table (per-byte cost between the two sizes of each
workload and link, and against the echo's), where each row's cycles went and
what the network did in it, and what the guest's primitives cost (a switch
between threads worked out from the pipe round trips); writes everything to
JSON_OUT when one is named.
"""
import json
import sys

rows_file, out, boot, rss, wall, backends_file, memory, splits_file, steps_file = sys.argv[1:10]
primitives = json.loads(sys.argv[10]) if len(sys.argv) > 10 and sys.argv[10] else None


WALL_RTO = "-wall-rto"


def link_fields(link):
    """A row's link: "100" (Mb/s of guest time, paced), "off" (unpaced) or "none" (no network);
    a "-wall-rto" suffix: the host's retransmission timers ran in wall time (--host-rto wall)."""
    host_rto = "guest"
    if link.endswith(WALL_RTO):
        link, host_rto = link[: -len(WALL_RTO)], "wall"
    rto = ", host RTO in wall time" if host_rto == "wall" else ""
    if link in ("off", "none"):
        name = "unpaced" if link == "off" else "none"
        return {"link": name + rto, "link_mbit": None, "host_rto": host_rto}
    return {"link": f"{link} Mb/s{rto}", "link_mbit": int(link), "host_rto": host_rto}


rows = []
for line in open(rows_file):
    w, c, b, y, link = line.split()
    b, y = int(b), int(y)
    rows.append({"workload": w, "cores": int(c), "bytes": b, "cycles": y, **link_fields(link),
                 "cycles_per_byte": round(y / b, 2),
                 "mb_s_100mhz": round(b / y * 100, 4), "mb_s_150mhz": round(b / y * 150, 4)})
marginal = []
for w, link in dict.fromkeys((r["workload"], r["link"]) for r in rows):
    sizes = sorted((r for r in rows if r["workload"] == w and r["link"] == link),
                   key=lambda r: r["bytes"])
    if len(sizes) != 2 or sizes[0]["bytes"] == sizes[1]["bytes"]:
        continue
    small, big = sizes
    per_byte = (big["cycles"] - small["cycles"]) / (big["bytes"] - small["bytes"])
    marginal.append({"workload": w, "link": link, "link_mbit": big["link_mbit"],
                     "cores": big["cores"], "bytes_small": small["bytes"],
                     "bytes": big["bytes"], "marginal_cycles_per_byte": round(per_byte, 2),
                     "fixed_cycles": round(small["cycles"] - small["bytes"] * per_byte),
                     "mb_s_100mhz": round(100 / per_byte, 4) if per_byte > 0 else None})
if marginal:
    print(f"\n{'marginal (between the two sizes)':<34} {'link':>9} {'cyc/B':>8} {'fixed cycles':>13} {'MB/s@100':>9} {'x echo':>7}")
    for m in marginal:
        # Against the echo over the same link.
        echo = next((e for e in marginal if e["workload"] == "tcp-echo" and e["link"] == m["link"]), None)
        ratio = m["marginal_cycles_per_byte"] / echo["marginal_cycles_per_byte"] if echo else None
        m["times_echo"] = round(ratio, 3) if ratio else None
        mbs = f"{m['mb_s_100mhz']:9.3f}" if m["mb_s_100mhz"] else f"{'-':>9}"
        times = f"{ratio:7.2f}" if ratio else f"{'-':>7}"
        print(f"{m['workload']:<34} {m['link']:>9} {m['marginal_cycles_per_byte']:8.1f} {m['fixed_cycles']:13d} {mbs} {times}")
# Where each row's cycles went, from the guest's /proc before and after it.
splits = []
for line in open(splits_file):
    s = json.loads(line)
    before, after = s["before"], s["after"]
    ticks = {k: after["cpu_ticks"][k] - before["cpu_ticks"][k] for k in after["cpu_ticks"]}
    total = sum(ticks.values()) or 1
    kib = s["bytes"] / 1024
    split = {"workload": s["workload"], **link_fields(s["link"]), "bytes": s["bytes"],
             "cycles": after["cycles"] - before["cycles"], "cpu_ticks": ticks,
             "share": {"user": round((ticks["user"] + ticks["nice"]) / total, 3),
                       "system": round(ticks["system"] / total, 3),
                       "irq": round((ticks["irq"] + ticks["softirq"]) / total, 3),
                       "idle": round((ticks["idle"] + ticks["iowait"]) / total, 3)},
             "context_switches_per_kib": round((after["ctxt"] - before["ctxt"]) / kib, 2),
             "interrupts_per_kib": round((after["intr"] - before["intr"]) / kib, 2)}
    if "aesd" in before and "aesd" in after:
        split["aesd"] = {k: after["aesd"][k] - before["aesd"][k] for k in after["aesd"]}
    if "net" in before and "net" in after:
        split["net"] = {k: v - before["net"][k] for k, v in after["net"].items() if k in before["net"]}
    splits.append(split)
if splits:
    print(f"\n{'where the cycles went (ticks: 1 M cycles)':<34} {'link':>9} {'bytes':>8} {'user':>6} {'system':>6} {'irq':>6} {'idle':>6} {'ctxt/KiB':>8} {'intr/KiB':>8} {'aesd usr':>8} {'aesd sys':>8}")
    for s in splits:
        a = s.get("aesd", {})
        sh = s["share"]
        print(f"{s['workload']:<34} {s['link']:>9} {s['bytes']:8d} {sh['user']:6.1%} {sh['system']:6.1%} {sh['irq']:6.1%} {sh['idle']:6.1%} "
              f"{s['context_switches_per_kib']:8.2f} {s['interrupts_per_kib']:8.2f} {a.get('utime', '-'):>8} {a.get('stime', '-'):>8}")
# What the network did in each row (the guest's TCP counters and its MAC's).
NET_COLUMNS = [("segs in", "Tcp.InSegs"), ("segs out", "Tcp.OutSegs"),
               ("retrans", "Tcp.RetransSegs"), ("pure ack", "TcpExt.TCPPureAcks"),
               ("dly ack", "TcpExt.DelayedACKs"), ("ofo", "TcpExt.TCPOFOQueue"),
               ("collapse", "TcpExt.TCPRcvCollapsed"), ("pruned", "TcpExt.PruneCalled"),
               ("zero win", "TcpExt.TCPToZeroWindowAdv"), ("dsack", "TcpExt.TCPDSACKOldSent")]
nets = [s for s in splits if "net" in s]
if nets:
    print(f"\n{'what the network did (counts)':<34} {'link':>9} {'bytes':>8} " + " ".join(f"{c:>8}" for c, _ in NET_COLUMNS) + f" {'mac drop':>8}")
    for s in nets:
        net = s["net"]
        drops = sum(v for k, v in net.items() if k.endswith((".rx_drop", ".rx_fifo", ".rx_errs")))
        print(f"{s['workload']:<34} {s['link']:>9} {s['bytes']:8d} " + " ".join(f"{net.get(k, '-'):>8}" for _, k in NET_COLUMNS) + f" {drops:8d}")
if primitives:
    # A round trip through another thread is pipe-self's two system calls on each side plus
    # two switches; what is left over, halved, is one switch between threads.
    if "thread-round-trip" in primitives and "pipe-self" in primitives:
        primitives["thread-switch"] = (primitives["thread-round-trip"] - 2 * primitives["pipe-self"]) / 2
    print(f"\n{'what a primitive costs on the guest':<34} {'cycles':>10}")
    for name, cost in primitives.items():
        per_byte = f"  ({cost / 16384:.2f} per byte)" if name.startswith("memcpy-16k") else ""
        derived = "  (worked out: round trip - 2 x pipe-self, halved)" if name == "thread-switch" else ""
        print(f"{name:<34} {cost:10.0f}{per_byte}{derived}")
if out:
    doc = {"rows": rows, "marginal": marginal, "where_cycles_went": splits,
           "boot_to_accepting_cycles": int(boot) if boot else None,
           "boot_steps": [json.loads(line) for line in open(steps_file)],
           "aesd_memory": json.loads(rss) if rss else None, "wall_seconds": int(wall),
           "aes_backends": dict(line.split() for line in open(backends_file)),
           "memory": memory, "primitives_cycles": primitives,
           "note": f"guest cycles from the guest's own counter (rtlprobe); {memory}, simulated PHY"}
    json.dump(doc, open(out, "w"), indent=2)
