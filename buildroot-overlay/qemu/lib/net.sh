# shellcheck shell=bash disable=SC2154,SC2034 # sourced: globals of the sourcing script
# The board's network, one of two kinds (--net):
#   tap   a TAP device in a network namespace made for this run
#         (aesd-board-PID-N, removed at exit): the namespace's end of the TAP
#         is 10.0.2.2/24, the guest's gateway; the guest keeps 10.0.2.15/24
#         (guest/etc/network/interfaces). qemu, aesload and curl run in the
#         namespace (ip netns exec), so every connect reaches the guest's own
#         TCP stack (its accept queue, its somaxconn), as on the board's LAN.
#         Needs root (ip netns, ip tuntap), iproute2 and /dev/net/tun.
#   user  qemu's user network (slirp) with hostfwd on 127.0.0.1: needs no
#         privileges and the host reaches the ports directly, but slirp
#         listens with a backlog of 1, so connects that arrive together are
#         dropped (clients time out): enough for a person, a scrape or the
#         smoke suite, not for the study's 50-client batches.
# --net auto: --smoke takes tap when it can be set up (else user, saying
# why); interactive runs and ports given by hand take user.
# Reads $net, $smoke, $given_aesd, $given_metrics, $given_http; sets
# $net_kind, $netns, $tap_dev, $net_exec (the command prefix that runs a
# host-side program on the board's network), $board_host and, with tap,
# $port_aesd/$port_metrics/$port_http (the guest's own ports).

NET_HOST_ADDR=10.0.2.2
NET_GUEST_ADDR=10.0.2.15
NET_PREFIX=24

net_kind=""
net_why=""
netns=""
tap_dev=""
net_exec=()
board_host=127.0.0.1

# tap_unavailable: why a TAP in a namespace cannot be made here (prints the
# reason and succeeds), or fails if nothing stands in the way.
tap_unavailable() {
	if ((EUID != 0)); then
		echo "not root (ip netns add and ip tuntap need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
	elif [[ ! -c /dev/net/tun ]]; then
		echo "no /dev/net/tun (the tun module is not loaded, or this container has no such device)"
	else
		return 1
	fi
}

# oneline FILE: FILE's lines joined with "; ".
oneline() { paste -s -d ';' "$1" | sed 's/;/; /g; s/[[:space:]]*$//'; }

# setup_tap: makes the namespace and its TAP; fails if a step fails, with
# the reason in $net_why (what was made is removed by teardown_network).
setup_tap() {
	local err="$run/net-setup.err"
	apt_install iproute2 || {
		net_why="apt-get install iproute2 failed"
		return 1
	}
	netns="aesd-board-$$-$RANDOM"
	tap_dev="aesdtap$$"
	tap_dev="${tap_dev:0:15}"
	if ! ip netns add "$netns" 2>"$err"; then
		net_why="ip netns add $netns failed: $(oneline "$err")"
		netns=""
		return 1
	fi
	if ! {
		ip -n "$netns" link set lo up &&
			ip -n "$netns" tuntap add dev "$tap_dev" mode tap &&
			ip -n "$netns" addr add "$NET_HOST_ADDR/$NET_PREFIX" dev "$tap_dev" &&
			ip -n "$netns" link set "$tap_dev" up &&
			ip netns exec "$netns" true
	} 2>"$err"; then
		net_why="setting up $tap_dev in the namespace $netns failed: $(oneline "$err")"
		return 1
	fi
}

# choose_network: resolves --net and sets the network up; exits 4 if --net tap
# was asked for and cannot be had.
choose_network() {
	local why=""
	net_kind="$net"
	if [[ "$net" == auto ]]; then
		if [[ -n "$given_aesd$given_metrics$given_http" ]]; then
			net_kind=user
		elif ((smoke == 0)); then
			net_kind=user
		elif why="$(tap_unavailable)"; then
			net_kind=user
		else
			net_kind=tap
		fi
	elif [[ "$net" == tap ]] && why="$(tap_unavailable)"; then
		echo "run.sh: --net tap: cannot make the board's TAP network: $why" >&2
		exit 4
	fi
	if [[ "$net_kind" == tap ]]; then
		if ! setup_tap; then
			if [[ "$net" == tap ]]; then
				echo "run.sh: --net tap: $net_why" >&2
				exit 4
			fi
			why="$net_why"
			teardown_network
			net_kind=user
		fi
	fi
	if [[ "$net_kind" == tap ]]; then
		net_exec=(ip netns exec "$netns")
		board_host="$NET_GUEST_ADDR"
		port_aesd="$GUEST_AESD_PORT"
		port_metrics="$GUEST_METRICS_PORT"
		port_http="$GUEST_HTTP_PORT"
		say "network: TAP $tap_dev in the namespace $netns ($NET_HOST_ADDR/$NET_PREFIX, the guest's gateway); the guest is $NET_GUEST_ADDR; aesload and curl run in the namespace"
	elif [[ -n "$why" ]]; then
		say "network: qemu's user network (hostfwd on 127.0.0.1) because a TAP network cannot be made here: $why"
		say "  hostfwd drops connects that arrive together (backlog 1): suites with many clients at once (large, thousand) will see connect timeouts; the TAP network needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and /dev/net/tun"
	fi
}

# teardown_network: (at exit, after qemu has stopped) removes the TAP and the
# namespace, saying so if it cannot.
teardown_network() {
	[[ -n "$netns" ]] || return 0
	if [[ -e "/run/netns/$netns" ]]; then
		ip -n "$netns" link del "$tap_dev" 2>/dev/null || true
		ip netns del "$netns" 2>/dev/null ||
			say "warning: could not remove the network namespace $netns (remove it with: ip netns del $netns)"
	fi
	netns=""
}

# netdev_arg: qemu's -netdev for the chosen kind.
netdev_arg() {
	if [[ "$net_kind" == tap ]]; then
		echo "tap,id=net0,ifname=$tap_dev,script=no,downscript=no"
	else
		echo "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:$port_aesd-:$GUEST_AESD_PORT,hostfwd=tcp:127.0.0.1:$port_metrics-:$GUEST_METRICS_PORT,hostfwd=tcp:127.0.0.1:$port_http-:$GUEST_HTTP_PORT"
	fi
}

# net_desc: the network in a few words, for the report.
net_desc() {
	if [[ "$net_kind" == tap ]]; then
		echo "host -> guest over a TAP in the namespace $netns"
	else
		echo "host -> guest via qemu's hostfwd"
	fi
}
