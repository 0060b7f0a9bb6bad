#!/usr/bin/env python3
"""Fixes the device tree LiteX's litex_json2dts_linux writes for a VexRiscv-SMP
SoC so that upstream OpenSBI's generic platform and Linux 6.1 boot on it.

Two changes (docs/board-rtl.md, DESIGN.md "Facts for Linux on the SoC's RTL"):

* a CLINT node (``riscv,clint0``, the cluster's timer and software
  interrupts at ``memories.clint`` of csr.json, 0xf0010000 by default):
  json2dts writes it only for Rocket and VexiiRiscv, because LiteX's own
  OpenSBI fork hard-codes it; upstream OpenSBI finds its timer and IPIs only
  through it;
* ``timebase-frequency`` set to the board's clock (100 MHz): litex_sim says
  1 MHz, and with that a 250 Hz tick costs more than its period (the
  simulated CLINT counts one tick per clock cycle, whatever the frequency
  the SoC claims), so the kernel livelocks.

With --aes-instruction it marks every CPU node with ``litex,aes-instruction``
as soc/aesd_soc.py does (aesd's ``aes-backend = auto`` looks for it).
Optionally it replaces ``bootargs`` and adds ``/chosen/rng-seed`` (the
simulated SoC has no entropy source; Linux credits the seed at boot, so
getrandom() does not wait). Usage:
  dts_fixup.py IN.dts CSR.json [--timebase HZ] [--bootargs TEXT]
               [--rng-seed HEX] [--aes-instruction] -o OUT.dts
Exit status: 0 written; 1 the input is not what json2dts writes; 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from aesd_soc import AES_DT_PROPERTY, mark_aes_instruction  # noqa: E402

DEFAULT_CLINT_BASE = 0xF001_0000


class FixupError(Exception):
    """The DTS does not have the shape litex_json2dts_linux gives it."""


def cpu_labels(dts: str) -> list[str]:
    """The per-CPU interrupt-controller labels (L0, L1, ...) in CPU order."""
    labels = re.findall(r"\b(L\d+):\s*interrupt-controller\s*\{", dts)
    if not labels:
        raise FixupError("no per-CPU interrupt controller (Ln: interrupt-controller) in the DTS")
    return labels


def clint_node(base: int, labels: list[str]) -> str:
    """A riscv,clint0 node: machine software (3) and timer (7) interrupts of every hart."""
    mapping = " ".join(f"&{label} 3 &{label} 7" for label in labels)
    return (
        f"            clint@{base:x} {{\n"
        f'                compatible = "riscv,clint0";\n'
        f"                interrupts-extended = <{mapping}>;\n"
        f"                reg = <0x{base:x} 0x10000>;\n"
        f'                reg-names = "control";\n'
        f"            }};\n"
    )


def clint_base(csr: dict) -> int:
    """The CLINT's address from csr.json (memories.clint), or the VexRiscv-SMP default."""
    region = csr.get("memories", {}).get("clint")
    return int(region["base"]) if region else DEFAULT_CLINT_BASE


def fix_dts(
    dts: str,
    csr: dict,
    timebase: int,
    bootargs: str | None = None,
    rng_seed: str | None = None,
    aes_instruction: bool = False,
) -> str:
    """Returns DTS with the CLINT node, the timebase and (if given) the bootargs, seed and AES mark set."""
    if timebase <= 0:
        raise FixupError(f"timebase must be positive, not {timebase}")
    dts, count = re.subn(
        r"timebase-frequency\s*=\s*<[^>]*>;", f"timebase-frequency = <{timebase}>;", dts
    )
    if count != 1:
        raise FixupError(f"expected one timebase-frequency in the DTS, found {count}")
    if "riscv,clint0" not in dts:
        plic = re.search(r"^[ \t]*intc0:\s*interrupt-controller@", dts, re.MULTILINE)
        if not plic:
            raise FixupError("no PLIC node (intc0: interrupt-controller@...) to put the CLINT before")
        node = clint_node(clint_base(csr), cpu_labels(dts))
        dts = dts[: plic.start()] + node + "\n" + dts[plic.start() :]
    if bootargs is not None:
        if '"' in bootargs or "\\" in bootargs:
            raise FixupError("bootargs must not contain quotes or backslashes")
        dts, count = re.subn(r'bootargs\s*=\s*"[^"]*";', f'bootargs = "{bootargs}";', dts)
        if count != 1:
            raise FixupError(f"expected one bootargs in the DTS, found {count}")
    if aes_instruction and AES_DT_PROPERTY not in dts:
        dts = mark_aes_instruction(dts)
    if rng_seed is not None:
        if not re.fullmatch(r"(?:[0-9a-fA-F]{2}){16,}", rng_seed):
            raise FixupError("rng-seed must be at least 16 bytes in hex digits")
        if "rng-seed" in dts:
            raise FixupError("the DTS has an rng-seed already")
        seed = " ".join(rng_seed[i : i + 2] for i in range(0, len(rng_seed), 2))
        dts, count = re.subn(r"(\bchosen\s*\{)", lambda m: f"{m.group(1)}\n            rng-seed = [{seed}];", dts)
        if count != 1:
            raise FixupError(f"expected one chosen node in the DTS, found {count}")
    return dts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dts", help="DTS from litex_json2dts_linux")
    parser.add_argument("csr_json", help="the SoC's csr.json")
    parser.add_argument("--timebase", type=int, default=100_000_000, help="Hz [100000000]")
    parser.add_argument("--bootargs", help="replace the kernel command line")
    parser.add_argument("--rng-seed", help="hex bytes for /chosen/rng-seed (at least 16)")
    parser.add_argument("--aes-instruction", action="store_true", help="mark the CPUs with litex,aes-instruction")
    parser.add_argument("-o", "--output", required=True, help="fixed DTS")
    args = parser.parse_args(argv)
    with open(args.dts, encoding="utf-8") as f:
        dts = f.read()
    with open(args.csr_json, encoding="utf-8") as f:
        csr = json.load(f)
    try:
        fixed = fix_dts(dts, csr, args.timebase, args.bootargs, args.rng_seed, args.aes_instruction)
    except FixupError as e:
        print(f"dts_fixup.py: {args.dts}: {e}", file=sys.stderr)
        return 1
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
