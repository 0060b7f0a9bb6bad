#!/usr/bin/env bash
# Checks riscv32 binaries for the VexRiscvSMP board (rv32imac, no FPU):
#   1. ELF32 RISC-V executable, statically linked: type EXEC, no PT_INTERP,
#      no PT_DYNAMIC / .dynamic / .interp
#   2. soft-float ABI in the ELF header flags, and no F/D/Q/Zfh/Zfinx/Zdinx in
#      the Tag_RISCV_arch build attribute
#   3. no floating-point instruction in any executable section: disassembled
#      with llvm-objdump --mattr=+f,+d,+q,+zfh,+zfa,+zacas (FP opcodes decode even
#      when the ELF attributes claim rv32imac; GNU objdump would print .insn),
#      then any mnemonic f* except fence* (flw/fsw/fld/fsd, fadd.s, fmv.x.w,
#      fcvt.*, fmadd.*, fsflags, c.fld...) or an fflags/frm/fcsr CSR access
#   4. runs under qemu-riscv32 -cpu rv32,f=false,d=false,c=true (no FPU, so any
#      FP instruction executed is SIGILL) with ARGS (default: --help), exit 0
#
# Usage: scripts/cross/check-riscv32-static-nofpu.sh [--no-run] [--args "ARGS"] BIN...
#        scripts/cross/check-riscv32-static-nofpu.sh --control | --control-gc
#   --control     builds scripts/cross/nofpu-control.c (a static rv32imac
#                 program holding one fadd.s) with zig and expects this check
#                 to FAIL on it, by its disassembly and by its SIGILL: proves
#                 the check can fail (seconds; CI runs it on every commit)
#   --control-gc  the same with scripts/cross/selftest.rs built as hard-float
#                 riscv32gc (-Zbuild-std); slow the first time (~3 min)
# Exit status: 0 if every BIN passes, 1 otherwise.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"

run=1
run_args=(--help)
bins=()
while (($#)); do
  case "$1" in
    --no-run) run=0 ;;
    --args)
      read -r -a run_args <<<"${2?--args needs a value}"
      shift
      ;;
    --control)
      ctl="$(mktemp -d)/nofpu-control"
      "$here/zigcc.sh" riscv32imac-unknown-linux-musl -static -O1 -o "$ctl" "$here/nofpu-control.c"
      echo "== control: a static rv32imac program with one fadd.s must fail this check"
      if "$0" "$ctl"; then
        echo "CONTROL FAILED: a binary with an FP instruction passed the no-FPU check" >&2
        exit 1
      fi
      rm -rf "${ctl%/*}"
      echo "control ok: the FP instruction was found"
      exit 0
      ;;
    --control-gc)
      pkg="$root/target/cross-selftest"
      "$here/selftest.sh" --build-only riscv32imac-unknown-linux-musl >/dev/null
      (cd "$pkg" && CARGO_TARGET_DIR="$pkg/target" cargo "+$AESD_NIGHTLY" build --quiet \
        --release --jobs "${AESD_JOBS:-2}" -Zbuild-std=std,panic_abort \
        --target riscv32gc-unknown-linux-musl)
      ctl="$pkg/target/riscv32gc-unknown-linux-musl/release/selftest"
      echo "== control: riscv32gc (hard-float) build must fail this check"
      if "$0" "$ctl"; then
        echo "CONTROL FAILED: the riscv32gc build passed the no-FPU check" >&2
        exit 1
      fi
      echo "control ok: the riscv32gc build was rejected"
      exit 0
      ;;
    -h | --help)
      sed -n '2,24s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    -*)
      echo "unknown option $1" >&2
      exit 2
      ;;
    *) bins+=("$1") ;;
  esac
  shift
done
if ((${#bins[@]} == 0)); then
  echo "usage: $0 [--no-run] [--args \"ARGS\"] BIN... | --control | --control-gc" >&2
  exit 2
fi

objdump="$(rustc "+$AESD_NIGHTLY" --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/llvm-objdump"
if [[ ! -x "$objdump" ]]; then
  echo "llvm-objdump not found ($objdump); run scripts/cross/setup.sh" >&2
  exit 2
fi

status=0
for bin in "${bins[@]}"; do
  echo "== $bin"
  bad=0
  pass() { printf '  PASS %s\n' "$*"; }
  fail() {
    printf '  FAIL %s\n' "$*"
    bad=1
  }

  hdr="$(readelf -hW "$bin")"
  if grep -q 'Class:[[:space:]]*ELF32' <<<"$hdr" && grep -q 'Machine:[[:space:]]*RISC-V' <<<"$hdr"; then
    pass "ELF32 RISC-V"
  else
    fail "not an ELF32 RISC-V file"
  fi

  # 1. static
  type="$(sed -n 's/^ *Type:[[:space:]]*\([A-Z]*\).*/\1/p' <<<"$hdr")"
  phdrs="$(readelf -lW "$bin")"
  sects="$(readelf -SW "$bin")"
  problems=()
  [[ "$type" == EXEC ]] || problems+=("ELF type $type (want EXEC)")
  grep -qE '^[[:space:]]+INTERP[[:space:]]' <<<"$phdrs" && problems+=("PT_INTERP")
  grep -qE '^[[:space:]]+DYNAMIC[[:space:]]' <<<"$phdrs" && problems+=("PT_DYNAMIC")
  grep -qE '[[:space:]]\.(dynamic|interp)[[:space:]]' <<<"$sects" && problems+=(".dynamic/.interp section")
  if ((${#problems[@]})); then fail "statically linked: ${problems[*]}"; else pass "statically linked (EXEC, no PT_INTERP, no PT_DYNAMIC)"; fi

  # 2. float ABI + arch attribute
  flags="$(sed -n 's/^ *Flags:[[:space:]]*//p' <<<"$hdr")"
  if grep -q 'soft-float ABI' <<<"$flags"; then pass "ELF flags: $flags"; else fail "ELF flags: $flags (want soft-float ABI)"; fi
  arch="$(readelf -A "$bin" | sed -n 's/.*Tag_RISCV_arch: "\(.*\)"/\1/p')"
  if [[ -z "$arch" ]]; then
    fail "no Tag_RISCV_arch attribute"
  else
    # rv32i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_zicsr2p0 -> i m a f d c zicsr
    exts=" $(sed -E 's/^rv(32|64)//; s/_/ /g; s/([a-z]+)[0-9]+p[0-9]+/\1/g' <<<"$arch") "
    fp=()
    for e in f d q g zfh zfhmin zfa zfbfmin zfinx zdinx zhinx zhinxmin zcf zcd; do
      [[ "$exts" == *" $e "* ]] && fp+=("$e")
    done
    if ((${#fp[@]})); then fail "Tag_RISCV_arch $arch has FP extensions: ${fp[*]}"; else pass "Tag_RISCV_arch $arch"; fi
  fi

  # 3. disassembly
  dis="$("$objdump" -d --no-show-raw-insn --mattr=+m,+a,+f,+d,+q,+c,+zfh,+zfa,+zacas "$bin")"
  ninsn="$(grep -cE '^[[:space:]]*[0-9a-f]+:' <<<"$dis" || true)"
  fpins="$(awk -F'\t' '/^[[:space:]]*[0-9a-f]+:/ {
      m = $2; o = $3
      if ((m ~ /^(c\.)?f/ && m !~ /^fence/) || (m ~ /^csr/ && o ~ /(^|[ ,])(fflags|frm|fcsr)(,|$)/)) print $1, m, o
    }' <<<"$dis")"
  nunknown="$(grep -c '<unknown>' <<<"$dis" || true)"
  if [[ -n "$fpins" ]]; then
    fail "$(wc -l <<<"$fpins") FP instructions among $ninsn; by mnemonic:"
    awk '{print $2}' <<<"$fpins" | sort | uniq -c | sort -rn | head -12 | sed 's/^/         /'
    echo "       first ones:"
    head -5 <<<"$fpins" | sed -E 's/^[[:space:]]*/         /'
  else
    pass "no F/D/Q/Zfh instruction or FP CSR access in $ninsn instructions"
  fi
  namocas="$(awk -F'\t' '/^[[:space:]]*[0-9a-f]+:/ && $2 ~ /^amocas\./' <<<"$dis" | wc -l)"
  if ((namocas > 0)); then
    printf '  INFO %s Zacas amocas.* instructions: portable-atomic run-time-detected path, used only if the kernel reports Zacas\n' "$namocas"
  fi
  if ((nunknown > 0)); then printf '  WARN %s undecodable words in .text (data or unexpected extensions)\n' "$nunknown"; fi

  # 4. run without FPU
  if ((run)); then
    set +e
    out="$("$here/qemu-run.sh" riscv32imac-unknown-linux-musl "$bin" "${run_args[@]}" 2>&1)"
    rc=$?
    set -e
    if ((rc == 0)); then
      pass "qemu-riscv32 -cpu rv32,f=false,d=false,c=true $(basename "$bin") ${run_args[*]}: exit 0"
    else
      fail "qemu-riscv32 -cpu rv32,f=false,d=false,c=true $(basename "$bin") ${run_args[*]}: exit $rc$( ((rc == 132)) && echo ' (SIGILL)')"
      tail -3 <<<"$out" | sed 's/^/         /'
    fi
  fi

  if ((bad)); then
    echo "  => FAIL"
    status=1
  else echo "  => PASS"; fi
done
exit "$status"
