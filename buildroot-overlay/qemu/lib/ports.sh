# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# The host ends of the board's forwarded ports (aesd and /metrics), on
# 127.0.0.1: given by hand (--port-aesd, --port-metrics), which must be free,
# or picked (interactive: the guest's own numbers if free; --smoke: free
# ones). Reads $smoke, $given_aesd, $given_metrics; sets $port_aesd,
# $port_metrics. port_free and free_port are scripts/lib.sh's.

# check_given_ports: ports given by hand must be free now (qemu would fail to
# bind them); exits 4 otherwise.
check_given_ports() {
	local given
	for given in "$given_aesd" "$given_metrics"; do
		if [[ -n "$given" ]] && ! port_free "$given"; then
			echo "run.sh: 127.0.0.1:$given (--port-aesd/--port-metrics) is already in use; choose another port or leave the option out" >&2
			exit 4
		fi
	done
}

# pick_ports: chooses the ports not given by hand.
pick_ports() {
	if [[ -z "$given_aesd" ]]; then
		if ((smoke == 0)) && port_free 7878; then port_aesd=7878; else port_aesd="$(free_port)"; fi
	fi
	if [[ -z "$given_metrics" ]]; then
		if ((smoke == 0)) && port_free 9878 && [[ "$port_aesd" != 9878 ]]; then port_metrics=9878; else port_metrics="$(free_port)"; fi
		while [[ "$port_metrics" == "$port_aesd" ]]; do port_metrics="$(free_port)"; done
	fi
}
