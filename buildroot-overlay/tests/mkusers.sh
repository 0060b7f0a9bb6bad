#!/usr/bin/env bash
# Adds the users of a Buildroot users table (makeusers syntax, as
# buildroot-overlay/users.table and the aesd package's AESD_USERS) to a
# root filesystem's /etc/passwd and /etc/group, as Buildroot's mkusers does
# for an image: the S50aesd sandbox (tests/cases/s50aesd.sh) and the
# emulated board's initramfs (qemu/lib/initramfs.sh) get the aesd user the
# board gets.
#
#   buildroot-overlay/tests/mkusers.sh TABLE ROOT
#
# The subset of the syntax the table uses: uid and gid a number, -1 (the
# first free system id from 100) or -2 (the first free user id from 1000);
# the group is created when missing; home "-" is /, shell "-" /bin/false;
# the password field goes to /etc/shadow when ROOT has one (else passwd
# holds "x": no login). A user already in ROOT/etc/passwd is left alone.
# Exit status: 0 done, 1 a line it cannot apply, 2 bad usage.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: mkusers.sh TABLE ROOT" >&2
	exit 2
fi
table=$1
root=$2
passwd=$root/etc/passwd
group=$root/etc/group
mkdir -p "$root/etc"
touch "$passwd" "$group"

# first_free FILE FROM: the first id from FROM not used in FILE's third field.
first_free() {
	local id=$2
	while cut -d: -f3 "$1" | grep -qx "$id"; do
		id=$((id + 1))
	done
	echo "$id"
}

# resolve_id FILE ID: ID, or the first free one for -1 (system) or -2 (user).
resolve_id() {
	case "$2" in
		-1) first_free "$1" 100 ;;
		-2) first_free "$1" 1000 ;;
		*[!0-9]* | '') return 1 ;;
		*) echo "$2" ;;
	esac
}

while read -r name uid grp gid password home shell _groups comment; do
	case "$name" in '' | '#'*) continue ;; esac
	[ -n "$comment" ] || {
		echo "mkusers.sh: $table: incomplete line for $name" >&2
		exit 1
	}
	if cut -d: -f1 "$passwd" | grep -qx "$name"; then
		continue
	fi
	group_id=$(awk -F: -v g="$grp" '$1 == g { print $3 }' "$group")
	if [ -z "$group_id" ]; then
		group_id=$(resolve_id "$group" "$gid") || {
			echo "mkusers.sh: $table: bad gid '$gid' for $name" >&2
			exit 1
		}
		echo "$grp:x:$group_id:" >>"$group"
	fi
	user_id=$(resolve_id "$passwd" "$uid") || {
		echo "mkusers.sh: $table: bad uid '$uid' for $name" >&2
		exit 1
	}
	[ "$home" != - ] || home=/
	[ "$shell" != - ] || shell=/bin/false
	echo "$name:x:$user_id:$group_id:$comment:$home:$shell" >>"$passwd"
	if [ -f "$root/etc/shadow" ]; then
		echo "$name:$password:::::::" >>"$root/etc/shadow"
	fi
done <"$table"
