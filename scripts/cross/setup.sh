#!/usr/bin/env bash
# Installs everything the board builds need, idempotently:
#   - Debian: qemu-user (run target binaries), binutils (readelf), shellcheck
#   - rustup: the pinned nightly with rust-src, clippy, rustfmt, llvm-tools and
#     the prebuilt aarch64-unknown-linux-musl std
#   - zig from PyPI (`ziglang`): C compiler, linker and musl for all boards
#   - std for riscv32imac/riscv64gc-unknown-linux-musl (rustup has none), built
#     once from rust-src and installed into the pinned nightly's sysroot, so
#     that plain `cargo build --target ...` needs no -Zbuild-std
# then runs scripts/cross/selftest.sh if anything changed.
# A second run checks stamps and exits in about a second.
#
# Usage: scripts/cross/setup.sh [--toolchain-only] [--force-std] [--selftest]
#   --toolchain-only  only the pinned nightly and its components (what host
#                     builds need once rust-toolchain.toml pins it)
#   --force-std       rebuild the riscv std even if its stamp matches
#   --selftest        run the selftest even if nothing changed
# Env: AESD_CROSS_HOME (default ~/.cache/aesd-cross), AESD_JOBS (default 2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/cross/env.sh
. "$here/env.sh"

force_std=0
selftest=0
toolchain_only=0
for a in "$@"; do
  case "$a" in
    --toolchain-only) toolchain_only=1 ;;
    --force-std) force_std=1 ;;
    --selftest) selftest=1 ;;
    -h | --help)
      sed -n '2,19s/^# \{0,1\}//p' "$0"
      exit 0
      ;;
    *)
      echo "setup.sh: unknown argument $a" >&2
      exit 2
      ;;
  esac
done
jobs="${AESD_JOBS:-2}"
changed=0
log() { printf '[setup] %s\n' "$*" >&2; }

# --- rust-toolchain.toml must name the same nightly -------------------------
if [[ -f "$root/rust-toolchain.toml" ]]; then
  pinned="$(sed -n 's/^[[:space:]]*channel[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$root/rust-toolchain.toml")"
  if [[ "$pinned" != "$AESD_NIGHTLY" ]]; then
    log "rust-toolchain.toml pins '$pinned' but scripts/cross/env.sh pins '$AESD_NIGHTLY'; make them equal"
    exit 1
  fi
fi

# --- Rust: pinned nightly, components, prebuilt targets -------------------------
components=(rust-src clippy rustfmt llvm-tools)
prebuilt_targets=(aarch64-unknown-linux-musl)
need_rustup=0
if ! rustup run "$AESD_NIGHTLY" rustc --version >/dev/null 2>&1; then
  need_rustup=1
else
  have="$(rustup component list --toolchain "$AESD_NIGHTLY" --installed)"
  for c in "${components[@]}"; do grep -q "^$c" <<<"$have" || need_rustup=1; done
  for t in "${prebuilt_targets[@]}"; do grep -q "^rust-std-$t\$" <<<"$have" || need_rustup=1; done
fi
if ((need_rustup)); then
  log "rustup toolchain install $AESD_NIGHTLY"
  comp_args=()
  for c in "${components[@]}"; do comp_args+=(--component "$c"); done
  for t in "${prebuilt_targets[@]}"; do comp_args+=(--target "$t"); done
  rustup toolchain install "$AESD_NIGHTLY" --profile minimal "${comp_args[@]}" --no-self-update
  changed=1
fi
if ((toolchain_only)); then
  log "toolchain $AESD_NIGHTLY ready"
  exit 0
fi
sysroot="$(rustc "+$AESD_NIGHTLY" --print sysroot)"

# --- Debian packages ----------------------------------------------------------
apt_pkgs=(qemu-user binutils shellcheck ca-certificates)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  log "apt-get install ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  changed=1
fi

# --- zig from PyPI --------------------------------------------------------------
if [[ "$("$AESD_ZIG" version 2>/dev/null || true)" != "$AESD_ZIG_VERSION" ]]; then
  dir="$AESD_CROSS_HOME/zig-$AESD_ZIG_VERSION"
  log "pip install ziglang==$AESD_ZIG_VERSION into $dir"
  rm -rf "$dir.tmp"
  mkdir -p "$AESD_CROSS_HOME"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile \
    --target "$dir.tmp" "ziglang==$AESD_ZIG_VERSION"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  "$AESD_ZIG" version >/dev/null
  changed=1
fi

# --- std for the targets rustup has no prebuilt std for ------------------------
# Built like rustup's: release, panic=unwind (works with panic=abort profiles
# too), bitcode embedded (for LTO), with the same target flags as
# .cargo/config.toml. Keep STD_RECIPE in sync with the build command below.
STD_RECIPE="v2 build-std=std,panic_abort,test opt-level=3 codegen-units=1 debug=line-tables-only +crt-static embed-bitcode panic_abort:-Cpanic=abort"
stdbuild="$AESD_CROSS_HOME/std-build"
for t in "${AESD_STD_FROM_SOURCE[@]}"; do
  spec=""
  flags=(-Ctarget-feature=+crt-static -Cembed-bitcode=yes)
  if [[ -f "$root/targets/$t.json" ]]; then
    spec="$(sha256sum <"$root/targets/$t.json")"
    flags=(-Zunstable-options "${flags[@]}")
  fi
  stamp_want="$(printf '%s\n' "$(rustc "+$AESD_NIGHTLY" -vV)" "$STD_RECIPE" "spec: $spec" | sha256sum | cut -d' ' -f1)"
  stamp="$sysroot/lib/rustlib/$t/aesd-std.stamp"
  if ((!force_std)) && [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_want" ]]; then
    continue
  fi
  log "building std for $t (about a minute)"
  # Start clean: cargo fingerprints do not cover the wrapper or the recipe.
  rm -rf "$stdbuild/target"
  mkdir -p "$stdbuild/src"
  cat >"$stdbuild/Cargo.toml" <<'EOF'
[package]
name = "aesd-std-dummy"
version = "0.0.0"
edition = "2024"
publish = false

[lib]
path = "src/lib.rs"

[profile.release]
opt-level = 3
codegen-units = 1
debug = "line-tables-only"

[workspace]
EOF
  echo '#![no_std]' >"$stdbuild/src/lib.rs"
  # As in rust's bootstrap: panic_abort itself is compiled with panic=abort,
  # everything else with unwind.
  cat >"$stdbuild/rustc-wrapper" <<'WRAPPER'
#!/usr/bin/env bash
set -euo pipefail
prev=""
for a in "$@"; do
  if [[ "$prev" == --crate-name && "$a" == panic_abort ]]; then exec "$@" -Cpanic=abort; fi
  prev="$a"
done
exec "$@"
WRAPPER
  chmod +x "$stdbuild/rustc-wrapper"
  json="$stdbuild/$t.json-messages"
  (
    cd "$stdbuild"
    RUST_TARGET_PATH="$root/targets" \
      RUSTC_WRAPPER="$stdbuild/rustc-wrapper" \
      CARGO_TARGET_DIR="$stdbuild/target" \
      CARGO_ENCODED_RUSTFLAGS="$(
        IFS=$'\x1f'
        echo "${flags[*]}"
      )" \
      cargo "+$AESD_NIGHTLY" build --quiet --release --jobs "$jobs" \
      -Zbuild-std=std,panic_abort,test --target "$t" \
      --message-format=json-render-diagnostics >"$json"
  )
  dest="$sysroot/lib/rustlib/$t/lib"
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  python3 - "$json" "$dest.new" <<'EOF'
import json, shutil, sys
n = 0
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or "aesd-std-dummy" in m["package_id"]:
        continue
    for f in m["filenames"]:
        if f.endswith((".rlib", ".rmeta")):
            shutil.copy2(f, sys.argv[2]); n += 1
if n < 20:
    sys.exit(f"only {n} std artifacts found")
EOF
  rm -rf "$dest"
  mv "$dest.new" "$dest"
  rm -rf "$stdbuild/target"
  echo "$stamp_want" >"$stamp"
  changed=1
done

# --- verify: build + run a std self-test for every board under qemu --------------
if ((changed || selftest)); then
  "$here/selftest.sh"
else
  log "up to date ($AESD_NIGHTLY, zig $AESD_ZIG_VERSION, std stamps match)"
fi
