#!/usr/bin/env python3
"""Markdown tables of the current figures, from the benchmarks' JSON output.

Reads whatever of these exist and prints one Markdown table per kind, each
row with the date of its file and the command that produced it:
  * scripts/bench/aesd-icount.sh --json FILE      (boards under qemu-user:
    the whole aesd process, instructions per byte and fixed cost per job)
  * scripts/bench/vexriscv-icount.sh --json FILE  (the AES instruction's
    kernels under qemu-user, instructions per byte as the board runs them)
  * scripts/bench/vexriscv-cycles.sh --json FILE  (cycles on the VexRiscv RTL)
  * criterion's estimates.json, its benchmark.json beside it (host), or a
    directory searched for them (e.g. target/criterion)
The figures are read as the scripts wrote them; the qemu counts are checked
against the raw counts in the same file (a file whose figure does not follow
from its counts is refused).

Usage: python3 scripts/bench/figures-table.py [--date YYYY-MM-DD] PATH...
       python3 scripts/bench/figures-table.py --self-test [--corrupt]
  --date D      the date printed in every row (default: each file's
                modification date, UTC)
  --self-test   run on sample files in the exact shape the scripts write and
                compare the output with the expected rows (CI)
  --corrupt     with --self-test: one sample figure is changed, so the
                self-test must fail (exit 1): the negative control
Exit status: 0 done; 1 a file is missing, unreadable, of no known shape or
inconsistent (or the self-test failed); 2 bad usage.
"""

import datetime
import json
import os
import sys
import tempfile

KINDS = {
    "host": ("Host (criterion, `cargo bench -p aesd-bench`)",
             "| bench | time / iteration | throughput | date | command |\n| --- | ---: | ---: | --- | --- |"),
    "qemu": ("Boards under qemu-user: the whole aesd process (`aesd-icount.sh`)",
             "| target | jobs | what | instr/byte | fixed per job | date | command |\n"
             "| --- | ---: | --- | ---: | ---: | --- | --- |"),
    "insn": ("The AES instruction's kernels under qemu-user (`vexriscv-icount.sh`)",
             "| workload | bytes | instr/byte as the board runs it | date | command |\n"
             "| --- | ---: | ---: | --- | --- |"),
    "rtl": ("Cycles on the VexRiscv RTL (`vexriscv-cycles.sh`)",
            "| core | workload | bytes | CPI | cycles/byte | MB/s at 100 MHz | date | command |\n"
            "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"),
}


class Refused(Exception):
    """A file the table cannot take, with the reason."""


def file_date(path, date):
    if date:
        return date
    mtime = os.stat(path).st_mtime
    return datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc).strftime("%Y-%m-%d")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"{path}: {e}") from e


def fmt_time(ns):
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def criterion_row(estimates, date):
    bench = load(os.path.join(os.path.dirname(estimates), "benchmark.json"))
    try:
        ns = float(load(estimates)["mean"]["point_estimate"])
        bench_id = bench["full_id"]
        (unit, amount), = (bench.get("throughput") or {"none": 0}).items()
    except (KeyError, TypeError, ValueError) as e:
        raise Refused(f"{estimates}: not criterion's estimates.json and benchmark.json ({e!r})") from e
    per_s = amount / (ns / 1e9) if ns > 0 else 0
    if unit in ("Bytes", "BytesDecimal"):
        thr = f"{per_s / 1e6:.0f} MB/s"
    elif unit == "Elements" and bench_id.startswith("pbkdf2"):
        thr = f"{per_s / 1e6:.2f} M iterations/s"
    elif unit == "Elements":
        thr = f"{per_s / 1e3:.1f} k elements/s"
    else:
        thr = "-"
    cmd = f"`cargo bench -p aesd-bench --bench throughput -- --exact {bench_id}`"
    return "host", f"| `{bench_id}` | {fmt_time(ns)} | {thr} | {file_date(estimates, date)} | {cmd} |"


def qemu_rows(path, doc, date):
    rows = []
    for run in doc["runs"]:
        jobs, size, base = run["jobs"], run["bytes_per_job"], run["base_bytes_per_job"]
        per_byte = (min(run["counts"]) - min(run["base_counts"])) / (jobs * (size - base))
        if abs(round(per_byte, 1) - run["instructions_per_byte"]) > 0.05:
            raise Refused(f"{path}: {jobs} job(s): instructions_per_byte {run['instructions_per_byte']} "
                          f"does not follow from the counts ({per_byte:.1f})")
        fixed = (min(run["base_counts"]) - doc["idle_process_instructions"]) / jobs - per_byte * base
        if abs(fixed - run["fixed_instructions_per_job"]) > 1:
            raise Refused(f"{path}: {jobs} job(s): fixed_instructions_per_job {run['fixed_instructions_per_job']} "
                          f"does not follow from the counts ({fixed:.0f})")
        quick = len(run["counts"]) == 1 and jobs == 2 and size == 1048576 and base == 4096
        args = ["--quick"] if quick else [f"--jobs {jobs}", f"--size {size}"]
        if base != 4096:
            args.append(f"--base {base}")
        if doc["workers"] != 1:
            args.append(f"--workers {doc['workers']}")
        what = [doc["format"], doc["operation"]]
        if doc["format"] == "openssl":
            what.append(f"{doc['aes_backend']} AES")
            if doc["key_derivation"] != "auto":
                what.append(f"key derivation {doc['key_derivation']}, {doc['iterations']} iterations")
                args.append(f"--key-derivation {doc['key_derivation']}")
            if doc["iterations"] != 10000:
                args.append(f"--iter {doc['iterations']}")
            if doc["aes_backend"] != "software":
                args.append(f"--aes-backend {doc['aes_backend']}")
        else:
            args.append(f"--format {doc['format']}")
            # By name the key wraps with AES (the payload is ChaCha20).
            if doc["format"] == "by-name" and doc["aes_backend"] != "software":
                what.append(f"{doc['aes_backend']} AES")
                args.append(f"--aes-backend {doc['aes_backend']}")
        if doc["operation"] != "encrypt":
            args.append(f"--operation {doc['operation']}")
        if doc.get("tls"):
            what.append("over TLS")
            args.append("--tls")
        if doc["target"] != "riscv32imac-unknown-linux-musl":
            args.append(doc["target"])
        cmd = "`bash scripts/bench/aesd-icount.sh " + " ".join(args) + "`"
        rows.append(("qemu", f"| {doc['target']} | {jobs} | {', '.join(what)} | {run['instructions_per_byte']:.1f} | "
                             f"{run['fixed_instructions_per_job'] / 1e6:.2f} M | {file_date(path, date)} | {cmd} |"))
    return rows


def insn_rows(path, doc, date):
    rows = []
    for w in doc["workloads"]:
        per_byte = (w["count_n"] - w["count_0"]) / w["bytes"] - 14 * (doc["trap_cost"] - 1)
        if abs(round(per_byte, 2) - w["instructions_per_byte"]) > 0.005:
            raise Refused(f"{path}: {w['workload']}: instructions_per_byte {w['instructions_per_byte']} "
                          f"does not follow from the counts ({per_byte:.2f})")
        size = w["bytes"] // 2 if w["workload"] == "encrypt2" else w["bytes"]
        cmd = f"`bash scripts/bench/vexriscv-icount.sh --size {size}`"
        rows.append(("insn", f"| {w['workload']} | {w['bytes']} | {w['instructions_per_byte']:.1f} | "
                             f"{file_date(path, date)} | {cmd} |"))
    return rows


def rtl_rows(path, doc, date):
    rows = []
    for r in doc:
        cpi = r["cycles"] / r["instructions"]
        quick = r["bytes"] == 1024 or r.get("iterations") == 64
        core = f"--core {r['core']}"
        if "iterations" in r:
            per_iter = r["cycles"] / r["iterations"]
            figure = f"{per_iter:.0f} per iteration | {10000 * per_iter / 100e6:.2f} s per 10 000 iterations"
            workload = f"{r['workload']} ({r['iterations']} iterations)"
            size = ""
        else:
            cpb = r["cycles"] / r["bytes"]
            figure = f"{cpb:.1f} | {100 / cpb:.3f}"
            workload = r["workload"]
            # Two lanes or chains: the bytes of both, --bytes per lane.
            per_lane = r["bytes"] // 2 if ("2lanes" in workload or "2chains" in workload) else r["bytes"]
            size = "" if per_lane == 65536 else f" --bytes {per_lane}"
        args = f"{core} --quick" if quick else f"{core}{size}"
        cmd = f"`bash scripts/bench/vexriscv-cycles.sh {args}`"
        rows.append(("rtl", f"| {r['core']} | {workload} | {r['bytes']} | {cpi:.2f} | {figure} | "
                            f"{file_date(path, date)} | {cmd} |"))
    return rows


def rows_of(path, date):
    """The (kind, row) pairs of one JSON file, or Refused."""
    if os.path.basename(path) == "estimates.json":
        return [criterion_row(path, date)]
    doc = load(path)
    try:
        if isinstance(doc, dict) and {"runs", "target", "format"} <= doc.keys():
            return qemu_rows(path, doc, date)
        if isinstance(doc, dict) and {"trap_cost", "workloads"} <= doc.keys():
            return insn_rows(path, doc, date)
        if isinstance(doc, list) and doc and all(isinstance(r, dict) and "cycles" in r for r in doc):
            return rtl_rows(path, doc, date)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise Refused(f"{path}: a field is missing or malformed ({e!r})") from e
    raise Refused(f"{path}: not the JSON of aesd-icount.sh, vexriscv-icount.sh, vexriscv-cycles.sh "
                  "or criterion's estimates.json")


def json_files(paths):
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(d, "estimates.json") for d, _, files in os.walk(path)
                           if os.path.basename(d) == "new" and "estimates.json" in files)
            if not found:
                raise Refused(f"{path}: no criterion results (*/new/estimates.json) under it")
            yield from found
        else:
            yield path


def tables(paths, date):
    by_kind = {kind: [] for kind in KINDS}
    for path in json_files(paths):
        for kind, row in rows_of(path, date):
            by_kind[kind].append(row)
    out = []
    for kind, (title, header) in KINDS.items():
        if by_kind[kind]:
            out += [f"{title}:", "", header, *by_kind[kind], ""]
    return out


def write_samples(directory, corrupt):
    """Sample files in the exact shape the scripts write (see each script's
    JSON writer); the figures are the ones docs/performance.md quotes."""
    run = {"jobs": 2, "bytes_per_job": 4194304, "base_bytes_per_job": 4096,
           "counts": [1047468240, 1016980387], "base_counts": [4640000, 4626134],
           "instructions_per_byte": 120.8, "fixed_instructions_per_job": 502203}
    qemu = {"target": "riscv32imac-unknown-linux-musl", "format": "openssl", "operation": "encrypt",
            "aes_backend": "software", "workers": 1, "key_derivation": "auto", "iterations": 10000,
            "tls": False, "idle_process_instructions": 2632134, "runs": [run]}
    with open(os.path.join(directory, "aesd-icount.json"), "w") as f:
        json.dump(qemu, f, indent=2)  # jq's layout differs; the content is the same
    insn = {"trap_cost": 1.0, "workloads": [
        {"workload": "encrypt", "bytes": 262144, "count_0": 150000, "count_n": 5025944,
         "instructions_per_byte": 18.6},
        {"workload": "encrypt2", "bytes": 524288, "count_0": 150000, "count_n": 9901888,
         "instructions_per_byte": 18.6}]}
    json.dump(insn, open(os.path.join(directory, "vexriscv-icount.json"), "w"), indent=2)
    cycles = [
        {"workload": "aesd-encrypt-2lanes", "core": "imac", "bytes": 131072,
         "cycles": 15650213 if corrupt else 15550213, "instructions": 15258580},
        {"workload": "pbkdf2-hmac-sha256", "core": "imac", "bytes": 48, "cycles": 54296649,
         "instructions": 17259442, "iterations": 1000},
        {"workload": "aesd-insn-decrypt", "core": "imac-aes", "bytes": 65536, "cycles": 1294863,
         "instructions": 1237057}]
    with open(os.path.join(directory, "vexriscv-cycles.json"), "w") as f:
        json.dump(cycles, f, indent=2)
        f.write("\n")
    for bench_id, ns, throughput in (("aes256cbc_encrypt/16384", 32600.0, {"Bytes": 16384}),
                                     ("pbkdf2_sha256/10000", 3860000.0, {"Elements": 10000})):
        new = os.path.join(directory, "criterion", *bench_id.split("/"), "new")
        os.makedirs(new)
        group, value = bench_id.split("/")
        json.dump({"group_id": group, "function_id": None, "value_str": value, "throughput": throughput,
                   "full_id": bench_id, "directory_name": bench_id, "title": bench_id},
                  open(os.path.join(new, "benchmark.json"), "w"))
        estimate = {"confidence_interval": {"confidence_level": 0.95, "lower_bound": ns * 0.99,
                                            "upper_bound": ns * 1.01},
                    "point_estimate": ns, "standard_error": ns / 100}
        json.dump({"mean": estimate, "median": estimate, "median_abs_dev": estimate, "slope": None,
                   "std_dev": estimate}, open(os.path.join(new, "estimates.json"), "w"))


EXPECTED_ROWS = [
    "| `aes256cbc_encrypt/16384` | 32.6 µs | 503 MB/s | 2026-11-26 | "
    "`cargo bench -p aesd-bench --bench throughput -- --exact aes256cbc_encrypt/16384` |",
    "| `pbkdf2_sha256/10000` | 3.86 ms | 2.59 M iterations/s | 2026-11-26 | "
    "`cargo bench -p aesd-bench --bench throughput -- --exact pbkdf2_sha256/10000` |",
    "| riscv32imac-unknown-linux-musl | 2 | openssl, encrypt, software AES | 120.8 | 0.50 M | 2026-11-26 | "
    "`bash scripts/bench/aesd-icount.sh --jobs 2 --size 4194304` |",
    "| encrypt | 262144 | 18.6 | 2026-11-26 | `bash scripts/bench/vexriscv-icount.sh --size 262144` |",
    "| encrypt2 | 524288 | 18.6 | 2026-11-26 | `bash scripts/bench/vexriscv-icount.sh --size 262144` |",
    "| imac | aesd-encrypt-2lanes | 131072 | 1.02 | 118.6 | 0.843 | 2026-11-26 | "
    "`bash scripts/bench/vexriscv-cycles.sh --core imac` |",
    "| imac | pbkdf2-hmac-sha256 (1000 iterations) | 48 | 3.15 | 54297 per iteration | "
    "5.43 s per 10 000 iterations | 2026-11-26 | `bash scripts/bench/vexriscv-cycles.sh --core imac` |",
    "| imac-aes | aesd-insn-decrypt | 65536 | 1.05 | 19.8 | 5.061 | 2026-11-26 | "
    "`bash scripts/bench/vexriscv-cycles.sh --core imac-aes` |",
]


def self_test(corrupt):
    with tempfile.TemporaryDirectory() as d:
        write_samples(d, corrupt)
        names = ["criterion", "aesd-icount.json", "vexriscv-icount.json", "vexriscv-cycles.json"]
        lines = "\n".join(tables([os.path.join(d, n) for n in names], "2026-11-26")).split("\n")
        headers = {line for _, header in KINDS.values() for line in header.split("\n")}
        rows = [line for line in lines if line.startswith("|") and line not in headers]
        failures = [f"expected: {e}\n     got: {g}" for e, g in zip(EXPECTED_ROWS, rows) if e != g]
        if len(rows) != len(EXPECTED_ROWS):
            failures.append(f"{len(rows)} rows, expected {len(EXPECTED_ROWS)}")
        # Negative controls: a file of no known shape, and a qemu figure that
        # does not follow from its counts, must be refused.
        for name, doc in (("unknown.json", {"figures": []}),
                          ("inconsistent.json", {**json.load(open(os.path.join(d, "aesd-icount.json"))),
                                                 "runs": [{**json.load(open(os.path.join(d, "aesd-icount.json")))
                                                           ["runs"][0], "instructions_per_byte": 130.8}]})):
            json.dump(doc, open(os.path.join(d, name), "w"))
            try:
                rows_of(os.path.join(d, name), "2026-11-26")
                failures.append(f"{name} was accepted")
            except Refused:
                pass
    if failures:
        print("figures-table.py: self-test FAILED\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print(f"figures-table.py: self-test passed ({len(rows)} rows from the four kinds of JSON; "
          "2 bad files refused)")
    return 0


def main(argv):
    if argv[:1] == ["--self-test"] and argv[1:] in ([], ["--corrupt"]):
        return self_test(argv[1:] == ["--corrupt"])
    date, paths = None, []
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if arg == "--date":
            date = next(args, None)
            try:
                datetime.date.fromisoformat(date or "")
            except ValueError:
                print("figures-table.py: --date takes YYYY-MM-DD (try --help)", file=sys.stderr)
                return 2
        elif arg.startswith("-"):
            print(f"figures-table.py: unknown option {arg} (try --help)", file=sys.stderr)
            return 2
        else:
            paths.append(arg)
    if not paths:
        print("figures-table.py: no JSON file or directory given (try --help)", file=sys.stderr)
        return 2
    try:
        print("\n".join(tables(paths, date)).rstrip())
    except Refused as e:
        print(f"figures-table.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
