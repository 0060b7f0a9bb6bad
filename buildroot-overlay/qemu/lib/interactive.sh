# shellcheck shell=bash disable=SC2154 # sourced: globals of the sourcing script
# run.sh without --smoke: the guest's serial console on this terminal, the
# forwarded ports printed. Exits 0 when qemu exits normally, 4 otherwise.

run_interactive() {
	local -a args
	local status=0
	pick_ports
	mapfile -t args < <(qemu_args)
	cat >&2 <<-EOF

		Emulated board (qemu-system-riscv32 virt, $SMP harts rv32imac, $MEM), overlay $overlay
		  aesd:     127.0.0.1:$port_aesd  ->  guest $GUEST_AESD_PORT
		            aesload --server 127.0.0.1:$port_aesd --clients 10 --chunk 5 --sizes 256K,1M --iter 1000
		  metrics:  http://127.0.0.1:$port_metrics/metrics  ->  guest $GUEST_METRICS_PORT
		            (Prometheus: put 127.0.0.1:$port_metrics in deploy/prometheus/prometheus.yml's targets)
		  console:  below; a root shell once booted. 'poweroff' stops the guest; Ctrl-A then X kills qemu.

	EOF
	qemu-system-riscv32 "${args[@]}" -nographic || status=$?
	if ((status != 0)); then
		echo "run.sh: qemu-system-riscv32 exited with status $status" >&2
		exit 4
	fi
	exit 0
}
