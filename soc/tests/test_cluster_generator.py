"""The sbt stand-in (soc/vexriscv/sbt) that LiteX 2024.12 calls for a VexRiscv-SMP cluster
netlist: it runs our generator for exactly LiteX's call and refuses anything else. (The
generator itself needs the compiled Scala cache: soc/vexriscv/smp-cluster.sh; it is exercised
by soc/sim/build-board.sh and scripts/bench/soc-resources.sh.)
"""

import os
import subprocess

import pytest

from conftest import SOC_DIR

SBT = os.path.join(SOC_DIR, "vexriscv", "sbt")
MAIN = "vexriscv.demo.smp.VexRiscvLitexSmpClusterCmdGen"


def run_sbt(tmp_path, *args):
    """The sbt stand-in, linked into an empty cache's bin/ (as smp-cluster.sh does)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    link = tmp_path / "bin" / "sbt"
    if not link.exists():
        link.symlink_to(SBT)
    return subprocess.run([str(link), *args], capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    (),
    ("compile",),
    (f"run {MAIN}",),
    (f"runMain {MAIN}", "--cpu-count=1"),
])
def test_sbt_stand_in_refuses_anything_but_litex_call(tmp_path, args):
    proc = run_sbt(tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert "aesd stand-in" in proc.stderr


def test_sbt_stand_in_needs_the_compiled_generator(tmp_path):
    proc = run_sbt(tmp_path, f"runMain {MAIN} --cpu-count=1")
    assert proc.returncode == 1
    assert "smp-cluster.sh" in proc.stderr
    assert str(tmp_path / "classpath") in proc.stderr
