#!/usr/bin/env python3
"""Where a counted program's instructions went, per function.

Reads the per-block counts that scripts/bench/icount.c writes with
profile=PFILE ("START INSNS RUNS" per translated block) and the symbol table
of the guest binary (nm: the binary needs its symbols, e.g. a board build
with CARGO_PROFILE_BOARD_STRIP=none), and prints the functions that
executed the most instructions, with their share of the total.

Usage: icount-profile.py BINARY PFILE [--top N] [--per N]
  --top N   how many functions to print (default 30)
  --per N   also print each function's instructions divided by N (e.g. the
            number of requests or bytes the run served)
"""

import argparse
import bisect
import subprocess
import sys


def text_symbols(binary: str) -> tuple[list[int], list[str]]:
    """The binary's code symbols, sorted by address (nm -n, demangled)."""
    listing = subprocess.run(
        ["nm", "--defined-only", "-n", "-C", binary],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    starts, names = [], []
    for line in listing.splitlines():
        parts = line.split(" ", 2)
        # Local labels (.L...) are not functions.
        if len(parts) == 3 and parts[1] in "tTwW" and not parts[2].startswith(".L"):
            starts.append(int(parts[0], 16))
            names.append(parts[2])
    if not starts:
        sys.exit(f"icount-profile.py: {binary} has no code symbols (stripped?)")
    return starts, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("pfile")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--per", type=float, default=0.0)
    args = parser.parse_args()
    starts, names = text_symbols(args.binary)
    per_symbol: dict[str, int] = {}
    total = 0
    with open(args.pfile) as blocks:
        for line in blocks:
            start, insns, runs = line.split()
            count = int(insns) * int(runs)
            total += count
            index = bisect.bisect_right(starts, int(start, 16)) - 1
            name = names[index] if index >= 0 else "(before the first symbol)"
            per_symbol[name] = per_symbol.get(name, 0) + count
    if total == 0:
        sys.exit(f"icount-profile.py: {args.pfile} holds no executed block")
    print(f"{total} instructions in the profile")
    header = f"{'instructions':>14} {'share':>7}"
    if args.per:
        header += f" {'per unit':>10}"
    print(header + "  function")
    ranked = sorted(per_symbol.items(), key=lambda item: -item[1])
    for name, count in ranked[: args.top]:
        row = f"{count:>14} {100 * count / total:>6.1f}%"
        if args.per:
            row += f" {count / args.per:>10.0f}"
        print(row + "  " + name[:140])


if __name__ == "__main__":
    main()
