#!/usr/bin/env python3
"""Constant-time check on compiled code: the functions that handle secrets
(listed in scripts/cross/ct-functions.txt) must hold no conditional branch
other than a loop's back edge or one the list names as secret-free.

Usage: ct-branches.py [--list FILE] [--objdump PATH] [--table] BINARY...
       ct-branches.py --control TARGET

--control TARGET: the negative control. Compiles ct-control.rs for TARGET
(rustc, seconds) and runs the check on it with ct-control.txt: it must fail
on ct_control_branch_on_secret (a call made only for a secret's 1 bits),
saying that its branches are not back edges, and pass ct_control_masked
(the same work under a barrier'd mask). Exit 0 when the check behaved so.

Each BINARY is an ELF (a board binary as shipped, its symbol table kept,
or an object file), all of one architecture (riscv32, aarch64), which
picks the list's lines. A listed function must be in at least one of them
(aesd has the age encryption's X25519, aescrypt an identity's unwrapping);
every copy found is checked.
Every function whose demangled name (hash removed) equals a listed name is
disassembled with llvm-objdump; each conditional branch is then:
  - backward: its target lies inside the function, below the branch (a
    loop's back edge; the loops in these functions count blocks, rounds or
    bits, never values);
  - forward (or out of the function).
The list names, per function, how many of each it may hold and why they
are secret-free; more of either fails. Counting back edges too matters:
an `if` on a secret whose body the compiler moved below the loop returns
with a backward conditional branch (the negative control shows it).
A listed name with no symbol in BINARY fails too (inlined away: the check
would see nothing). Exit status: 0 if all pass, 1 if any fails (each failure
says why), 2 on usage errors or a missing tool.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# Conditional branch mnemonics, by architecture (llvm-objdump's spelling,
# aliases included: beqz, bnez, bgt, ... and the compressed c.beqz/c.bnez).
RISCV_BRANCHES = {
    "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "bltz",
    "bgez", "blez", "bgtz", "bgt", "ble", "bgtu", "bleu", "c.beqz", "c.bnez",
}
AARCH64_BRANCHES = {"cbz", "cbnz", "tbz", "tbnz"}

HASH = re.compile(r"::h[0-9a-f]{16}$")
FUNCTION = re.compile(r"^([0-9a-f]+) <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
# The annotation after a branch's target address: <symbol+offset>, where
# the symbol itself may hold angle brackets (<<T>::f+0x10>).
ANNOTATION = re.compile(r"\s+<.*>\s*$")
TARGET = re.compile(r"(?:^|[\s,])(?:0x)?([0-9a-f]+)$")


def is_conditional(arch, mnemonic):
    if arch == "riscv32":
        return mnemonic in RISCV_BRANCHES
    return (mnemonic.startswith("b.") or mnemonic.startswith("bc.")
            or mnemonic in AARCH64_BRANCHES)


def find_objdump(given):
    if given:
        return given
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], check=True,
                             capture_output=True, text=True,
                             cwd=os.path.join(HERE, "..", "..")).stdout.strip()
    path = os.path.join(sysroot, "lib", "rustlib", "x86_64-unknown-linux-gnu",
                        "bin", "llvm-objdump")
    if os.path.exists(path):
        return path
    path = shutil.which("llvm-objdump")
    if path:
        return path
    sys.exit("ct-branches: llvm-objdump not found (rustup component add "
             "llvm-tools); a missing tool is a failure")


def read_list(path):
    """{arch: {name: (back edges, forward branches, reason)}}"""
    entries = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split("|")
            if len(fields) != 5:
                sys.exit(f"{path}:{number}: want "
                         "'arch | name | back edges | forward | why'")
            arch, name, back, forward, why = (x.strip() for x in fields)
            if (arch not in ("riscv32", "aarch64") or not back.isdigit()
                    or not forward.isdigit()):
                sys.exit(f"{path}:{number}: bad arch or count")
            entries.setdefault(arch, {})[name] = (int(back), int(forward), why)
    return entries


def symbol_sizes(objdump, binary):
    """{address: size} of the function symbols, from the symbol table
    (llvm-nm beside llvm-objdump): a function ends there, not at the next
    symbol kept (the board binaries keep only some, ct-symbols.txt)."""
    nm = os.path.join(os.path.dirname(objdump), "llvm-nm")
    if not os.path.exists(nm):
        nm = shutil.which("llvm-nm") or nm
    out = subprocess.run([nm, "-S", "--defined-only", binary], check=True,
                         capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2].lower() == "t":
            sizes[int(fields[0], 16)] = int(fields[1], 16)
    return sizes


def disassemble(objdump, binary):
    sizes = symbol_sizes(objdump, binary)
    out = subprocess.run(
        [objdump, "-d", "-C", "--no-show-raw-insn", "--no-print-imm-hex",
         binary],
        check=True, capture_output=True, text=True).stdout
    arch = None
    if "elf32-littleriscv" in out:
        arch = "riscv32"
    elif "elf64-littleaarch64" in out:
        arch = "aarch64"
    functions = []  # (name without hash, start, [(addr, mnemonic, operands)])
    current = None
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m and not m.group(2).startswith(".L"):
            current = (HASH.sub("", m.group(2)), int(m.group(1), 16), [])
            functions.append(current)
            continue
        if m:
            # A local label (riscv's .Lpcrel_hi*, kept in the symbol table)
            # inside the current function: not a function of its own.
            continue
        m = INSTRUCTION.match(line)
        if m and current is not None:
            addr = int(m.group(1), 16)
            size = sizes.get(current[1])
            if size is None or addr < current[1] + size:
                current[2].append((addr, m.group(2), m.group(3)))
    return arch, functions


def classify(arch, start, code):
    """(instructions, back edges, [forward branches as text])"""
    end = code[-1][0] if code else start
    back, forward = [], []
    for addr, mnemonic, operands in code:
        if not is_conditional(arch, mnemonic):
            continue
        m = TARGET.search(ANNOTATION.sub("", operands))
        target = int(m.group(1), 16) if m else None
        text = f"{addr:#x}: {mnemonic} {operands}"
        if target is not None and start <= target < addr:
            back.append(f"{text} (backward)")
            continue
        where = ("forward" if target is not None and addr < target <= end
                 else "out of the function")
        forward.append(f"{text} ({where})")
    return len(code), back, forward


def control(target, objdump):
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "ct-control.o")
        env = dict(os.environ, RUST_TARGET_PATH=os.path.join(root, "targets"))
        subprocess.run(
            ["rustc", "-Zunstable-options", "--edition", "2024", "--target",
             target, "--crate-type=lib", "--emit=obj", "-Copt-level=3",
             "-Cpanic=abort", os.path.join(HERE, "ct-control.rs"), "-o", obj],
            check=True, cwd=root, env=env)
        result = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--objdump", objdump,
             "--list", os.path.join(HERE, "ct-control.txt"), obj],
            capture_output=True, text=True, check=False)
    said = result.stdout + result.stderr
    caught = ("FAIL ct_control_branch_on_secret" in said
              and "forward conditional branch(es), not a loop's back edge"
              in said)
    if result.returncode == 1 and caught and "FAIL ct_control_masked" not in said:
        reason = next(line for line in said.splitlines()
                      if "FAIL ct_control_branch_on_secret" in line)
        print(f"ct-branches: control ({target}): the check failed as it must, "
              f"and ct_control_masked passed: {reason}", file=sys.stderr)
        return 0
    print(f"ct-branches: control ({target}): the check did NOT fail for the "
          f"right reason (exit {result.returncode}):\n{said}", file=sys.stderr)
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", default=os.path.join(HERE, "ct-functions.txt"))
    parser.add_argument("--objdump")
    parser.add_argument("--table", action="store_true",
                        help="print a Markdown table of the functions checked")
    parser.add_argument("--control", metavar="TARGET",
                        help="run the negative control for TARGET")
    parser.add_argument("binaries", nargs="*", metavar="BINARY")
    args = parser.parse_args()
    if args.control:
        return control(args.control, find_objdump(args.objdump))
    if not args.binaries:
        parser.error("a BINARY (or --control TARGET) is needed")
    objdump = find_objdump(args.objdump)
    found = {}  # name -> [(binary, start, code)]
    arch = None
    for binary in args.binaries:
        if not os.path.exists(binary):
            print(f"ct-branches: {binary}: no such file", file=sys.stderr)
            return 2
        this_arch, functions = disassemble(objdump, binary)
        if this_arch is None or (arch and this_arch != arch):
            print(f"ct-branches: {binary}: not riscv32 or aarch64, or not the "
                  "architecture of the other binaries", file=sys.stderr)
            return 2
        arch = this_arch
        for name, start, code in functions:
            found.setdefault(name, []).append((binary, start, code))
    listed = read_list(args.list).get(arch, {})
    if not listed:
        print(f"ct-branches: {args.list} names no {arch} function",
              file=sys.stderr)
        return 2
    failures = []
    rows = []
    for name, (allowed_back, allowed, why) in listed.items():
        copies = found.get(name, [])
        if not copies:
            failures.append(f"{name}: no such symbol in {' '.join(args.binaries)} "
                            "(inlined or renamed: mark it #[inline(never)] or "
                            "fix the list; the symbol table must be kept)")
            continue
        for binary, start, code in copies:
            where = f"{name} in {os.path.basename(binary)} at {start:#x}"
            count, back, forward = classify(arch, start, code)
            rows.append((name, os.path.basename(binary), count, len(back),
                         len(forward), why))
            if len(forward) > allowed:
                lines = "\n    ".join(forward)
                failures.append(
                    f"{where}: {len(forward)} forward conditional "
                    f"branch(es), not a loop's back edge; the list names "
                    f"{allowed} secret-free ({why}):\n    {lines}")
            if len(back) > allowed_back:
                lines = "\n    ".join(back)
                failures.append(
                    f"{where}: {len(back)} backward conditional "
                    f"branch(es), the list names {allowed_back} loop(s) "
                    f"({why}): more than its loops, so some are not back "
                    f"edges:\n    {lines}")
    if args.table:
        print(f"\n{arch}\n")
        print("| function | binary | instructions | backward | forward | "
              "loops and secret-free conditions |")
        print("|---|---|---|---|---|---|")
        for name, binary, count, back, fwd, why in rows:
            print(f"| `{name}` | {binary} | {count} | {back} | {fwd} | {why} |")
    for failure in failures:
        print(f"ct-branches: FAIL {failure}", file=sys.stderr)
    if failures:
        return 1
    names = " ".join(os.path.basename(b) for b in args.binaries)
    print(f"ct-branches: {names} ({arch}): {len(rows)} function copies "
          "checked, no conditional branch beyond the listed loops and "
          "secret-free conditions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
