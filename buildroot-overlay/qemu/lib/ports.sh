# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# The host ends of the board's forwarded ports (aesd, /metrics and the HTTP
# API), on 127.0.0.1: given by hand (--port-aesd, --port-metrics,
# --port-http), which must be free, or picked (interactive: the guest's own
# numbers if free; --smoke: free ones). Reads $smoke, $given_aesd,
# $given_metrics, $given_http; sets $port_aesd, $port_metrics, $port_http.
# port_free and free_port are scripts/lib.sh's.

# check_given_ports: ports given by hand must be free now (qemu would fail to
# bind them); exits 4 otherwise.
check_given_ports() {
	local given
	for given in "$given_aesd" "$given_metrics" "$given_http"; do
		if [[ -n "$given" ]] && ! port_free "$given"; then
			echo "run.sh: 127.0.0.1:$given (--port-aesd/--port-metrics/--port-http) is already in use; choose another port or leave the option out" >&2
			exit 4
		fi
	done
}

# pick_port GUEST TAKEN...: the guest's own number GUEST when interactive and
# free, else a free port; never one of TAKEN.
pick_port() {
	local guest=$1 port taken
	shift
	if ((smoke == 0)) && port_free "$guest"; then port="$guest"; else port="$(free_port)"; fi
	for taken in "$@"; do
		while [[ "$port" == "$taken" ]]; do port="$(free_port)"; done
	done
	echo "$port"
}

# pick_ports: chooses the ports not given by hand.
pick_ports() {
	port_aesd="$given_aesd"
	port_metrics="$given_metrics"
	port_http="$given_http"
	[[ -n "$port_aesd" ]] || port_aesd="$(pick_port 7878 "$port_metrics" "$port_http")"
	[[ -n "$port_metrics" ]] || port_metrics="$(pick_port 9878 "$port_aesd" "$port_http")"
	[[ -n "$port_http" ]] || port_http="$(pick_port 8200 "$port_aesd" "$port_metrics")"
}
