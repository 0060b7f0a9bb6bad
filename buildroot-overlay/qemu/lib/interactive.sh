# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# run.sh without --smoke: the guest's serial console on this terminal, how
# to reach aesd, /metrics and the HTTP API printed (the forwarded ports, or
# the namespace of --net tap), and the disk. Exits 0 when qemu exits
# normally, 4 otherwise.

run_interactive() {
	local -a args
	local status=0
	if [[ "$net_kind" == tap ]]; then
		mapfile -t args < <(qemu_args)
		cat >&2 <<-EOF

			Emulated board (qemu-system-riscv32 virt, $SMP harts rv32imac, $MEM), overlay $overlay
			  network:  TAP $tap_dev in the namespace $netns ($NET_HOST_ADDR), guest $NET_GUEST_ADDR; removed when qemu exits.
			            Reach it from inside the namespace:
			  aesd:     ip netns exec $netns ./target/release/aesload --server $NET_GUEST_ADDR:$GUEST_AESD_PORT --suite thousand --scale 0.01
			  metrics:  ip netns exec $netns curl -s http://$NET_GUEST_ADDR:$GUEST_METRICS_PORT/metrics
			  keyring:  ip netns exec $netns env BAO_ADDR=http://$NET_GUEST_ADDR:$GUEST_HTTP_PORT bao status   (sealed at boot: bao operator init once, bao operator unseal after every boot)
			  disk:     $disk_desc
			  console:  below; a root shell once booted. 'poweroff' stops the guest; Ctrl-A then X kills qemu.

		EOF
	else
		pick_ports
		mapfile -t args < <(qemu_args)
		cat >&2 <<-EOF

			Emulated board (qemu-system-riscv32 virt, $SMP harts rv32imac, $MEM), overlay $overlay
			  network:  qemu's user network; hostfwd drops connects that arrive together (use --net tap, as root, for the large and thousand suites)
			  aesd:     127.0.0.1:$port_aesd  ->  guest $GUEST_AESD_PORT
			            aesload --server 127.0.0.1:$port_aesd --clients 10 --chunk 5 --sizes 256K,1M --iter 1000
			  metrics:  http://127.0.0.1:$port_metrics/metrics  ->  guest $GUEST_METRICS_PORT
			            (Prometheus: put 127.0.0.1:$port_metrics in deploy/prometheus/prometheus.yml's targets)
			  keyring:  BAO_ADDR=http://127.0.0.1:$port_http  ->  guest $GUEST_HTTP_PORT (OpenBao's HTTP API, plain HTTP)
			            bao status; sealed at boot: bao operator init once, bao operator unseal after every boot
			  disk:     $disk_desc
			  console:  below; a root shell once booted. 'poweroff' stops the guest; Ctrl-A then X kills qemu.

		EOF
	fi
	"${net_exec[@]}" qemu-system-riscv32 "${args[@]}" -nographic || status=$?
	if ((status != 0)); then
		echo "run.sh: qemu-system-riscv32 exited with status $status" >&2
		exit 4
	fi
	exit 0
}
