#!/usr/bin/env bash
# The board itself, simulated (issue 41): boots Linux and the board's
# userland on the SoC's RTL (soc/sim/build-board.sh: VexRiscv-SMP with the
# AesPlugin, LiteEth, under Verilator, in a network namespace of its own)
# and measures, in guest clock cycles read from the guest's own counter
# (rtlprobe), so neither the host nor the simulator's speed enters:
#   tcp-sink               BYTES sent to the board, which drops them
#   tcp-echo               BYTES sent and echoed back (checked)
#   tcp-echo-framed        the same echo a whole 16 KiB frame at a time
#                          (read completely, then written back), as a
#                          service answering whole data frames does: aesd's
#                          protocol's floor on the same link
#   cipher-aes-insn        no network: aesd's CBC kernel on the AES
#                          instruction over BYTES in user space
#                          (vexriscv_count, typed into the guest's console;
#                          its own rdtime reads around the encryption)
#   aesd-encrypt-aes-insn  one aesload job of BYTES against the board's aesd
#                          (openssl format, key derived by aesload, result
#                          verified), the cycles between two counter reads
#                          around it: the whole job end to end
#   aesd-encrypt-aes-insn-2jobs  two such jobs at once (two clients, BYTES
#                          each): the aggregate, for 2 cores against 1
#   aesd-age               the same job in age format (--with-age)
#   aesd-encrypt-soft      the job on a cluster without the AesPlugin
#                          (--with-soft: a second build and boot;
#                          --soft-only: that variant alone)
# plus the cycles from reset to aesd accepting jobs (S99ready's line) and
# how long each init script took (the rcS's markers: boot_steps), the
# AES backend aesd reports (aesd_aes_backend_info, scraped from its metrics
# port once it is up, before the rows) and aesd's RSS after the jobs.
# Rows: workload, cores, bytes, cycles, cycles per byte, MB/s at 100 MHz and
# at the study's 150 MHz. Every workload runs at two sizes (--small and
# --bytes), and a second table gives its marginal cycles per byte between
# them, (cycles(BYTES) - cycles(SMALL)) / (BYTES - SMALL), and its fixed part
# (connections, handshake, the counter reads): the per-byte cost without
# the set-up, measured alike for the floors and aesd, and aesd's marginal
# cost against the echo's.
# Around every row the guest's /proc figures are read too (probe.py proc):
# a third table says where that row's cycles went (the shares of user,
# kernel, interrupt and idle time in /proc/stat's clock ticks, one tick a
# million cycles; context switches and interrupts per KiB; aesd's own user
# and kernel ticks), so aesd's cost over the echo is split by measurement,
# and a fourth what the network did in it (the guest's TCP segments in and
# out, retransmissions, pure and delayed ACKs, out-of-order, collapsed and
# pruned receive queues, zero windows, and what its MAC dropped). After the
# jobs, a fifth: what the guest's primitives cost (probe.py primitives: a
# system call, a clock read, a page mapped and unmapped, a switch between
# threads, a 16 KiB memcpy), to price what aesd does beyond the echo.
#
# Usage: scripts/bench/board-rtl.sh [--bytes N] [--small N] [--cores 1|2] [--with-age]
#                                   [--with-soft | --soft-only] [--dram] [--no-build]
#                                   [--boot-wait S] [--link LIST]
#                                   [--json FILE]
#   --bytes N   bytes per workload (default 262144; the simulator runs about
#               0.5 M cycles per wall second, so 256 KiB is 1-2 min each)
#   --small N   the second, smaller size of every workload (default a quarter
#               of --bytes; 0: none, and no marginal table)
#   --cores N   VexRiscv-SMP cores (default 1)
#   --dram      main RAM on LiteDRAM's DDR3 model (the Arty's chip, its
#               controller, the cluster on its native port) instead of
#               integrated one-cycle RAM (build-board.sh --dram)
#   --no-build  boot what soc/sim/build-board.sh built last (its variant
#               folder must exist)
#   --with-soft also the cluster without the AesPlugin; --soft-only: it alone
#   --boot-wait S  seconds of the simulator's CPU time to wait for aesd accepting
#                  (default 5400; at most four times that of wall time)
#   --link LIST the host-to-board link, comma-separated; every row runs once per
#               entry: MBIT paces what the host sends to the board at MBIT Mb/s
#               of the guest's time (1-1000; default 100, the Arty's 100 Mb/s
#               MII) with a token bucket on tap0 (tc tbf, one frame of burst)
#               whose wall-clock rate follows the simulator's speed, measured
#               over 5 s before each row; "off" sends unpaced (the simulated
#               PHY takes a byte per cycle, 800 Mb/s, from a TAP queue without
#               limit, and overruns LiteEth's two receive slots more often
#               than the Arty's wire would). Each row says its link.
#   --host-rto guest|wall  the host's TCP retransmission timers toward the
#               board (default guest: before each row a route to the board
#               with rto_min of 200 ms of guest time in wall time, 200 ms x
#               100 MHz / the simulator's measured speed, at most 120 s, so
#               the host's retransmissions and zero-window probes wait as
#               long in the board's time as a real host's 200 ms minimum;
#               wall: the host's own 200 ms of wall time, hundreds of times
#               sooner in the board's time, as runs before 2026-11-28 had;
#               its rows' link is marked "-wall-rto")
#   --json FILE also write the rows and the boot figures as JSON
# Wall time: the builds (soc/sim/build-board.sh: cold about 35 min, warm
# 5-7 min), then the boot (about 11 min to /init with the board's own
# initramfs, alone on a core, and the init scripts and aesd's start after
# it: docs/board-rtl.md) and 1-2 min of simulator CPU per 256 KiB row, a
# third more with the smaller size (measured: 3896 s in all for 1 core).
# Exit status: 0 measured; 1 a build, the boot or a check failed; 2 bad usage.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"
# shellcheck source=soc/sim/lib/board.sh
. "$root/soc/sim/lib/board.sh"

bytes=262144
small=""
cores=1
json=""
with_age=0
with_soft=0
dram=0
build=1
boot_wait=5400
link_list=100
host_rto=guest
while (($#)); do
  case "$1" in
    --bytes)
      bytes="${2:-}"
      shift
      ;;
    --small)
      small="${2:-}"
      shift
      ;;
    --cores)
      cores="${2:-}"
      shift
      ;;
    --json)
      json="${2:?--json needs a file}"
      shift
      ;;
    --with-age) with_age=1 ;;
    --with-soft) with_soft=1 ;;
    --soft-only) with_soft=2 ;;
    --dram) dram=1 ;;
    --no-build) build=0 ;;
    --boot-wait)
      boot_wait="${2:-}"
      shift
      ;;
    --link)
      link_list="${2:-}"
      shift
      ;;
    --host-rto)
      host_rto="${2:-}"
      shift
      ;;
    -h | --help)
      sed -n '2,/^# Exit status/s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "board-rtl.sh: unknown argument $1 (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done
[[ "$bytes" =~ ^[1-9][0-9]*$ ]] || {
  echo "board-rtl.sh: --bytes needs a positive number, not '$bytes'" >&2
  exit 2
}
small="${small:-$((bytes / 4))}"
if ! [[ "$small" =~ ^[0-9]+$ ]] || ((small >= bytes)); then
  echo "board-rtl.sh: --small needs a number of bytes below --bytes ($bytes), not '$small'" >&2
  exit 2
fi
sizes=("$bytes")
((small == 0)) || sizes=("$small" "$bytes")
[[ "$boot_wait" =~ ^[1-9][0-9]*$ ]] || {
  echo "board-rtl.sh: --boot-wait needs a positive number of seconds, not '$boot_wait'" >&2
  exit 2
}
IFS=, read -r -a links <<<"$link_list"
((${#links[@]})) || {
  echo "board-rtl.sh: --link needs a rate in Mb/s or off" >&2
  exit 2
}
for link in "${links[@]}"; do
  [[ "$link" == off ]] || { [[ "$link" =~ ^[1-9][0-9]*$ ]] && ((link <= 1000)); } || {
    echo "board-rtl.sh: --link takes Mb/s from 1 to 1000 or off, not '$link'" >&2
    exit 2
  }
done
[[ "$host_rto" == guest || "$host_rto" == wall ]] || {
  echo "board-rtl.sh: --host-rto takes guest or wall, not '$host_rto'" >&2
  exit 2
}
[[ "$cores" == 1 || "$cores" == 2 ]] || {
  echo "board-rtl.sh: --cores must be 1 or 2, not '$cores'" >&2
  exit 2
}

guest=192.168.1.50
probe=("$root/soc/sim/probe.py" "$guest")
rows="$(mktemp)"
backends="$(mktemp)"
splits="$(mktemp)"
boot_steps="$(mktemp)"
trap 'board_stop; rm -f "$rows" "$backends" "$splits" "$boot_steps"' EXIT
t0=$SECONDS

step "aesload for the host"
# The pinned nightly first: rust-toolchain.toml names it and a fresh machine lacks it.
bash "$root/scripts/cross/setup.sh" --toolchain-only >/dev/null || exit 1
(cd "$root" && nice -n 19 cargo build --locked -q -p aesd-load --bin aesload) || exit 1
aesload="${CARGO_TARGET_DIR:-$root/target}/debug/aesload"

# row WORKLOAD BYTES CYCLES: one result line.
row() {
  printf '%s %s %s %s %s\n' "$1" "$cores" "$2" "$3" "$link" >>"$rows"
  awk -v w="$1" -v c="$cores" -v b="$2" -v y="$3" -v l="$link" 'BEGIN {
    printf "%-28s %5s %5s %9d %12d %8.1f %8.3f %8.3f\n", w, l, c, b, y, y / b, b / y * 100, b / y * 150 }'
}

# guest_cycles: the guest's cycle counter now (a round trip through the board).
guest_cycles() {
  board_exec "${probe[@]}" now | python3 -c 'import json, sys; print(json.load(sys.stdin)["cycles"])'
}

# pace MBIT|off: paces what the host sends to the board (tap0's queue, in
# the board's namespace) at MBIT Mb/s of the guest's time, or not at all.
# The guest's clock is 100 MHz, so MBIT Mb/s is MBIT / 100 bits per guest
# cycle; the wall-clock rate is that times the simulator's speed in guest
# cycles per wall second, measured now over a 5 s pause and a counter read.
# The bucket holds one frame (no bursts); its queue is large, so the host's
# TCP is never refused.
# With --host-rto guest it also sets the host's minimum retransmission
# timeout toward the board to 200 ms of guest time, in wall time.
pace() {
  board_exec tc qdisc del dev tap0 root 2>/dev/null || true
  [[ "$1" != off || "$host_rto" == guest ]] || return 0
  local c0 c1 t0 t1 speed rate rto_ms
  t0="$(date +%s.%N)"
  c0="$(guest_cycles)"
  sleep 5
  t1="$(date +%s.%N)"
  c1="$(guest_cycles)"
  # (Each counter read is a round trip through the simulated board, seconds
  # of wall time: the speed is the cycles between the two reads over the
  # wall time between their starts, which spans one read and the sleep.)
  speed="$(python3 -c 'import sys; c0, c1, t0, t1 = map(float, sys.argv[1:]); print(round((c1 - c0) / (t1 - t0)))' \
    "$c0" "$c1" "$t0" "$t1")"
  ((speed > 0)) || {
    echo "board-rtl.sh: the simulated board's counter did not move in 5 s" >&2
    exit 1
  }
  if [[ "$host_rto" == guest ]]; then
    rto_ms=$((200 * 100000000 / speed))
    ((rto_ms <= 120000)) || rto_ms=120000 # the kernel's TCP_RTO_MAX
    ((rto_ms >= 200)) || rto_ms=200
    board_exec ip route replace "$guest/32" dev tap0 rto_min "${rto_ms}ms"
    echo "  host RTO toward the board: at least $rto_ms ms of wall time (200 ms of guest time)" >&2
  fi
  [[ "$1" != off ]] || return 0
  rate=$((speed * $1 / 100))
  ((rate >= 8000)) || rate=8000
  board_exec tc qdisc add dev tap0 root tbf rate "${rate}bit" burst 1600 limit 4000000
  echo "  link $1 Mb/s of guest time: tap0 paced at $rate bit/s of wall time (the simulator at $speed cycles/s)" >&2
}

# proc_now: the guest's /proc figures (probe.py proc) as one JSON line.
proc_now() {
  board_exec "${probe[@]}" proc
}

# split WORKLOAD BYTES BEFORE AFTER: records where a row's cycles went,
# from the /proc figures read before and after it.
split() {
  printf '{"workload": "%s", "link": "%s", "bytes": %s, "before": %s, "after": %s}\n' "$1" "$link" "$2" "$3" "$4" >>"$splits"
}

# aesd_job WORKLOAD FORMAT [CLIENTS]: verified aesload jobs of each size,
# CLIENTS (default 1) at once, counted together in guest cycles.
aesd_job() {
  local size
  for size in "${sizes[@]}"; do
    aesd_job_of "$size" "$@"
  done
}

# aesd_job_of SIZE WORKLOAD FORMAT [CLIENTS]: one such measurement.
aesd_job_of() {
  local bytes=$1 before after clients=${4:-1} proc_before
  shift
  pace "$link_rate"
  proc_before="$(proc_now)"
  before="$(guest_cycles)"
  board_exec "$aesload" --server "$guest:7878" --clients "$clients" --size "$bytes" --iter 1000 \
    --pass pass:board-rtl --key-derivation client --format "$2" --timeout 3600 --quiet \
    >"$variant/aesload-$1-$link-$bytes.log" 2>&1 || {
    tail -n 20 "$variant/aesload-$1-$link-$bytes.log" >&2
    echo "board-rtl.sh: the aesload job ($1) failed" >&2
    exit 1
  }
  after="$(guest_cycles)"
  split "$1" "$((bytes * clients))" "$proc_before" "$(proc_now)"
  row "$1" "$((bytes * clients))" "$((after - before))"
}

# boot_steps_of CONSOLE: the init scripts' end markers of the emulated
# board's rcS ("aesd-qemu: init S50aesd start exit=0 uptime=U"; the guest's
# uptime is cycles / 100 M, from the kernel's start) as JSON lines, and a
# line each on stderr; a script's time is from the previous one's end.
boot_steps_of() {
  # (The console's lines end in CR LF: the CR would split the JSON lines.)
  awk '{ sub(/\r$/, "") }
  /^aesd-qemu: init [^ ]+ start exit=[0-9]+ uptime=/ {
    split($5, e, "="); split($6, u, "=")
    printf "{\"script\": \"%s\", \"exit\": %d, \"ended_s\": %s, \"took_s\": %.2f}\n", $3, e[2], u[2], u[2] - last
    printf "  %-12s ended at %7.2f s of guest time (%.2f s, %.0f M cycles)\n", $3, u[2], u[2] - last, (u[2] - last) * 100 > "/dev/stderr"
    last = u[2]
  }' "$1"
}

# measure [--no-aes]: build, boot and measure one SoC variant.
boot_cycles=""
rss=""
primitives=""
measure() {
  local args=(--cores "$cores" "$@")
  ((dram == 0)) || args+=(--dram)
  if ((build)); then
    variant="$("$root/soc/sim/build-board.sh" "${args[@]}" | tail -n 1)" || exit 1
  else
    variant="$(board_variant_dir "$cores" "$(($# == 0))" "$dram")"
  fi
  step "booting $(basename "$variant") (at most $boot_wait s of its CPU time to aesd accepting)"
  local booted=$SECONDS
  board_start "$variant"
  board_wait_ready "$boot_wait" || exit 1
  say_boot="boot to aesd accepting: $board_ready_cycles cycles ($((SECONDS - booted)) s wall)"
  echo "$say_boot" >&2
  [[ -s "$boot_steps" ]] || boot_steps_of "$board_console" >"$boot_steps"
  local backend
  backend="$(board_exec curl -fsS --max-time 300 "http://$guest:9878/metrics" |
    sed -n 's/^aesd_aes_backend_info{backend="\([^"]*\)".*/\1/p')" || true
  echo "aesd's AES backend: ${backend:-not reported}" >&2
  printf '%s %s\n' "$(basename "$variant")" "${backend:-unknown}" >>"$backends"
  printf '%-28s %5s %5s %9s %12s %8s %8s %8s\n' workload link cores bytes cycles cyc/B MB/s@100 MB/s@150
  # The first variant's boot (the one with the plugin, unless --soft-only).
  boot_cycles=${boot_cycles:-$board_ready_cycles}
  local out size proc_before workload
  if (($# == 0)); then
    link=none
    for size in "${sizes[@]}"; do
      out="$(board_shell "vexriscv_count encrypt $size")" || exit 1
      [[ "$out" =~ (^|$'\n')ticks\ ([0-9]+) ]] || {
        echo "board-rtl.sh: vexriscv_count gave no ticks: $out" >&2
        exit 1
      }
      row cipher-aes-insn "$size" "${BASH_REMATCH[2]}"
    done
  fi
  for link_rate in "${links[@]}"; do
    link="$link_rate"
    [[ "$host_rto" == guest ]] || link="$link_rate-wall-rto"
    if (($# == 0)); then
      for w in sink echo framed; do
        workload="tcp-$w"
        [[ "$w" != framed ]] || workload=tcp-echo-framed
        for size in "${sizes[@]}"; do
          pace "$link_rate"
          proc_before="$(proc_now)"
          out="$(board_exec "${probe[@]}" "$w" "$size")" || exit 1
          split "$workload" "$size" "$proc_before" "$(proc_now)"
          row "$workload" "$size" "$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["cycles"])' "$out")"
        done
      done
      aesd_job aesd-encrypt-aes-insn openssl
      aesd_job aesd-encrypt-aes-insn-2jobs openssl 2
      ((with_age == 0)) || aesd_job aesd-age age
    else
      aesd_job aesd-encrypt-soft openssl
    fi
  done
  board_exec tc qdisc del dev tap0 root 2>/dev/null || true
  if (($# == 0)); then
    rss="$(board_exec "${probe[@]}" mem)"
    echo "aesd memory: $rss" >&2
    # After every row: a failure here costs the run its primitives, not its report.
    primitives="$(board_exec "${probe[@]}" primitives)" || primitives=""
    echo "what the guest's primitives cost (cycles per operation): ${primitives:-not measured (above)}" >&2
  fi
  board_stop
}

((with_soft == 2)) || measure
((with_soft == 0)) || measure --no-aes
echo "wall time: $((SECONDS - t0)) s" >&2

# The marginal table (from the two sizes of each workload), and the JSON.
python3 "$root/scripts/bench/board-rtl-report.py" "$rows" "$json" "$boot_cycles" "$rss" "$((SECONDS - t0))" \
  "$backends" "$( ((dram)) && echo "LiteDRAM's DDR3 model" || echo "integrated RAM")" "$splits" "$boot_steps" \
  "$primitives"
