#!/usr/bin/env python3
#
# aesd SoC target: LiteX + VexRiscv-SMP + LiteEth for the Digilent Arty A7 and Nexys Video.
#
# Regenerates the SoC used by the original aesd study (VexRiscv-SMP at 100 MHz, 1/2/4 cores,
# LiteEth with 2 RX + 2 TX slots of 2 KiB) and an "improved" variant with larger Ethernet buffers.
#
# By default this script only *generates* (no synthesis, no Vivado needed): csr.json/csr.csv,
# software headers, the top-level Verilog + constraints + Vivado script, the Linux device tree
# (DTS, via LiteX's litex_json2dts_linux) and the compiled DTB (via dtc). With --build it runs the
# full flow (BIOS compilation + Vivado synthesis/place/route/bitstream).
#
# See soc/README.md for every option, the two CPU-source modes and the variants.

import argparse
import importlib.util
import json
import re
import os
import shutil
import subprocess
import sys
import time

# Constants ----------------------------------------------------------------------------------------

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))

# Package that carries the pre-generated VexRiscv-SMP cluster netlists (and the SpinalHDL sources
# to generate new ones). Not on PyPI: see README.md "Real bitstream".
VEXRISCV_SMP_DATA_PKG = "pythondata_cpu_vexriscv_smp"

# Ethernet slot presets (RX slots, TX slots). LiteEth slots are 2 KiB each (one frame per slot).
#   default : what the study ran (LiteX's add_ethernet default) -> 8 KiB of buffer in total.
#   improved: see README.md "Why these buffer sizes". Depends on the PHY line rate and on the
#             block RAM of the FPGA: 100 Mb/s Arty A7-35T vs 1 Gb/s Nexys Video (XC7A200T).
ETH_SLOT_PRESETS = {
    "default":  {"arty": (2, 2),  "nexys_video": (2, 2)},
    "improved": {"arty": (8, 8),  "nexys_video": (32, 32)},
}

BOARDS = ("arty", "nexys_video")

# Exit codes.
EXIT_OK            = 0
EXIT_USAGE         = 2
EXIT_NO_VIVADO     = 3
EXIT_NO_DTC        = 4
EXIT_NO_CPU_SOURCE = 5

def info(msg):
    print(f"[aesd-soc] {msg}", flush=True)

def warn(msg):
    print(f"[aesd-soc] WARNING: {msg}", file=sys.stderr, flush=True)

def error(msg):
    print(f"[aesd-soc] ERROR: {msg}", file=sys.stderr, flush=True)

# Argument parsing ---------------------------------------------------------------------------------

def power_of_two(value):
    n = int(value, 0)
    if n < 1 or (n & (n - 1)) != 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a power of two >= 1 (LiteEth decodes slots with address bits)")
    return n

def build_parser():
    parser = argparse.ArgumentParser(
        description="aesd SoC: LiteX VexRiscv-SMP + LiteEth on Digilent Arty A7 / Nexys Video.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)

    # Target (same spirit as litex-boards targets/digilent_arty.py).
    target = parser.add_argument_group("Target options")
    target.add_argument("--board",        default="arty", choices=BOARDS,  help="FPGA board.")
    target.add_argument("--variant",      default="a7-35", choices=["a7-35", "a7-100"],
                                                                           help="Arty A7 board variant (ignored for nexys_video).")
    target.add_argument("--sys-clk-freq", default=100e6, type=float,      help="System clock frequency.")
    target.add_argument("--uart-baudrate", default=115200, type=int,      help="UART baudrate.")
    target.add_argument("--integrated-rom-size",  default=0x10000, type=lambda x: int(x, 0),
                                                                           help="BIOS ROM size (bytes), as in linux-on-litex-vexriscv.")
    target.add_argument("--integrated-sram-size", default=0x1800,  type=lambda x: int(x, 0),
                                                                           help="On-chip SRAM size (bytes), as in linux-on-litex-vexriscv.")
    target.add_argument("--l2-size",      default=0, type=lambda x: int(x, 0),
                                                                           help="L2 cache size; 0 = CPU talks to LiteDRAM natively (study setup), "
                                                                                "non-zero = Wishbone memory path through an L2.")

    # CPU (names mirror LiteX's VexRiscvSMP.args_fill()).
    cpu = parser.add_argument_group("CPU options (VexRiscv-SMP)")
    cpu.add_argument("--cpu-count", default=1, type=int, choices=[1, 2, 4], help="Number of CPUs in the cluster.")
    cpu.add_argument("--with-rvc", default=True, action=argparse.BooleanOptionalAction,
                     help="RISC-V compressed instructions (C). Our riscv32 binaries are rv32imac: keep it on.")
    cpu.add_argument("--aes-instruction", default=True, action=argparse.BooleanOptionalAction,
                     help="VexRiscv's AesPlugin (AES round instructions; LiteX vexriscv_smp 'aes_instruction'), "
                          "on by default as in the study's SoC; the DTS marks every CPU node with "
                          "'litex,aes-instruction' so that aesd (aes-backend = auto) uses it. "
                          "--no-aes-instruction for the plain core.")

    # Ethernet.
    eth = parser.add_argument_group("Ethernet options (LiteEth MAC)")
    eth.add_argument("--improved", action="store_true",
                     help="Use the 'improved' Ethernet buffer preset (arty: 8 RX + 8 TX, nexys_video: 32 RX + 32 TX).")
    eth.add_argument("--eth-rx-slots", default=None, type=power_of_two,
                     help="RX slots (2 KiB each). Default: 2 (study) or the --improved preset. Power of two.")
    eth.add_argument("--eth-tx-slots", default=None, type=power_of_two,
                     help="TX slots (2 KiB each). Default: 2 (study) or the --improved preset. Power of two, <= RX slots.")
    eth.add_argument("--eth-ip",    default="192.168.1.50",  help="Board IP (goes to the DTS bootargs 'ip=').")
    eth.add_argument("--remote-ip", default="192.168.1.100", help="Host/TFTP IP (goes to the DTS bootargs 'ip=').")

    # Flow.
    flow = parser.add_argument_group("Flow options")
    mode = flow.add_mutually_exclusive_group()
    mode.add_argument("--generate-only", action="store_true",
                      help="Generate sources only (the default; kept for explicitness).")
    mode.add_argument("--build", action="store_true",
                      help="Full flow: compile the BIOS and run Vivado (needs Vivado, a RISC-V GCC and the VexRiscv-SMP netlists).")
    flow.add_argument("--load", action="store_true", help="After --build, load the bitstream over JTAG (SRAM).")
    flow.add_argument("--cpu-sources", default="auto", choices=["auto", "required", "absent"],
                      help="auto: real flow if the VexRiscv-SMP netlist package is installed, else 'CPU sources absent' mode; "
                           "required: fail if it is missing; absent: always skip the CPU netlist (black box).")
    flow.add_argument("--output-dir", default=None, help="Output directory (default: soc/build/<name>/).")
    flow.add_argument("--name", default=None, help="Override the variant name (default derived from the options).")
    flow.add_argument("--skip-dtb", action="store_true", help="Do not compile the DTS with dtc.")
    return parser

# Helpers ------------------------------------------------------------------------------------------

def resolve_eth_slots(args):
    preset = "improved" if args.improved else "default"
    rx, tx = ETH_SLOT_PRESETS[preset][args.board]
    custom = False
    if args.eth_rx_slots is not None and args.eth_rx_slots != rx:
        rx, custom = args.eth_rx_slots, True
    if args.eth_tx_slots is not None and args.eth_tx_slots != tx:
        tx, custom = args.eth_tx_slots, True
    return preset, rx, tx, custom

def variant_name(args, preset, rx, tx, custom):
    board = args.board if args.board != "arty" or args.variant == "a7-35" else "arty100"
    name  = f"{board}-{args.cpu_count}c-{preset}"
    if custom:
        name += f"-rx{rx}-tx{tx}"
    if not args.with_rvc:
        name += "-norvc"
    if not args.aes_instruction:
        name += "-noaes"
    if args.sys_clk_freq != 100e6:
        name += f"-{args.sys_clk_freq/1e6:g}mhz"
    return name

def have_cpu_sources():
    return importlib.util.find_spec(VEXRISCV_SMP_DATA_PKG) is not None

# VexRiscv-SMP configuration -----------------------------------------------------------------------

def configure_vexriscv_smp(args):
    """Feed LiteX's own VexRiscvSMP.args_read() so we get exactly LiteX's behaviour (notably: any
    cpu_count != 1 forces 64-bit I/D buses, 8 KiB 2-way caches and coherent DMA).

    VexRiscvSMP keeps its configuration in *class attributes*: it is process-global, which is why
    each SoC must be generated in its own process (this script generates exactly one)."""
    from litex.soc.cores.cpu.vexriscv_smp import VexRiscvSMP
    defaults = argparse.ArgumentParser(add_help=False)
    VexRiscvSMP.args_fill(defaults)
    ns = defaults.parse_args([])
    ns.cpu_count            = args.cpu_count
    ns.with_rvc             = args.with_rvc
    ns.aes_instruction      = True if args.aes_instruction else None
    ns.with_wishbone_memory = (args.l2_size != 0)
    VexRiscvSMP.args_read(ns)
    return VexRiscvSMP

def install_blackbox_cpu(VexRiscvSMP):
    """'CPU sources absent' mode: register a VexRiscvSMP subclass whose add_sources() adds nothing.
    The cluster stays a black-box Verilog instance in the top level; everything else (CSR map,
    headers, top-level Verilog, constraints, DTS) is generated exactly as in the real flow."""
    from litex.soc.cores import cpu as litex_cpu

    class VexRiscvSMPBlackBox(VexRiscvSMP):
        skipped_sources = []

        def add_sources(self, platform):
            VexRiscvSMPBlackBox.skipped_sources.append(VexRiscvSMP.cluster_name)
            info(f"CPU sources absent: NOT adding {VexRiscvSMP.cluster_name}.v (black-box instance).")

    litex_cpu.CPUS["vexriscv_smp"] = VexRiscvSMPBlackBox
    return VexRiscvSMPBlackBox

class MissingClusterNetlist(Exception):
    pass

def install_checked_cpu(VexRiscvSMP):
    """Real mode: before LiteX adds the cluster Verilog, check that it exists in the package or can
    be generated (LiteX falls back to running SpinalHDL through 'sbt', which needs a JDK, sbt and
    network access). Fail with a clear message instead of a raw CalledProcessError."""
    from litex import get_data_mod
    from litex.soc.cores import cpu as litex_cpu

    class VexRiscvSMPChecked(VexRiscvSMP):
        def add_sources(self, platform):
            vdir    = get_data_mod("cpu", "vexriscv_smp").data_location
            netlist = os.path.join(vdir, VexRiscvSMP.cluster_name + ".v")
            if not os.path.exists(netlist):
                if shutil.which("sbt") is None:
                    raise MissingClusterNetlist(
                        f"{VexRiscvSMP.cluster_name}.v is not in {vdir} and 'sbt' (SpinalHDL) is not "
                        "installed to generate it. Install a JDK + sbt (see soc/README.md 'Real "
                        "bitstream'), or run with --cpu-sources absent to generate without the CPU netlist.")
                info(f"{VexRiscvSMP.cluster_name}.v not pre-generated: LiteX will run sbt/SpinalHDL to make it.")
            VexRiscvSMP.add_sources(self, platform)

    litex_cpu.CPUS["vexriscv_smp"] = VexRiscvSMPChecked
    return VexRiscvSMPChecked

# CRG ----------------------------------------------------------------------------------------------

def make_crg(board, platform, sys_clk_freq):
    from migen import ClockDomain, Signal
    from litex.gen import LiteXModule
    from litex.soc.cores.clock import S7PLL, S7MMCM, S7IDELAYCTRL

    class CRG(LiteXModule):
        def __init__(self):
            self.rst          = Signal()
            self.cd_sys       = ClockDomain()
            self.cd_sys4x     = ClockDomain()
            self.cd_sys4x_dqs = ClockDomain()
            self.cd_idelay    = ClockDomain()

            clk100  = platform.request("clk100")
            rst_n   = platform.request("cpu_reset")
            # Nexys Video: MMCM (Vivado), Arty: PLL, as in the litex-boards targets.
            self.pll = pll = (S7MMCM if board == "nexys_video" else S7PLL)(speedgrade=-1)
            self.comb += pll.reset.eq(~rst_n | self.rst)
            pll.register_clkin(clk100, 100e6)
            pll.create_clkout(self.cd_sys,       sys_clk_freq)
            pll.create_clkout(self.cd_sys4x,     4*sys_clk_freq)
            pll.create_clkout(self.cd_sys4x_dqs, 4*sys_clk_freq, phase=90)
            pll.create_clkout(self.cd_idelay,    200e6)
            if board == "arty":
                # The Arty's MII PHY (TI DP83848) takes its 25 MHz reference clock from the FPGA.
                self.cd_eth = ClockDomain()
                pll.create_clkout(self.cd_eth, 25e6)
                self.comb += platform.request("eth_ref_clk").eq(self.cd_eth.clk)
            platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)
            self.idelayctrl = S7IDELAYCTRL(self.cd_idelay)

    return CRG()

# SoC ----------------------------------------------------------------------------------------------

def make_soc(args, rx_slots, tx_slots):
    from litex.soc.integration.soc_core import SoCCore
    from litedram.phy import s7ddrphy

    sys_clk_freq = int(args.sys_clk_freq)
    if args.board == "arty":
        from litex_boards.platforms import digilent_arty as board_platform
        from litedram.modules import MT41K128M16 as DRAMModule
        from liteeth.phy.mii import LiteEthPHYMII as EthPHY
        platform = board_platform.Platform(variant=args.variant, toolchain="vivado")
        ident    = "aesd LiteX SoC on Arty A7"
    else:
        from litex_boards.platforms import digilent_nexys_video as board_platform
        from litedram.modules import MT41K256M16 as DRAMModule
        from liteeth.phy.s7rgmii import LiteEthPHYRGMII as EthPHY
        platform = board_platform.Platform(toolchain="vivado")
        ident    = "aesd LiteX SoC on Nexys Video"

    class AesdSoC(SoCCore):
        def __init__(self):
            self.crg = make_crg(args.board, platform, sys_clk_freq)
            SoCCore.__init__(self, platform, sys_clk_freq,
                ident                = ident,
                cpu_type             = "vexriscv_smp",
                cpu_variant          = "linux",
                uart_name            = "serial",
                uart_baudrate        = args.uart_baudrate,
                integrated_rom_size  = args.integrated_rom_size,
                integrated_sram_size = args.integrated_sram_size,
            )

            # DDR3 (Arty A7: 256 MiB MT41K128M16, Nexys Video: 512 MiB MT41K256M16).
            self.ddrphy = s7ddrphy.A7DDRPHY(platform.request("ddram"),
                memtype      = "DDR3",
                nphases      = 4,
                sys_clk_freq = sys_clk_freq)
            self.add_sdram("sdram",
                phy           = self.ddrphy,
                module        = DRAMModule(sys_clk_freq, "1:4"),
                l2_cache_size = args.l2_size,
            )

            # Ethernet (Arty: 10/100 MII, Nexys Video: 10/100/1000 RGMII).
            self.ethphy = EthPHY(
                clock_pads = platform.request("eth_clocks"),
                pads       = platform.request("eth"))
            self.add_ethernet(phy=self.ethphy,
                nrxslots  = rx_slots,
                ntxslots  = tx_slots,
                local_ip  = args.eth_ip,
                remote_ip = args.remote_ip)

            # Constants so the software (and our tests) can tell which aesd variant this is.
            self.add_constant("AESD_ETH_RX_SLOTS", rx_slots)
            self.add_constant("AESD_ETH_TX_SLOTS", tx_slots)

    return AesdSoC()

# DTS / DTB ----------------------------------------------------------------------------------------

# The (empty, boolean) property on each CPU node that tells aesd's `aes-backend = auto` the CPU
# has VexRiscv's AES instruction; aesd still runs a known-answer self-test before it uses it.
AES_DT_PROPERTY = "litex,aes-instruction"

def mark_aes_instruction(dts):
    """Add AES_DT_PROPERTY to every `cpu@N {` node of LiteX's generated DTS."""
    marked, count = re.subn(r"^([ \t]*)((?:\w+:[ \t]*)?cpu@[0-9a-f]+[ \t]*\{[ \t]*\n)",
                            lambda m: f"{m.group(1)}{m.group(2)}{m.group(1)}    {AES_DT_PROPERTY};\n",
                            dts, flags=re.M)
    if count == 0:
        raise RuntimeError("no cpu@N node in the generated DTS to mark with " + AES_DT_PROPERTY)
    return marked

def generate_dts(csr_json, dts_path, aes_instruction):
    from litex.tools.litex_json2dts_linux import generate_dts as litex_generate_dts
    with open(csr_json) as f:
        d = json.load(f)
    dts = litex_generate_dts(d)
    if aes_instruction:
        dts = mark_aes_instruction(dts)
    with open(dts_path, "w") as f:
        f.write(dts)

def compile_dtb(dts_path, dtb_path):
    dtc = shutil.which("dtc")
    if dtc is None:
        return False
    subprocess.run([dtc, "-q", "-I", "dts", "-O", "dtb", "-o", dtb_path, dts_path], check=True)
    return True

# Main ---------------------------------------------------------------------------------------------

def main(argv=None):
    args = build_parser().parse_args(argv)
    t0   = time.monotonic()

    if args.load and not args.build:
        error("--load needs --build (there is no bitstream in generate-only mode).")
        return EXIT_USAGE
    if args.board == "nexys_video" and args.variant != "a7-35":
        warn("--variant only applies to --board arty; ignored.")

    preset, rx, tx, custom = resolve_eth_slots(args)
    if tx > rx:
        # LiteX places the TX window right after the RX window and requires every region to be
        # aligned on its size: origin + rx*2KiB must be a multiple of tx*2KiB -> tx <= rx.
        error(f"--eth-tx-slots ({tx}) must not exceed --eth-rx-slots ({rx}): the TX buffer window "
              "starts right after the RX window and LiteX requires it to be aligned on its size.")
        return EXIT_USAGE
    name       = args.name or variant_name(args, preset, rx, tx, custom)
    output_dir = os.path.abspath(args.output_dir or os.path.join(SCRIPT_DIR, "build", name))

    if not args.with_rvc:
        warn("RVC (compressed instructions) is DISABLED (--no-with-rvc). The aesd riscv32 binaries are "
             "built for rv32imac and CANNOT run on this core (illegal-instruction traps on the first "
             "16-bit opcode). Rebuild the software for rv32ima or keep --with-rvc.")

    # Mode selection.
    cpu_sources_present = have_cpu_sources()
    if args.cpu_sources == "required" and not cpu_sources_present:
        error(f"--cpu-sources=required but the Python package '{VEXRISCV_SMP_DATA_PKG}' is not installed "
              "(it is not on PyPI; see soc/README.md 'Real bitstream').")
        return EXIT_NO_CPU_SOURCE
    real_cpu = cpu_sources_present and args.cpu_sources != "absent"

    # --build prerequisites: checked up front, before spending time on generation.
    if args.build:
        # meson/ninja (BIOS build) may live next to this interpreter (soc/.venv/bin) without the
        # venv being activated.
        os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        vivado = shutil.which("vivado")
        if vivado is None:
            error("--build: Vivado ('vivado') is not in PATH, so the full flow (synthesis, place & route, "
                  "bitstream) cannot run on this machine. Source Vivado's settings64.sh and re-run, or drop "
                  "--build to generate the sources, CSR map, headers and device tree only (see soc/README.md).")
        if not real_cpu:
            error("--build needs the VexRiscv-SMP netlists (package "
                  f"'{VEXRISCV_SMP_DATA_PKG}', not on PyPI; see soc/README.md 'Real bitstream'). "
                  "Without them the CPU is a black box and Vivado cannot synthesize the design.")
        if vivado is None:
            return EXIT_NO_VIVADO
        if not real_cpu:
            return EXIT_NO_CPU_SOURCE

    mode = "real" if real_cpu else "cpu-sources-absent"
    info(f"variant      : {name}")
    info(f"board        : {args.board}{' (' + args.variant + ')' if args.board == 'arty' else ''}, "
         f"sys_clk {args.sys_clk_freq/1e6:g} MHz")
    info(f"cpu          : VexRiscv-SMP x{args.cpu_count}, rvc={'on' if args.with_rvc else 'OFF'}, "
         f"aes={'on' if args.aes_instruction else 'off'}")
    info(f"ethernet     : {rx} RX + {tx} TX slots of 2 KiB (preset '{preset}'{', overridden' if custom else ''})")
    if real_cpu:
        info("MODE         : real (VexRiscv-SMP netlist package found: CPU Verilog is part of the design)")
    else:
        why = "forced by --cpu-sources=absent" if args.cpu_sources == "absent" else \
              f"package '{VEXRISCV_SMP_DATA_PKG}' not installed"
        info(f"MODE         : CPU SOURCES ABSENT ({why}): the VexRiscv-SMP cluster is a black-box "
             "instance; CSR map, headers, top-level Verilog and device tree are still generated. "
             "NOT synthesizable as-is.")
    info(f"flow         : {'build (Vivado)' if args.build else 'generate only (no synthesis)'}")
    info(f"output dir   : {output_dir}")

    # SoC creation.
    VexRiscvSMP = configure_vexriscv_smp(args)
    if real_cpu:
        install_checked_cpu(VexRiscvSMP)
    else:
        install_blackbox_cpu(VexRiscvSMP)
    soc = make_soc(args, rx, tx)

    # Build / generate.
    from litex.soc.integration.builder import Builder
    os.makedirs(output_dir, exist_ok=True)
    builder = Builder(soc,
        output_dir       = output_dir,
        csr_json         = os.path.join(output_dir, "csr.json"),
        csr_csv          = os.path.join(output_dir, "csr.csv"),
        compile_software = args.build,
        compile_gateware = args.build)
    try:
        builder.build(build_name="aesd_soc", run=args.build)
    except MissingClusterNetlist as e:
        error(str(e))
        return EXIT_NO_CPU_SOURCE

    # Device tree.
    csr_json = os.path.join(output_dir, "csr.json")
    dts_path = os.path.join(output_dir, "aesd_soc.dts")
    dtb_path = os.path.join(output_dir, "aesd_soc.dtb")
    generate_dts(csr_json, dts_path, args.aes_instruction)
    dtb_ok = False
    if os.path.exists(dtb_path):
        os.remove(dtb_path)  # never leave a DTB from an earlier run next to a new DTS
    if not args.skip_dtb:
        dtb_ok = compile_dtb(dts_path, dtb_path)

    # Manifest (what was generated, and how).
    manifest = {
        "name":              name,
        "mode":              mode,
        "board":             args.board,
        "board_variant":     args.variant if args.board == "arty" else None,
        "device":            soc.platform.device,
        "sys_clk_freq":      int(args.sys_clk_freq),
        "cpu_count":         args.cpu_count,
        "with_rvc":          args.with_rvc,
        "aes_instruction":   args.aes_instruction,
        "cpu_isa":           VexRiscvSMP.get_arch(),
        "cpu_cluster":       VexRiscvSMP.cluster_name,
        "cpu_netlist_added": real_cpu,
        "eth_preset":        preset,
        "eth_rx_slots":      rx,
        "eth_tx_slots":      tx,
        "eth_slot_size":     soc.ethmac.slot_size.constant,
        "flow":              "build" if args.build else "generate-only",
        "bitstream":         None,
        "files": {
            "csr_json":   "csr.json",
            "csr_csv":    "csr.csv",
            "top_verilog": os.path.join("gateware", "aesd_soc.v"),
            "headers":    os.path.join("software", "include", "generated"),
            "dts":        "aesd_soc.dts",
            "dtb":        "aesd_soc.dtb" if dtb_ok else None,
        },
    }
    if args.build:
        manifest["bitstream"] = os.path.relpath(builder.get_bitstream_filename(mode="sram"), output_dir)
    with open(os.path.join(output_dir, "aesd_soc.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")

    info(f"wrote csr.json, csr.csv, gateware/aesd_soc.v, software/include/generated/, aesd_soc.dts"
         f"{', aesd_soc.dtb' if dtb_ok else ''}, aesd_soc.json in {output_dir} "
         f"({time.monotonic() - t0:.1f} s)")
    info(f"DONE in mode: {'real' if real_cpu else 'CPU SOURCES ABSENT (black-box CPU)'}")

    if not args.skip_dtb and not dtb_ok:
        error("'dtc' not found: the DTB was not compiled. Install it (apt-get install device-tree-compiler, "
              "or run soc/setup.sh) or pass --skip-dtb.")
        return EXIT_NO_DTC
    if args.load:
        prog = soc.platform.create_programmer()
        prog.load_bitstream(builder.get_bitstream_filename(mode="sram"))
    return EXIT_OK

if __name__ == "__main__":
    sys.exit(main())
