#!/usr/bin/env python3
"""Host side of rtlprobe, the simulated board's cycle meter (soc/sim/guest/rtlprobe.c).

Every figure is read from the guest's cycle counter, so the host's speed and
the simulator's do not enter:

  probe.py HOST now            the guest's counter
  probe.py HOST sink BYTES     send BYTES to the guest, which drops them:
                               the guest's cycles from first to last byte
  probe.py HOST echo BYTES     send BYTES and read them back (checked):
                               the guest's cycles from first byte to last
  probe.py HOST framed BYTES [--frame F]
                               the same echo a whole frame of F bytes
                               (default 16384, aesd's data frames on the
                               board) at a time: the guest reads each frame
                               completely before it writes it back
  probe.py HOST mem            aesd's VmRSS / VmHWM lines on the guest
  probe.py HOST proc           where the guest's cycles go: the counter,
                               /proc/stat's CPU ticks (user, system, irq,
                               softirq, idle...), context switches and
                               interrupts, and aesd's own user and system
                               ticks and its threads' context switches, and
                               the network's counters ("net": TCP segments,
                               retransmissions, collapsed and pruned receive
                               queues, the MAC's packets and drops)
  probe.py HOST primitives [OPS]
                               what the primitives of a service cost on the
                               guest (rtlprobe's primitives.c: a system
                               call, a clock read, a page mapped and
                               unmapped, a pipe on one thread, a round trip
                               between two threads, a 16 KiB memcpy aligned
                               and 5 bytes off), OPS times each (default
                               200, at most 100000): cycles per operation

Prints one JSON object. Exit status: 0 done; 1 the guest did not answer as
expected (echoed bytes differ, connection lost); 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading

PORT = 7900
TIMEOUT = 3600.0  # seconds of wall time: a simulated second is minutes here


class ProbeError(Exception):
    """The guest's answer was not what the protocol says."""


def connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = sock.recv(min(n, 65536))
        if not chunk:
            raise ProbeError(f"connection closed with {n} bytes still expected")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def u64(data: bytes) -> int:
    return struct.unpack("<Q", data)[0]


def now(host: str, port: int = PORT) -> int:
    with connect(host, port) as sock:
        sock.sendall(b"T")
        return u64(recv_exact(sock, 8))


def payload(n: int) -> bytes:
    """Incompressible bytes, so nothing on the way can shortcut them."""
    return os.urandom(n)


def sink(host: str, n: int, port: int = PORT) -> int:
    data = payload(n)
    with connect(host, port) as sock:
        sock.sendall(b"S" + struct.pack("<Q", n))
        sock.sendall(data)
        return u64(recv_exact(sock, 8))


def echoed(host: str, command: bytes, n: int, port: int) -> int:
    """Sends `command`, then n bytes while reading them back (checked); the guest's cycles."""
    data = payload(n)
    with connect(host, port) as sock:
        sock.sendall(command)
        sender = threading.Thread(target=sock.sendall, args=(data,))
        sender.start()
        back = recv_exact(sock, n)
        sender.join()
        if back != data:
            raise ProbeError("the echoed bytes differ from those sent")
        return u64(recv_exact(sock, 8))


def echo(host: str, n: int, port: int = PORT) -> int:
    return echoed(host, b"E" + struct.pack("<Q", n), n, port)


FRAME = 16384  # bytes: the board's aesd.toml chunk-size
MAX_FRAME = 65536  # rtlprobe's buffer


def framed(host: str, n: int, frame: int = FRAME, port: int = PORT) -> int:
    if not 1 <= frame <= MAX_FRAME:
        raise ValueError(f"a frame is 1 to {MAX_FRAME} bytes, not {frame}")
    return echoed(host, b"F" + struct.pack("<QQ", n, frame), n, port)


def text_answer(host: str, command: bytes, port: int = PORT) -> bytes:
    """The whole answer to a one-byte command that the guest answers in text, then closes."""
    with connect(host, port) as sock:
        sock.sendall(command)
        text = b""
        while chunk := sock.recv(4096):
            text += chunk
    return text


def mem(host: str, port: int = PORT) -> dict:
    text = text_answer(host, b"M", port)
    fields = {}
    for line in text.decode("ascii", "replace").splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            fields[key.strip().lower() + "_kib"] = int(parts[0])
    if not fields:
        raise ProbeError(f"no memory figures in the answer: {text!r}")
    return fields


CPU_TICKS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")


def proc(host: str, port: int = PORT) -> dict:
    text = text_answer(host, b"P", port)
    result: dict = {}
    for line in text.decode("ascii", "replace").splitlines():
        key, *values = line.split()
        if key == "net" and len(values) == 2 and values[1].isdigit():
            result.setdefault("net", {})[values[0]] = int(values[1])
            continue
        if not all(v.isdigit() for v in values) or not values:
            raise ProbeError(f"not a line of numbers: {line!r}")
        numbers = [int(v) for v in values]
        if key == "cpu":
            result["cpu_ticks"] = dict(zip(CPU_TICKS, numbers))
        elif key in ("cycles", "ctxt", "intr"):
            result[key] = numbers[0]
        elif key == "aesd" and len(numbers) == 4:
            result["aesd"] = dict(zip(("utime", "stime", "voluntary", "involuntary"), numbers))
    if "cycles" not in result or "cpu_ticks" not in result:
        raise ProbeError(f"no counter or CPU ticks in the answer: {text!r}")
    return result


PRIMITIVE_OPS = 200  # per primitive: about 20 M guest cycles in all on the board
MAX_PRIMITIVE_OPS = 100_000  # rtlprobe's PRIMITIVES_MAX_OPS


def primitives(host: str, ops: int = PRIMITIVE_OPS, port: int = PORT) -> dict:
    """Cycles per operation of each primitive the guest measured, by name."""
    if not 1 <= ops <= MAX_PRIMITIVE_OPS:
        raise ValueError(f"1 to {MAX_PRIMITIVE_OPS} operations per primitive, not {ops}")
    text = text_answer(host, b"K" + struct.pack("<Q", ops), port)
    result = {}
    for line in text.decode("ascii", "replace").splitlines():
        name, *values = line.split(maxsplit=2)
        if values and values[0] == "error":
            raise ProbeError(f"the guest could not measure {name}: {' '.join(values[1:])}")
        if len(values) != 2 or not all(v.isdigit() for v in values) or int(values[0]) != ops:
            raise ProbeError(f"not a line NAME {ops} CYCLES: {line!r}")
        result[name] = int(values[1]) / ops
    if not result:
        raise ProbeError(f"no primitives in the answer: {text!r}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("host")
    parser.add_argument("command", choices=["now", "sink", "echo", "framed", "mem", "proc",
                                                "primitives"])
    parser.add_argument("bytes", nargs="?", type=int,
                        help="sink, echo, framed: bytes; primitives: operations of each")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--frame", type=int, default=FRAME,
                        help=f"framed: bytes per frame, 1 to {MAX_FRAME} (default {FRAME})")
    args = parser.parse_args(argv)
    if args.command in ("sink", "echo", "framed") and (args.bytes is None or args.bytes <= 0):
        parser.error(f"{args.command} needs a positive byte count")
    try:
        if args.command == "now":
            result = {"cycles": now(args.host, args.port)}
        elif args.command == "mem":
            result = mem(args.host, args.port)
        elif args.command == "proc":
            result = proc(args.host, args.port)
        elif args.command == "primitives":
            try:
                ops = PRIMITIVE_OPS if args.bytes is None else args.bytes
                result = primitives(args.host, ops, args.port)
            except ValueError as e:  # the count, refused before connecting
                parser.error(str(e))
        elif args.command == "framed":
            try:
                cycles = framed(args.host, args.bytes, args.frame, args.port)
            except ValueError as e:  # the frame's size, refused before connecting
                parser.error(f"--frame: {e}")
            result = {"bytes": args.bytes, "frame": args.frame, "cycles": cycles}
        else:
            fn = sink if args.command == "sink" else echo
            cycles = fn(args.host, args.bytes, args.port)
            result = {"bytes": args.bytes, "cycles": cycles}
    except (OSError, ProbeError) as e:
        print(f"probe.py: {args.command}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
