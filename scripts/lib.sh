#!/usr/bin/env bash
# Shared helpers for the project's scripts: logging and idempotent installs.
# Source it; it defines functions only.

# Prints a step's title with the wall-clock time since the outermost script
# started (AESD_STEP_T0 is inherited by nested scripts), so a CI log shows
# where its minutes go. With AESD_STEP_LOG set (scripts/test.sh sets it), also
# appends "SECONDS<TAB>SCRIPT<TAB>TITLE<TAB>CPU" to that file (CPU: the
# script's finished children's CPU seconds so far): step_table prints it.
export AESD_STEP_T0="${AESD_STEP_T0:-$(date +%s)}"
step() {
  local elapsed=$(($(date +%s) - AESD_STEP_T0))
  printf '\n==> [%d:%02d] %s\n' $((elapsed / 60)) $((elapsed % 60)) "$*" >&2
  if [[ -n "${AESD_STEP_LOG:-}" ]]; then
    children_cpu
    printf '%d\t%s\t%s\t%s\n' "$elapsed" "$(basename "$0")" "$*" "$CHILDREN_CPU" >>"$AESD_STEP_LOG"
  fi
}

# Sets CHILDREN_CPU to the CPU seconds (user + system) of this shell's
# finished children so far: what the steps cost whatever else the machine is
# doing. (Called as $(...) it would count a subshell's children: none.)
children_cpu() {
  local file
  file="$(mktemp)"
  times >"$file"
  CHILDREN_CPU="$(awk 'NR == 2 {
    total = 0
    for (i = 1; i <= 2; i++) { sub(/s$/, "", $i); split($i, part, "m"); total += part[1] * 60 + part[2] }
    printf "%.0f", total
  }' "$file")"
  rm -f "$file"
}

# Prints the time of each step that SCRIPT started, from the AESD_STEP_LOG
# file LOG (a step lasts until the next step of SCRIPT, the last one until
# END seconds and END_CPU CPU seconds), as a Markdown table with the total:
# wall-clock time, and the CPU time of the processes the step ran (for the
# steps of SCRIPT itself; a background job's CPU counts where it is waited
# for). The steps of nested scripts are counted in the step of SCRIPT that
# ran them. SCRIPT '*': every step of every script, wall-clock time only:
#   step_table LOG SCRIPT END [END_CPU]
step_table() {
  awk -F '\t' -v script="$2" -v end="$3" -v end_cpu="${4:-}" '
    BEGIN { n = 0 }
    script == "*" || $2 == script { t[n] = $1; sc[n] = $2; title[n] = $3; cpu[n] = $4; n++ }
    END {
      if (n == 0) exit
      with_cpu = (script != "*" && end_cpu != "")
      if (with_cpu) printf "\n| step | wall | CPU |\n| --- | ---: | ---: |\n"
      else printf "\n| step | wall |\n| --- | ---: |\n"
      for (i = 0; i < n; i++) {
        stop = (i + 1 < n) ? t[i + 1] : end
        d = stop - t[i]
        name = (script == "*") ? (sc[i] ": " title[i]) : title[i]
        gsub(/\|/, "\\|", name)
        if (length(name) > 90) name = substr(name, 1, 87) "..."
        if (with_cpu) {
          c = ((i + 1 < n) ? cpu[i + 1] : end_cpu) - cpu[i]
          printf "| %s | %d:%02d | %d:%02d |\n", name, int(d / 60), d % 60, int(c / 60), c % 60
        } else {
          printf "| %s | %d:%02d |\n", name, int(d / 60), d % 60
        }
      }
      if (with_cpu) {
        c = end_cpu - cpu[0]
        printf "| **total** | **%d:%02d** | **%d:%02d** |\n", int(end / 60), end % 60, int(c / 60), c % 60
      } else {
        printf "| **total** | **%d:%02d** |\n", int(end / 60), end % 60
      }
    }' "$1"
}

# Installs the Debian packages that are not installed yet; runs
# `apt-get update` once per call, and only when something is missing.
apt_install() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  step "apt-get install ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Installs REQUIREMENTS (a pip requirements file) into the venv VENV, unless
# VENV/bin/PROGRAM exists and the file is unchanged since the last
# successful install (its hash, a stamp in the venv). PYTHON picks the
# interpreter (default python3):  venv_install VENV REQUIREMENTS PROGRAM
venv_install() {
  local venv="$1" requirements="$2" program="$3" stamp wanted
  stamp="$venv/.requirements.sha256"
  wanted="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [[ -x "$venv/bin/$program" && "$(cat "$stamp" 2>/dev/null)" == "$wanted" ]]; then
    return 0
  fi
  python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
  step "$program into $venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  echo "$wanted" >"$stamp"
}

# Adds rustup components to the active toolchain when they are missing.
rustup_components() {
  local component
  for component in "$@"; do
    rustup component list --installed 2>/dev/null | grep -q "^${component}" ||
      {
        step "rustup component add $component"
        rustup component add "$component"
      }
  done
}

# Prints a TCP port on 127.0.0.1 that is free right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Succeeds if nothing listens on 127.0.0.1:PORT right now (a bind succeeds).
port_free() {
  python3 -c '
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1" 2>/dev/null
}

# Stops the processes PID...: SIGTERM, up to 2 s to exit, then SIGKILL.
stop_pids() {
  local pid alive _
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    alive=0
    for pid in "$@"; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" = 1 ] || return 0
    sleep 0.2
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
}

# For an EXIT trap: stops the aesd whose pid the caller keeps in $aesd_pid
# (if it started one) and removes DIR, the caller's temporary folder.
stop_aesd_and_remove() {
  if [[ -n "${aesd_pid:-}" ]]; then kill "$aesd_pid" 2>/dev/null || true; fi
  rm -rf "$1"
}

# Prints `openssl speed -evp CIPHER -bytes 16384` (3 s, user CPU, one core)
# in bytes per second; fails saying so, naming SCRIPT, when openssl gives no
# figure:  openssl_speed SCRIPT CIPHER
openssl_speed() {
  local rate
  rate="$(openssl speed -evp "$2" -bytes 16384 -seconds 3 -mr 2>/dev/null | awk -F: '$1 == "+F" { print $4 }')"
  [[ -n "$rate" ]] || {
    echo "$1: no figure from openssl speed -evp $2" >&2
    return 1
  }
  echo "$rate"
}

# Prints the copy floor in ns per byte of the echo server's own CPU
# (scripts/bench/loopback-floor.sh --figure copy, median of 3 runs) for
# CONNECTIONS connections at once sending BYTES each:
#   copy_floor_ns CONNECTIONS BYTES
copy_floor_ns() {
  bash "$(dirname "${BASH_SOURCE[0]}")/bench/loopback-floor.sh" --figure copy \
    --connections "$1" --bytes "$2" --repeat 3
}

# Waits up to SECONDS (default 60: qemu start-up) for 127.0.0.1:PORT to accept
# connections; fails saying so otherwise.
wait_port() {
  local port="$1" seconds="${2:-60}" _
  for _ in $(seq $((seconds * 5))); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "nothing listens on 127.0.0.1:$port after $seconds s" >&2
  return 1
}

# Builds the host binaries a script runs and finds them:
#   host_bins SCRIPT PROFILE BUILD "PACKAGE..." BINARY...
# PROFILE is release or debug (anything else: exit 2 naming SCRIPT); with
# BUILD 1, `cargo build` of the PACKAGEs' binaries in that profile. Sets
# HOST_BIN to the folder holding them and exits 2, naming SCRIPT, when a
# BINARY is not there (e.g. with BUILD 0 before any build).
host_bins() {
  local script="$1" profile="$2" build="$3" packages="$4" name
  shift 4
  local flags=(--locked --quiet --bins)
  case "$profile" in
    release) flags+=(--release) ;;
    debug) ;;
    *)
      echo "$script: --profile must be release or debug" >&2
      exit 2
      ;;
  esac
  for name in $packages; do flags+=(-p "$name"); done
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if ((build)); then
    step "${script%.sh}: build ($profile)"
    (cd "$root" && nice -n 10 cargo build "${flags[@]}")
  fi
  HOST_BIN="${CARGO_TARGET_DIR:-$root/target}/$profile"
  for name in "$@"; do
    [[ -x "$HOST_BIN/$name" ]] || {
      echo "$script: no $profile $name in $HOST_BIN (drop --no-build)" >&2
      exit 2
    }
  done
}
