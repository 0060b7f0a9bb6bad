# shellcheck shell=bash disable=SC2154,SC2034,SC2016 # sourced: globals of the sourcing script; literal $ in patterns
# The sandbox of the S50aesd tests: a chroot at $sandbox (built by
# t_sandbox in cases/s50aesd.sh from Debian's busybox-static and the
# assembled overlay) that S50aesd and aesd run in, and the helpers that run
# commands in it and find, check and stop its processes.

# Prints the pids of processes whose root directory is inside the work
# directory: everything started in the sandbox (aesd, test fakes).
sandbox_pids() {
	local proc root
	for proc in /proc/[0-9]*; do
		root=$(readlink "$proc/root" 2>/dev/null) || continue
		case "$root" in
			"$work" | "$work"/*) echo "${proc#/proc/}" ;;
		esac
	done
}

# Stops everything running in the sandbox and drops its pid files, so that
# one failed test does not cascade into the following ones.
reset_sandbox() {
	local pids
	mapfile -t pids < <(sandbox_pids)
	if [ "${#pids[@]}" -gt 0 ]; then
		stop_pids "${pids[@]}"
	fi
	rm -f "$sandbox"/var/run/*.pid "$sandbox"/var/run/*/*.pid "$sandbox"/var/run/*.supervisor "$sandbox"/var/run/*.logcap
}

# sbx [NAME=VALUE...] COMMAND [ARG...]: runs COMMAND chrooted into the
# sandbox, with only PATH and the given variables in its environment, in a
# private mount namespace that has /proc and /dev/null mounted inside the
# sandbox (the mounts vanish with the namespace's last process). The network
# namespace is the host's: aesd listens on 127.0.0.1 only.
sbx() {
	local -a vars=()
	while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do
		vars+=("$1")
		shift
	done
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${vars[@]}" \
		unshare --mount --propagation private \
		sh -c 'root=$1; shift; mount -t proc proc "$root/proc" && mount --bind /dev/null "$root/dev/null" && exec chroot "$root" "$@"' \
		sbx "$sandbox" "$@"
}

# initd [NAME=VALUE...] ACTION: S50aesd in the sandbox; sets $out and $rc.
initd() {
	out=$(sbx "$@" 2>&1) && rc=0 || rc=$?
}

init_script() {
	local -a args=("$@")
	local action=${args[-1]}
	unset 'args[-1]'
	initd "${args[@]}" /etc/init.d/S50aesd "$action"
}

sandbox_pid() {
	cat "$sandbox/var/run/aesd/aesd.pid"
}

# sandbox_id NAME: the uid of the sandbox's user NAME (its /etc/passwd).
sandbox_id() {
	awk -F: -v n="$1" '$1 == n { print $3 }' "$sandbox/etc/passwd"
}

# status_field PID FIELD: a line of /proc/PID/status without its name
# (e.g. Uid: the real, effective, saved and file system uids).
status_field() {
	sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" | tr -s '[:space:]' ' ' | sed 's/ $//'
}

comm_of() {
	cat "/proc/$1/comm" 2>/dev/null
}

# gone PID: the process has exited (or is a zombie waiting to be reaped).
gone() {
	local state
	[ -r "/proc/$1/stat" ] || return 0
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
	[ -z "$state" ] || [ "$state" = Z ] || [ "$state" = X ]
}

aescrypt() {
	"$bin_dir/aescrypt" "$@"
}
