# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# The --smoke checks of the board's keyring (on its disk, disk.sh), driven
# from the host with the real `bao` CLI (OpenBao's HTTP API on the guest's
# port 8200) and aescrypt (by-name jobs on the job port):
#   boot 1: bao operator init (2 shares, both needed), unseal, a transit
#           key, a file encrypted by name; Transit's data endpoints: bao
#           write transit/encrypt, hvac's encrypt_data (each answer in
#           OpenBao's vault:v1: form);
#   between: the keyring's files on the powered-off disk (debugfs);
#   boot 2: bao status says sealed (exit 2), a by-name job is refused
#           `sealed`, a wrong share is refused and the board stays sealed,
#           the two shares unseal it, the file from boot 1 decrypts by name
#           to its original bytes, and boot 1's Transit ciphertexts decrypt
#           (bao write transit/decrypt, hvac's decrypt_data) to theirs.
# Each failed check calls fail (smoke.sh). Reads $bao, $aescrypt, $run,
# $disk, the network (net.sh: $net_exec, $board_host) and the ports.

KEYRING_KEY=board-file
# The plaintext: not a multiple of anything (the last chunk is short).
KEYRING_FILE_BYTES=300007

# find_bao: the bao CLI, $AESD_BAO or the venv scripts/bao-cli.sh makes; a
# missing one is a setup failure (exit 3).
find_bao() {
	bao="${AESD_BAO:-$repo/scripts/bao/.venv/bin/bao}"
	[[ -x "$bao" ]] || build_fail "the bao CLI is not at $bao (bash scripts/bao-cli.sh --install-only, or set AESD_BAO): --smoke checks the board's keyring with it"
}

# bao_on_board ARG...: the bao CLI against the board's HTTP API (with the
# root token once there is one), its output in $run/keyring/bao.out; its
# exit status is the function's.
bao_on_board() {
	local token=""
	[[ ! -f "$kr/root-token" ]] || token="$(cat "$kr/root-token")"
	"${net_exec[@]}" env BAO_ADDR="http://$board_host:$port_http" BAO_TOKEN="$token" \
		NO_PROXY='*' no_proxy='*' "$bao" "$@" >"$kr/bao.out" 2>&1
}

# bao_said: what the last bao_on_board printed, on one line.
bao_said() { tr -s '\n' ' ' <"$kr/bao.out"; }

# by_name MODE IN OUT: aescrypt MODE by the key's name on the board's job
# port with the root token; output in $run/keyring/aescrypt.err.
by_name() {
	timeout 120 "${net_exec[@]}" "$aescrypt" "$1" --server "$board_host:$port_aesd" --key "$KEYRING_KEY" \
		--token-file "$kr/root-token" -i "$2" -o "$3" >"$kr/aescrypt.err" 2>&1
}

# hvac_on_board encrypt|decrypt FILE: hvac (the Python client, in bao's
# venv) against the board's HTTP API with the root token: encrypt FILE's
# bytes (the ciphertext to stdout), or decrypt the ciphertext in FILE (the
# plaintext's bytes to stdout); errors in $run/keyring/hvac.err.
hvac_on_board() {
	local python
	python="$(dirname "$bao")/python3"
	[[ -x "$python" ]] || fail "no python3 beside the bao CLI ($python): hvac is installed in bao's venv (scripts/bao-cli.sh)"
	"${net_exec[@]}" env NO_PROXY='*' no_proxy='*' "$python" - "$1" "$2" "http://$board_host:$port_http" \
		"$(cat "$kr/root-token")" "$KEYRING_KEY" 2>"$kr/hvac.err" <<-'EOF'
			import base64, sys
			import hvac
			mode, path, url, token, key = sys.argv[1:]
			transit = hvac.Client(url=url, token=token).secrets.transit
			data = open(path, "rb").read()
			if mode == "encrypt":
			    answer = transit.encrypt_data(name=key, plaintext=base64.b64encode(data).decode())
			    sys.stdout.write(answer["data"]["ciphertext"])
			else:
			    answer = transit.decrypt_data(name=key, ciphertext=data.decode())
			    sys.stdout.buffer.write(base64.b64decode(answer["data"]["plaintext"]))
		EOF
}

# transit_with_bao encrypt|decrypt FILE: bao write transit/MODE/KEY with
# FILE's bytes (base64) or the ciphertext in FILE; the answer's field
# (ciphertext, or the plaintext's bytes) to stdout.
transit_with_bao() {
	local field arg
	if [[ "$1" == encrypt ]]; then
		field=ciphertext arg="plaintext=$(base64 -w0 "$2")"
	else
		field=plaintext arg="ciphertext=$(cat "$2")"
	fi
	bao_on_board write -field="$field" "transit/$1/$KEYRING_KEY" "$arg" || return 1
	if [[ "$1" == encrypt ]]; then cat "$kr/bao.out"; else base64 -d "$kr/bao.out"; fi
}

# share N: the Nth unseal share (base64) sys/init gave.
share() { sed -n "${1}p" "$kr/shares"; }

# Boot 1: a new keyring, initialised and unsealed, a key, a file by name.
keyring_first_boot() {
	kr="$run/keyring"
	mkdir -m 0700 "$kr"
	local st=0 t0
	t0="$(now)"
	bao_on_board status || st=$?
	((st != 1)) || fail "bao status could not reach the board's HTTP API at http://$board_host:$port_http (guest $NET_GUEST_ADDR:$GUEST_HTTP_PORT: aesd's http-listen must be the board's address, as the emulated board's /etc/default/aesd sets it): $(bao_said)"
	((st == 2)) || fail "bao status on a new board: exit $st, want 2 (sealed, not initialised): $(bao_said)"
	grep -Eq '^Initialized +false' "$kr/bao.out" ||
		fail "the board's keyring is already initialised ($disk holds one from an earlier run); --smoke needs a new one: leave --disk out or name a file that does not exist"
	bao_on_board operator init -key-shares=2 -key-threshold=2 -format=json ||
		fail "bao operator init -key-shares=2 -key-threshold=2 failed: $(bao_said)"
	python3 - "$kr/bao.out" "$kr/shares" "$kr/root-token" <<-'EOF' || fail "bao operator init's answer has no 2 shares and root token: $(bao_said)"
		import json, os, sys
		d = json.load(open(sys.argv[1]))
		keys, token = d["unseal_keys_b64"], d["root_token"]
		assert len(keys) == 2 and token
		for path, text in ((sys.argv[2], "\n".join(keys) + "\n"), (sys.argv[3], token + "\n")):
		    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
		        f.write(text)
	EOF
	bao_on_board operator unseal "$(share 1)" || fail "bao operator unseal (share 1 of 2) failed: $(bao_said)"
	bao_on_board operator unseal "$(share 2)" || fail "bao operator unseal (share 2 of 2) failed: $(bao_said)"
	st=0
	bao_on_board status || st=$?
	((st == 0)) || fail "bao status after unsealing with both shares: exit $st, want 0 (unsealed): $(bao_said)"
	bao_on_board write -f "transit/keys/$KEYRING_KEY" || fail "bao write -f transit/keys/$KEYRING_KEY failed: $(bao_said)"
	head -c "$KEYRING_FILE_BYTES" /dev/urandom >"$kr/plain.bin"
	by_name encrypt "$kr/plain.bin" "$kr/plain.bin.age" ||
		fail "aescrypt encrypt --key $KEYRING_KEY on the unsealed board failed: $(tr '\n' ' ' <"$kr/aescrypt.err")"
	head -c 21 "$kr/plain.bin.age" | grep -q '^age-encryption.org/v1' ||
		fail "aescrypt encrypt --key $KEYRING_KEY wrote no age file"
	head -c 1000 /dev/urandom >"$kr/transit-bao.bin"
	head -c 777 /dev/urandom >"$kr/transit-hvac.bin"
	transit_with_bao encrypt "$kr/transit-bao.bin" >"$kr/transit-bao.ct" ||
		fail "bao write transit/encrypt/$KEYRING_KEY failed: $(bao_said)"
	hvac_on_board encrypt "$kr/transit-hvac.bin" >"$kr/transit-hvac.ct" ||
		fail "hvac's transit encrypt_data against the board failed: $(tr '\n' ' ' <"$kr/hvac.err")"
	local ct
	for ct in "$kr/transit-bao.ct" "$kr/transit-hvac.ct"; do
		grep -Eq '^vault:v1:[A-Za-z0-9+/=]+$' "$ct" || fail "a Transit ciphertext from the board is not vault:v1:...: $(head -c 100 "$ct")"
	done
	t_keyring1="$(since "$t0")"
	say "keyring, boot 1 ($t_keyring1 s): bao operator init (2 shares, threshold 2), unsealed, transit/keys/$KEYRING_KEY made, $KEYRING_FILE_BYTES bytes encrypted by name ($(stat -c %s "$kr/plain.bin.age") bytes), 1000 and 777 bytes through transit/encrypt with bao and hvac"
}

# Between the boots: the keyring's files on the powered-off disk.
keyring_on_disk() {
	local listing files
	listing="$(debugfs -R 'ls -p /keyring' "$disk" 2>/dev/null)" ||
		fail "debugfs could not read /keyring on $disk"
	# ls -p: /inode/mode/uid/gid/name/size/ per entry.
	files="$(awk -F/ '$6 != "." && $6 != ".." && $6 != "" { printf "%s%s (%s bytes, uid %s)", sep, $6, $7, $4; sep = ", " }' <<<"$listing")"
	[[ -n "$files" ]] || fail "the keyring directory on the disk ($disk, /keyring) is empty after poweroff: aesd kept nothing there"
	say "keyring on the powered-off disk: /var/lib/aesd/keyring holds $files"
}

# Boot 2: sealed after the reboot; a wrong share refused; unsealed with the
# two shares; the file from boot 1 decrypts by name to the same bytes.
keyring_after_reboot() {
	local st=0 t0
	t0="$(now)"
	bao_on_board status || st=$?
	((st == 2)) || fail "bao status after the reboot: exit $st, want 2 (sealed): $(bao_said)"
	if ! grep -Eq '^Initialized +true' "$kr/bao.out" || ! grep -Eq '^Sealed +true' "$kr/bao.out"; then
		fail "bao status after the reboot does not say initialised and sealed: $(bao_said)"
	fi
	st=0
	by_name decrypt "$kr/plain.bin.age" "$kr/sealed.out" || st=$?
	((st != 0)) || fail "aescrypt decrypt --key $KEYRING_KEY succeeded on the sealed board"
	grep -q 'sealed' "$kr/aescrypt.err" ||
		fail "aescrypt decrypt on the sealed board failed without saying sealed: $(tr '\n' ' ' <"$kr/aescrypt.err")"
	[[ ! -s "$kr/sealed.out" ]] || fail "aescrypt decrypt on the sealed board wrote output"
	# Negative control: share 1, then share 2 with one byte changed.
	bao_on_board operator unseal "$(share 1)" || fail "bao operator unseal (share 1 of 2) after the reboot failed: $(bao_said)"
	python3 -c 'import base64, sys; b = bytearray(base64.b64decode(sys.argv[1])); b[-1] ^= 1; print(base64.b64encode(b).decode())' \
		"$(share 2)" >"$kr/wrong-share"
	st=0
	bao_on_board operator unseal "$(cat "$kr/wrong-share")" || st=$?
	((st != 0)) || fail "bao operator unseal with a wrong share succeeded"
	grep -q 'do not open the keyring' "$kr/bao.out" ||
		fail "a wrong share was refused without aesd's reason (the shares do not open the keyring): $(bao_said)"
	st=0
	bao_on_board status || st=$?
	if ((st != 2)) || ! grep -Eq '^Unseal Progress +0/2' "$kr/bao.out"; then
		fail "after a wrong share the board must stay sealed with its progress reset: bao status exit $st: $(bao_said)"
	fi
	bao_on_board operator unseal "$(share 1)" || fail "bao operator unseal (share 1 of 2, again) failed: $(bao_said)"
	bao_on_board operator unseal "$(share 2)" || fail "bao operator unseal (share 2 of 2) after the reboot failed: $(bao_said)"
	st=0
	bao_on_board status || st=$?
	((st == 0)) || fail "bao status after unsealing the rebooted board: exit $st, want 0: $(bao_said)"
	by_name decrypt "$kr/plain.bin.age" "$kr/plain.back" ||
		fail "aescrypt decrypt --key $KEYRING_KEY of boot 1's file after the reboot failed: $(tr '\n' ' ' <"$kr/aescrypt.err")"
	cmp -s "$kr/plain.bin" "$kr/plain.back" || fail "boot 1's file decrypted after the reboot differs from the original"
	transit_with_bao decrypt "$kr/transit-bao.ct" >"$kr/transit-bao.back" ||
		fail "bao write transit/decrypt/$KEYRING_KEY of boot 1's ciphertext failed: $(bao_said)"
	hvac_on_board decrypt "$kr/transit-hvac.ct" >"$kr/transit-hvac.back" ||
		fail "hvac's transit decrypt_data of boot 1's ciphertext failed: $(tr '\n' ' ' <"$kr/hvac.err")"
	cmp -s "$kr/transit-bao.bin" "$kr/transit-bao.back" || fail "boot 1's Transit ciphertext (bao) decrypted to other bytes"
	cmp -s "$kr/transit-hvac.bin" "$kr/transit-hvac.back" || fail "boot 1's Transit ciphertext (hvac) decrypted to other bytes"
	t_keyring2="$(since "$t0")"
	say "keyring, boot 2 ($t_keyring2 s): sealed (bao status exit 2), by-name job refused sealed, a wrong share refused (still sealed, progress 0/2), unsealed with the 2 shares, boot 1's file decrypted by name: the same $KEYRING_FILE_BYTES bytes; boot 1's Transit ciphertexts decrypted with bao and hvac: the same bytes"
}
