"""The non-simulating part of the board's simulation (soc/sim/): the device-tree fix-up that
lets upstream OpenSBI and Linux boot on the SoC. The simulation itself is a benchmark
(scripts/bench/board-rtl.sh), not a test: it takes minutes of wall time per boot.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import SOC_DIR, variant_args

sys.path.insert(0, os.path.join(SOC_DIR, "sim"))
import dts_fixup  # noqa: E402

SEED = "00112233445566778899aabbccddeeff"


@pytest.fixture(scope="module")
def two_core(socs):
    """The 2-core study SoC's DTS (litex_json2dts_linux's) and csr.json."""
    gen = socs.get(*variant_args(2, "default")).check()
    return gen.dts, gen.csr


def test_fixup_adds_a_clint_for_every_hart(two_core):
    dts, csr = two_core
    assert "riscv,clint0" not in dts, "json2dts now writes a CLINT itself: the fix-up may go"
    fixed = dts_fixup.fix_dts(dts, csr, 100_000_000)
    node = re.search(r"clint@([0-9a-f]+) \{(.*?)\};", fixed, re.S)
    assert node, fixed
    assert int(node.group(1), 16) == dts_fixup.clint_base(csr) == 0xF001_0000
    assert "interrupts-extended = <&L0 3 &L0 7 &L1 3 &L1 7>;" in node.group(2)
    # Before the PLIC, inside the same bus node.
    assert fixed.index("clint@") < fixed.index("intc0: interrupt-controller@")


def test_fixup_sets_timebase_bootargs_and_seed(two_core, dtc, tmp_path):
    dts, csr = two_core
    fixed = dts_fixup.fix_dts(dts, csr, 100_000_000, "console=liteuart rdinit=/init", SEED)
    assert re.findall(r"timebase-frequency = <(\d+)>;", fixed) == ["100000000"]
    assert 'bootargs = "console=liteuart rdinit=/init";' in fixed
    assert "rng-seed = [00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff];" in fixed
    # The result is a valid device tree.
    path = tmp_path / "board.dts"
    path.write_text(fixed)
    proc = subprocess.run([dtc, "-I", "dts", "-O", "dtb", "-o", str(tmp_path / "board.dtb"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_fixup_marks_the_cpus_for_the_aes_instruction_once(two_core):
    dts, csr = two_core
    plain = dts.replace(f"{dts_fixup.AES_DT_PROPERTY};", "")
    assert plain.count(dts_fixup.AES_DT_PROPERTY) == 0
    assert dts_fixup.fix_dts(plain, csr, 100_000_000).count(dts_fixup.AES_DT_PROPERTY) == 0
    marked = dts_fixup.fix_dts(plain, csr, 100_000_000, aes_instruction=True)
    assert marked.count(dts_fixup.AES_DT_PROPERTY) == 2
    # aesd_soc.py's DTS is marked already: not twice.
    assert dts_fixup.fix_dts(dts, csr, 100_000_000, aes_instruction=True).count(dts_fixup.AES_DT_PROPERTY) == 2


def test_fixup_keeps_an_existing_clint(two_core):
    dts, csr = two_core
    once = dts_fixup.fix_dts(dts, csr, 100_000_000)
    twice = dts_fixup.fix_dts(once, csr, 100_000_000)
    assert twice.count("riscv,clint0") == 1


@pytest.mark.parametrize("change, message", [
    (lambda d: re.sub(r"timebase-frequency[^;]*;", "", d), "one timebase-frequency"),
    (lambda d: re.sub(r"intc0: interrupt-controller@", "intc0: plic@", d), "no PLIC node"),
])
def test_fixup_refuses_an_unexpected_dts(two_core, change, message):
    dts, csr = two_core
    with pytest.raises(dts_fixup.FixupError, match=message):
        dts_fixup.fix_dts(change(dts), csr, 100_000_000)


@pytest.mark.parametrize("seed", ["00", "xyz" * 16, SEED + "0"])
def test_fixup_refuses_a_bad_seed(two_core, seed):
    dts, csr = two_core
    with pytest.raises(dts_fixup.FixupError, match="rng-seed"):
        dts_fixup.fix_dts(dts, csr, 100_000_000, None, seed)


def test_fixup_command_line_reports_errors(tmp_path):
    bad = tmp_path / "bad.dts"
    bad.write_text("/dts-v1/;\n/ { };\n")
    csr = tmp_path / "csr.json"
    csr.write_text(json.dumps({"memories": {}}))
    proc = subprocess.run([sys.executable, os.path.join(SOC_DIR, "sim", "dts_fixup.py"), str(bad), str(csr),
                           "-o", str(tmp_path / "out.dts")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "timebase-frequency" in proc.stderr
    assert not (tmp_path / "out.dts").exists()
