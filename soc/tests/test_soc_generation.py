"""Generate the aesd SoC variants (1/2/4 cores x default/improved Ethernet buffers) and check the
exported CSR map, headers, top-level Verilog and Linux device tree against the expected values."""

import os
import re
import subprocess
import sys

import pytest

from conftest import MATRIX, SOC_SCRIPT, run_generator, variant_args

MiB = 1024 * 1024
KiB = 1024

SLOT_SIZE = 2048
EXPECTED_SLOTS = {                 # (rx, tx) on the Arty A7
    "default":  (2, 2),            # the study's SoC: 8 KiB of Ethernet buffer in total
    "improved": (8, 8),            # our preset: 32 KiB
}

# Memory map of the Arty A7 SoC (VexRiscv-SMP mem_map + LiteX/LiteEth placement).
ARTY_REGIONS = {
    #  name        origin        size
    "rom":      (0x0000_0000, 0x1_0000),       # BIOS ROM, 64 KiB
    "sram":     (0x1000_0000, 0x1800),         # 6 KiB on-chip SRAM
    "main_ram": (0x4000_0000, 256 * MiB),      # DDR3 MT41K128M16
    "opensbi":  (0x40f0_0000, 0x8_0000),       # reserved for OpenSBI inside main_ram
    "csr":      (0xf000_0000, 0x1_0000),
    "clint":    (0xf001_0000, 0x1_0000),
    "plic":     (0xf0c0_0000, 0x40_0000),
}
ETHMAC_BASE = 0x8000_0000


def isa_extensions(isa):
    """'rv32i2p0_mac' -> {'i', 'm', 'a', 'c'} (single-letter extensions only)."""
    m = re.fullmatch(r"rv(32|64)([a-z])(\d+p\d+)?_?([a-z]*)", isa)
    assert m, f"unexpected ISA string {isa!r}"
    return {m.group(2), *m.group(4)}


def expected_slots(preset):
    return EXPECTED_SLOTS[preset]


@pytest.fixture(params=MATRIX, ids=[f"{n}c-{p}" for n, p in MATRIX])
def variant(request, socs):
    cores, preset = request.param
    gen = socs.get(*variant_args(cores, preset)).check()
    return cores, preset, gen


# Mode / run -----------------------------------------------------------------------------------------

def test_generation_reports_mode(variant):
    cores, preset, gen = variant
    m = gen.manifest
    assert m["name"] == f"arty-{cores}c-{preset}"
    assert m["flow"] == "generate-only"
    # This machine has no pythondata-cpu-vexriscv_smp: the script must say so, loudly.
    if m["mode"] == "cpu-sources-absent":
        assert "MODE         : CPU SOURCES ABSENT" in gen.stdout
        assert "DONE in mode: CPU SOURCES ABSENT" in gen.stdout
        assert m["cpu_netlist_added"] is False
    else:
        assert m["mode"] == "real"
        assert "MODE         : real" in gen.stdout


# csr.json -----------------------------------------------------------------------------------------

def test_csr_json_cpu(variant):
    cores, preset, gen = variant
    c = gen.csr["constants"]
    assert c["config_cpu_count"] == cores
    assert c["config_clock_frequency"] == 100_000_000
    assert c["config_cpu_name"] == "vexriscv"
    assert c["config_cpu_family"] == "riscv"
    assert c["config_cpu_type_vexriscv_smp"] is None      # present (define-only constant)
    assert c["config_cpu_variant_linux"] is None
    assert c["config_cpu_mmu"] == "sv32"
    exts = isa_extensions(c["config_cpu_isa"])
    assert {"i", "m", "a", "c"} <= exts, c["config_cpu_isa"]
    assert "f" not in exts and "d" not in exts


def test_csr_json_caches_follow_litex_smp_rule(variant):
    # LiteX: any cpu_count != 1 -> 64-bit I/D buses, 8 KiB 2-way caches, coherent DMA.
    cores, preset, gen = variant
    c = gen.csr["constants"]
    cluster = gen.manifest["cpu_cluster"]
    assert f"Cc{cores}_" in cluster
    assert cluster.endswith("_Rvc")
    if cores == 1:
        assert (c["config_cpu_dcache_size"], c["config_cpu_dcache_ways"]) == (4096, 1)
        assert (c["config_cpu_icache_size"], c["config_cpu_icache_ways"]) == (4096, 1)
        assert "Iw32" in cluster and "Dw32" in cluster and "_Cdma" not in cluster
    else:
        assert (c["config_cpu_dcache_size"], c["config_cpu_dcache_ways"]) == (8192, 2)
        assert (c["config_cpu_icache_size"], c["config_cpu_icache_ways"]) == (8192, 2)
        assert "Iw64" in cluster and "Dw64" in cluster and "_Cdma" in cluster


def test_csr_json_ethmac(variant):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    c = gen.csr["constants"]
    assert c["ethmac_rx_slots"] == rx
    assert c["ethmac_tx_slots"] == tx
    assert c["ethmac_slot_size"] == SLOT_SIZE
    assert c["aesd_eth_rx_slots"] == rx
    assert c["aesd_eth_tx_slots"] == tx
    assert "ethmac_interrupt" in c
    assert "ethmac" in gen.csr["csr_bases"] and "ethphy" in gen.csr["csr_bases"]
    m = gen.manifest
    assert (m["eth_rx_slots"], m["eth_tx_slots"], m["eth_slot_size"]) == (rx, tx, SLOT_SIZE)


def test_csr_json_memory_map(variant):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    mem = gen.csr["memories"]
    for name, (origin, size) in ARTY_REGIONS.items():
        assert name in mem, f"region {name} missing; have {sorted(mem)}"
        assert (mem[name]["base"], mem[name]["size"]) == (origin, size), \
            f"{name}: got 0x{mem[name]['base']:x}/0x{mem[name]['size']:x}"
    # Ethernet buffer window: RX slots first, TX slots right after them.
    assert (mem["ethmac"]["base"], mem["ethmac"]["size"]) == (ETHMAC_BASE, (rx + tx) * SLOT_SIZE)
    assert (mem["ethmac_rx"]["base"], mem["ethmac_rx"]["size"]) == (ETHMAC_BASE, rx * SLOT_SIZE)
    assert (mem["ethmac_tx"]["base"], mem["ethmac_tx"]["size"]) == (ETHMAC_BASE + rx * SLOT_SIZE, tx * SLOT_SIZE)
    assert mem["ethmac"]["type"].startswith("io")
    assert mem["main_ram"]["type"].startswith("cached")
    assert set(mem) == set(ARTY_REGIONS) | {"ethmac", "ethmac_rx", "ethmac_tx"}


def test_memory_map_has_no_overlaps(variant):
    cores, preset, gen = variant
    mem = gen.csr["memories"]
    # Sub-regions that live inside a parent by design.
    parents = {"ethmac_rx": "ethmac", "ethmac_tx": "ethmac", "opensbi": "main_ram"}
    top = {n: r for n, r in mem.items() if n not in parents}
    spans = sorted((r["base"], r["base"] + r["size"], n) for n, r in top.items())
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        assert e0 <= b1, f"{n0} [0x{b0:x}, 0x{e0:x}) overlaps {n1} [0x{b1:x}, 0x{e1:x})"
    for child, parent in parents.items():
        c, p = mem[child], mem[parent]
        assert p["base"] <= c["base"] and c["base"] + c["size"] <= p["base"] + p["size"], child


def test_csr_csv_matches_json(variant):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    rows = [line.split(",") for line in gen.read("csr.csv").splitlines() if line and not line.startswith("#")]
    consts  = {r[1]: r[2] for r in rows if r[0] == "constant"}
    regions = {r[1]: (int(r[2], 0), int(r[3])) for r in rows if r[0] == "memory_region"}
    assert consts["ethmac_rx_slots"] == str(rx) and consts["ethmac_tx_slots"] == str(tx)
    assert consts["config_cpu_count"] == str(cores)
    assert regions["ethmac"] == (ETHMAC_BASE, (rx + tx) * SLOT_SIZE)
    assert regions["main_ram"] == (0x4000_0000, 256 * MiB)


# Headers / gateware ----------------------------------------------------------------------------------

def test_software_headers(variant):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    soc_h = gen.read("software", "include", "generated", "soc.h")
    mem_h = gen.read("software", "include", "generated", "mem.h")
    csr_h = gen.read("software", "include", "generated", "csr.h")
    assert re.search(rf"#define CONFIG_CPU_COUNT {cores}\b", soc_h)
    assert re.search(rf"#define ETHMAC_RX_SLOTS {rx}\b", soc_h)
    assert re.search(rf"#define ETHMAC_TX_SLOTS {tx}\b", soc_h)
    assert re.search(r"#define ETHMAC_SLOT_SIZE 2048\b", soc_h)
    assert re.search(r"#define CONFIG_CLOCK_FREQUENCY 100000000\b", soc_h)
    assert re.search(r"#define ETHMAC_BASE 0x80000000L?\b", mem_h)
    assert re.search(rf"#define ETHMAC_SIZE 0x{(rx + tx) * SLOT_SIZE:08x}\b", mem_h)
    assert "CSR_ETHMAC_BASE" in csr_h and "CSR_ETHPHY_BASE" in csr_h


def test_top_level_verilog(variant):
    cores, preset, gen = variant
    top = gen.read("gateware", "aesd_soc.v")
    cluster = gen.manifest["cpu_cluster"]
    assert re.search(r"^module aesd_soc\s*\(", top, re.M)
    # The CPU cluster is instantiated by name in the top level (a black box in absent mode).
    assert re.search(rf"^{cluster} {cluster}\s*\(", top, re.M)
    assert not re.search(rf"^module {cluster}\b", top, re.M)
    tcl = gen.read("gateware", "aesd_soc.tcl")
    assert "xc7a35ticsg324-1L" in tcl
    assert "aesd_soc.v" in tcl
    if gen.manifest["mode"] == "cpu-sources-absent":
        assert f"{cluster}.v" not in tcl
    xdc = gen.read("gateware", "aesd_soc.xdc")
    assert "eth_ref_clk" in xdc  # Arty MII PHY reference clock pin


# Device tree ----------------------------------------------------------------------------------------

CPU_NODE = re.compile(r"CPU(\d+): cpu@(\d+) \{(.*?)\n            \};", re.S)


def test_dts_cpu_nodes(variant):
    cores, preset, gen = variant
    nodes = CPU_NODE.findall(gen.dts)
    assert [int(n[0]) for n in nodes] == list(range(cores))
    for idx, reg, body in nodes:
        assert 'device_type = "cpu";' in body
        assert f"reg = <{idx}>;" in body
        assert "clock-frequency = <100000000>;" in body
        assert re.search(r'riscv,isa = "rv32i2p0_mac";', body)
        assert '"c"' in re.search(r"riscv,isa-extensions = ([^;]*);", body).group(1)
        assert 'mmu-type = "riscv,sv32";' in body
        # VexRiscv's AES instruction is on by default; aesd's aes-backend = auto looks for this.
        assert "litex,aes-instruction;" in body
    assert len(re.findall(r'device_type = "cpu";', gen.dts)) == cores
    assert "timebase-frequency = <100000000>;" in gen.dts
    if cores > 1:
        assert len(re.findall(r"cpu = <&CPU\d+>;", gen.dts)) == cores   # cpu-map


def test_dts_mac_node(variant):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    csr = gen.csr
    mac = re.search(r"mac0: mac@([0-9a-f]+) \{(.*?)\};", gen.dts, re.S)
    assert mac, "no LiteEth mac node in the DTS"
    base, body = int(mac.group(1), 16), mac.group(2)
    assert base == csr["csr_bases"]["ethmac"]
    assert 'compatible = "litex,liteeth";' in body
    assert f"litex,rx-slots = <{rx}>;" in body
    assert f"litex,tx-slots = <{tx}>;" in body
    assert f"litex,slot-size = <{SLOT_SIZE}>;" in body
    assert f"<0x{ETHMAC_BASE:x} 0x{(rx + tx) * SLOT_SIZE:x}>" in body
    assert f"interrupts = <{csr['constants']['ethmac_interrupt']}>;" in body


def test_dts_memory_and_bootargs(variant):
    cores, preset, gen = variant
    assert re.search(r"memory@40000000 \{\s*device_type = \"memory\";\s*reg = <0x40000000 0x10000000>;", gen.dts)
    assert "opensbi@40f00000" in gen.dts
    assert "console=liteuart" in gen.dts
    assert "ip=192.168.1.50:192.168.1.100:" in gen.dts


def test_dtb_compiles_and_roundtrips(variant, dtc, tmp_path):
    cores, preset, gen = variant
    rx, tx = expected_slots(preset)
    # The script's own DTB...
    assert gen.manifest["files"]["dtb"] == "aesd_soc.dtb"
    assert os.path.getsize(gen.path("aesd_soc.dtb")) > 1000
    # ...and an independent dtc run on the DTS must succeed too.
    out = tmp_path / "check.dtb"
    subprocess.run([dtc, "-q", "-I", "dts", "-O", "dtb", "-o", str(out), gen.path("aesd_soc.dts")], check=True)
    # Decompile the script's DTB: the content really is in the binary.
    back = subprocess.run([dtc, "-q", "-I", "dtb", "-O", "dts", gen.path("aesd_soc.dtb")],
                          check=True, capture_output=True, text=True).stdout
    assert len(re.findall(r"cpu@\d+ \{", back)) == cores
    assert f"litex,rx-slots = <0x{rx:02x}>;" in back
    assert f"litex,tx-slots = <0x{tx:02x}>;" in back


# Variants beyond the matrix ------------------------------------------------------------------------------

def test_default_and_improved_differ_only_in_ethernet(socs):
    a = socs.get(*variant_args(2, "default")).check().csr
    b = socs.get(*variant_args(2, "improved")).check().csr
    diff = {k for k in set(a["constants"]) | set(b["constants"]) if a["constants"].get(k) != b["constants"].get(k)}
    assert diff == {"ethmac_rx_slots", "ethmac_tx_slots", "aesd_eth_rx_slots", "aesd_eth_tx_slots"}
    mdiff = {k for k in a["memories"] if a["memories"][k] != b["memories"].get(k)}
    assert mdiff == {"ethmac", "ethmac_rx", "ethmac_tx"}
    assert a["csr_bases"] == b["csr_bases"]


def test_without_rvc_warns_and_drops_c(socs):
    gen = socs.get("--cpu-count", "1", "--no-with-rvc").check()
    assert "RVC (compressed instructions) is DISABLED" in gen.stderr
    assert "rv32imac" in gen.stderr and "CANNOT run" in gen.stderr
    c = gen.csr["constants"]
    assert "c" not in isa_extensions(c["config_cpu_isa"])
    assert c["config_cpu_isa"] == "rv32i2p0_ma"
    assert not gen.manifest["cpu_cluster"].endswith("_Rvc")
    assert gen.manifest["name"] == "arty-1c-default-norvc"
    assert '"c"' not in re.search(r"riscv,isa-extensions = ([^;]*);", gen.dts).group(1)


def test_rvc_on_prints_no_warning(socs):
    gen = socs.get(*variant_args(1, "default")).check()
    assert "RVC" not in gen.stderr


def test_aes_instruction_is_on_by_default(socs):
    gen = socs.get(*variant_args(2, "default")).check()
    assert "_Aes" in gen.manifest["cpu_cluster"]
    assert gen.manifest["aes_instruction"] is True
    assert gen.manifest["name"] == "arty-2c-default"
    plain = socs.get(*variant_args(2, "default", "--no-aes-instruction")).check()
    assert "_Aes" not in plain.manifest["cpu_cluster"]
    assert plain.manifest["aes_instruction"] is False


def test_custom_slots_override_preset(socs):
    gen = socs.get("--cpu-count", "1", "--improved", "--eth-rx-slots", "16", "--eth-tx-slots", "4").check()
    c, mem = gen.csr["constants"], gen.csr["memories"]
    assert (c["ethmac_rx_slots"], c["ethmac_tx_slots"]) == (16, 4)
    assert mem["ethmac_tx"]["base"] == ETHMAC_BASE + 16 * SLOT_SIZE
    assert gen.manifest["name"] == "arty-1c-improved-rx16-tx4"


def test_non_power_of_two_slots_rejected(tmp_path):
    gen = run_generator(["--eth-rx-slots", "3"], str(tmp_path / "bad"))
    assert gen.returncode == 2
    assert "not a power of two" in gen.stderr


def test_nexys_video_improved(socs):
    gen = socs.get("--board", "nexys_video", "--cpu-count", "4", "--improved").check()
    c, mem = gen.csr["constants"], gen.csr["memories"]
    assert gen.manifest["device"].startswith("xc7a200t")
    assert c["config_cpu_count"] == 4
    assert (c["ethmac_rx_slots"], c["ethmac_tx_slots"]) == (32, 32)
    assert (mem["ethmac"]["base"], mem["ethmac"]["size"]) == (ETHMAC_BASE, 64 * SLOT_SIZE)
    assert mem["main_ram"]["size"] == 512 * MiB                      # MT41K256M16
    assert len(CPU_NODE.findall(gen.dts)) == 4
    assert "litex,rx-slots = <32>;" in gen.dts
    assert "rgmii" in gen.read("gateware", "aesd_soc.v").lower()


def test_sys_clk_freq_option(socs):
    gen = socs.get("--cpu-count", "1", "--sys-clk-freq", "75e6").check()
    assert gen.csr["constants"]["config_clock_frequency"] == 75_000_000
    assert "clock-frequency = <75000000>;" in gen.dts
    assert gen.manifest["name"] == "arty-1c-default-75mhz"


# Modes / flow errors -----------------------------------------------------------------------------

def _env_without(tool):
    """PATH with every directory that holds `tool` removed."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, tool))]
    return {**os.environ, "PATH": os.pathsep.join(dirs)}


def test_build_without_vivado_is_a_clear_error(tmp_path):
    env = _env_without("vivado")
    proc = subprocess.run([sys.executable, SOC_SCRIPT, "--build", "--output-dir", str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "Vivado ('vivado') is not in PATH" in proc.stderr
    assert not (tmp_path / "b" / "csr.json").exists()


def test_cpu_sources_required_without_package(tmp_path):
    import importlib.util
    if importlib.util.find_spec("pythondata_cpu_vexriscv_smp") is not None:
        pytest.skip("pythondata-cpu-vexriscv_smp is installed here")
    gen = run_generator(["--cpu-sources", "required"], str(tmp_path / "r"))
    assert gen.returncode == 5
    assert "pythondata_cpu_vexriscv_smp" in gen.stderr


def test_cpu_sources_absent_forced(socs):
    gen = socs.get("--cpu-count", "1", "--cpu-sources", "absent").check()
    assert gen.manifest["mode"] == "cpu-sources-absent"
    assert "forced by --cpu-sources=absent" in gen.stdout


def test_real_mode_adds_cpu_netlist(socs, tmp_path):
    """Exercise the 'real' code path with a stand-in pythondata_cpu_vexriscv_smp package that
    holds a stub netlist under the expected cluster name: LiteX must pick it up and add it
    (plus the RAM model) to the Vivado project. (The real package is not on PyPI.)"""
    ref = socs.get(*variant_args(2, "default")).check()
    cluster = ref.manifest["cpu_cluster"]

    pkg = tmp_path / "site" / "pythondata_cpu_vexriscv_smp"
    vdir = pkg / "verilog"
    vdir.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os\ndata_location = os.path.join(os.path.dirname(__file__), 'verilog')\n")
    (vdir / f"{cluster}.v").write_text(f"module {cluster}(); endmodule\n")
    (vdir / "Ram_1w_1rs_Generic.v").write_text("module Ram_1w_1rs_Generic(); endmodule\n")

    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    gen = run_generator([*variant_args(2, "default"), "--cpu-sources", "required"],
                        str(tmp_path / "real"), env=env).check()
    assert gen.manifest["mode"] == "real"
    assert gen.manifest["cpu_netlist_added"] is True
    assert "MODE         : real" in gen.stdout
    tcl = gen.read("gateware", "aesd_soc.tcl")
    assert f"{cluster}.v" in tcl
    assert "Ram_1w_1rs_Generic.v" in tcl
    # Same SoC otherwise: identical CSR map.
    assert gen.csr == ref.csr


def test_more_tx_than_rx_slots_rejected(tmp_path):
    # The TX window starts right after the RX window and must be aligned on its own size.
    gen = run_generator(["--eth-rx-slots", "4", "--eth-tx-slots", "8"], str(tmp_path / "bad"))
    assert gen.returncode == 2
    assert "must not exceed --eth-rx-slots" in gen.stderr
    assert not os.path.exists(gen.path("csr.json"))


def test_real_mode_missing_netlist_without_sbt_is_a_clear_error(tmp_path):
    """Real mode, but the package lacks this cluster and sbt is not installed: clear error, exit 5."""
    pkg = tmp_path / "site" / "pythondata_cpu_vexriscv_smp"
    (pkg / "verilog").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os\ndata_location = os.path.join(os.path.dirname(__file__), 'verilog')\n")
    env = {**_env_without("sbt"), "PYTHONPATH": str(tmp_path / "site")}
    gen = run_generator(["--cpu-sources", "required"], str(tmp_path / "out"), env=env)
    assert gen.returncode == 5, gen.stderr[-2000:]
    assert "is not in" in gen.stderr and "'sbt'" in gen.stderr
    assert "MODE         : real" in gen.stdout


def test_no_aes_instruction_leaves_the_cpus_unmarked(socs):
    gen = socs.get(*variant_args(2, "default", "--no-aes-instruction")).check()
    assert gen.manifest["name"] == "arty-2c-default-noaes"
    nodes = CPU_NODE.findall(gen.dts)
    assert len(nodes) == 2
    assert "litex,aes-instruction" not in gen.dts
