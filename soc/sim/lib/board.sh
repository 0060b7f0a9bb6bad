# shellcheck shell=bash disable=SC2034 # board_* are read by the sourcing scripts
# Starting and stopping the simulated board (soc/sim/run-board.sh,
# scripts/bench/board-rtl.sh). The simulator runs in a network namespace of
# its own, where LiteX's Ethernet module makes tap0 (192.168.1.100/24) and
# the guest is 192.168.1.50: nothing reaches another network. Its console
# (the LiteUART) is a log file; its input a FIFO held open, so a background
# run never sees end-of-file.
#
# board_variant_dir CORES AES DRAM: a variant's folder in the RTL cache
#   (board-<CORES>c, -noaes when AES is 0, -ddr3 when DRAM is 1).
# board_start VARIANT_DIR: boots; sets board_ns, board_pid, board_console.
# board_wait_ready SECONDS: waits for S99ready's line, at most SECONDS of the
#   simulator's CPU time (so a machine shared with other work, which slows
#   the simulator's wall clock, does not cut a healthy boot short) and at
#   most four times SECONDS of wall time (a simulator that gets less than a
#   quarter of a core, or none); sets board_ready_cycles.
# board_exec CMD...: runs CMD in the board's namespace.
# board_shell COMMAND [WALL_SECONDS]: types COMMAND into the guest's console
#   shell and prints what it wrote (stdout and stderr), waiting at most
#   WALL_SECONDS (default 3600); status 1 when it did not finish in time or
#   the simulator is gone.
# board_stop: ends the simulator and removes the namespace.

board_ns=""
board_pid=""
board_console=""
board_ready_cycles=""
board_input=""

board_variant_dir() {
  local cache="${AESD_RTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-rtl}"
  printf '%s/board-%sc%s%s\n' "$cache" "$1" "$( (($2)) || echo -noaes)" "$( (($3 == 0)) || echo -ddr3)"
}

board_start() {
  local variant=$1 gw="$1/litex/gateware"
  [[ -x "$gw/obj_dir/Vsim" ]] || {
    echo "board: no simulator in $gw (run soc/sim/build-board.sh)" >&2
    return 1
  }
  board_ns="aesd-rtl-$$"
  ip netns add "$board_ns"
  ip -n "$board_ns" link set lo up
  board_console="$variant/console.log"
  rm -f "$variant/console.in"
  mkfifo "$variant/console.in"
  exec {board_input}<>"$variant/console.in"
  # The simulator as a child of this shell, in the namespace (as root: it
  # makes tap0 itself; LiteX's own run script would call sudo for that).
  ip netns exec "$board_ns" env -C "$gw" nice -n 19 obj_dir/Vsim \
    <"$variant/console.in" >"$board_console" 2>&1 &
  board_pid=$!
}

# board_cpu_seconds: the simulator's CPU time so far (user and system), in
# whole seconds (0 when it is gone). `ip netns exec`, env and nice each exec
# the next, so board_pid is the simulator itself.
board_cpu_seconds() {
  local stat fields
  stat="$(cat "/proc/$board_pid/stat" 2>/dev/null)" || {
    echo 0
    return
  }
  # The fields after the command's name, from the state (field 3) on:
  # utime and stime (fields 14 and 15) are the 12th and 13th of them.
  read -r -a fields <<<"${stat##*) }"
  echo $(((fields[11] + fields[12]) / $(getconf CLK_TCK)))
}

board_wait_ready() {
  local limit=$1 start=$SECONDS line
  while (($(board_cpu_seconds) < limit && SECONDS - start < 4 * limit)); do
    if ! kill -0 "$board_pid" 2>/dev/null; then
      echo "board: the simulator exited during boot; its console's end:" >&2
      tail -n 20 "$board_console" >&2
      return 1
    fi
    line="$(grep -a -m1 '^RTL-READY cycles ' "$board_console" || true)"
    if [[ -n "$line" ]]; then
      board_ready_cycles="$(awk '{ print $3 }' <<<"$line")"
      [[ "$line" == *"aesd running"* ]] || {
        echo "board: booted but aesd is not running; its console's end:" >&2
        tail -n 20 "$board_console" >&2
        return 1
      }
      return 0
    fi
    sleep 5
  done
  echo "board: not ready after $(board_cpu_seconds) s of the simulator's CPU time ($((SECONDS - start)) s of wall time; the limit: $limit s of CPU time, $((4 * limit)) s of wall time); its console's end:" >&2
  tail -n 20 "$board_console" >&2
  return 1
}

board_exec() {
  ip netns exec "$board_ns" "$@"
}

board_shell() {
  local limit=${2:-3600} start=$SECONDS mark=$((RANDOM * 32768 + RANDOM))
  # The typed line holds $((mark + 1)), what the guest prints holds its
  # value: the console's echo of the command never matches the markers.
  # shellcheck disable=SC2016 # the guest's shell expands them
  printf '{ %s; } 2>&1 | sed "s/^/rtl-out-$((%s + 1)) /"; echo "rtl-done-$((%s + 1))"\n' \
    "$1" "$mark" "$mark" >&"$board_input"
  local out="rtl-out-$((mark + 1)) " done="rtl-done-$((mark + 1))"
  # (A marker may follow the prompt on its line.)
  until tr -d '\r' <"$board_console" | grep -q -- "$done\$"; do
    if ! kill -0 "$board_pid" 2>/dev/null || ((SECONDS - start > limit)); then
      echo "board: '$1' did not finish on the guest's console in $limit s; its console's end:" >&2
      tail -n 20 "$board_console" >&2
      return 1
    fi
    sleep 2
  done
  tr -d '\r' <"$board_console" | sed -n "s/.*$out//p"
}

board_stop() {
  if [[ -n "$board_pid" ]] && kill -0 "$board_pid" 2>/dev/null; then
    # ip netns exec runs the simulator as its own child: end both.
    pkill -TERM -P "$board_pid" 2>/dev/null || true
    kill -TERM "$board_pid" 2>/dev/null || true
    wait "$board_pid" 2>/dev/null || true
  fi
  board_pid=""
  if [[ -n "$board_ns" ]]; then
    ip netns del "$board_ns" 2>/dev/null || true
    board_ns=""
  fi
}
