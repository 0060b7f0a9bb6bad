"""Optional: boot a single-core VexRiscv (variant 'imac' = rv32imac, like our binaries) LiteX SoC
under Verilator to the BIOS 'litex>' prompt.

Needs `bash soc/setup.sh --with-sim` (Verilator, RISC-V GCC, libevent/json-c, meson/ninja and the
pythondata-cpu-vexriscv / litescope / tapcfg packages); skipped with a message otherwise.
Marked `slow` (several minutes on 2 cores): deselect with  -m "not slow".

Note: this is LiteX's generic simulation SoC with the single-core `vexriscv` CPU, not the
VexRiscv-SMP cluster of aesd_soc.py (whose netlist package is not available here)."""

import importlib.util
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time

import pytest

SIM_TIMEOUT = int(os.environ.get("AESD_SOC_SIM_TIMEOUT", "1200"))
PROMPT      = b"litex\x1b[0m>"       # The BIOS prints the prompt in bold green: "\e[92;1mlitex\e[0m>".
PROMPT_RAW  = b"litex>"


def _missing_sim_prereqs(env_path):
    missing = []
    for tool in ("verilator", "make", "g++"):
        if shutil.which(tool, path=env_path) is None:
            missing.append(tool)
    if not any(shutil.which(f"{t}-gcc", path=env_path) for t in
               ("riscv64-unknown-elf", "riscv64-linux-gnu", "riscv64-elf", "riscv-none-elf",
                "riscv32-unknown-elf", "riscv64-none-elf", "riscv-none-embed")):
        missing.append("RISC-V GCC (gcc-riscv64-unknown-elf)")
    for tool in ("meson", "ninja"):
        if shutil.which(tool, path=env_path) is None:
            missing.append(tool)
    for mod in ("pythondata_cpu_vexriscv", "pythondata_misc_tapcfg", "litescope"):
        if importlib.util.find_spec(mod) is None:
            missing.append(mod)
    have_libs = shutil.which("pkg-config") is not None and subprocess.run(
        ["pkg-config", "--exists", "libevent", "json-c", "zlib"], capture_output=True).returncode == 0
    if not have_libs:
        missing.append("libevent-dev/libjson-c-dev/zlib1g-dev (checked with pkg-config)")
    return missing


@pytest.mark.slow
def test_vexriscv_sim_boots_to_bios_prompt(tmp_path):
    # meson/ninja live in the venv's bin/ when installed by setup.sh.
    env_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    missing = _missing_sim_prereqs(env_path)
    if missing:
        pytest.skip("Verilator simulation prerequisites missing: " + ", ".join(missing) +
                    " -- run 'bash soc/setup.sh --with-sim' to enable this test")

    env = {**os.environ, "PATH": env_path}
    cmd = [sys.executable, "-m", "litex.tools.litex_sim",
           "--cpu-type", "vexriscv", "--cpu-variant", "imac",
           "--non-interactive", "--output-dir", str(tmp_path / "sim")]
    log = tmp_path / "sim.log"
    t0  = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=str(tmp_path), start_new_session=True)
    out = b""
    booted = False
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() - t0 < SIM_TIMEOUT:
            if not sel.select(timeout=5):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
            if PROMPT in out or PROMPT_RAW in out:
                booted = True
                break
    finally:
        # Stop the simulator (and the Verilator binary it spawned): our own process group.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.write_bytes(out)

    elapsed = time.monotonic() - t0
    text = out.decode(errors="replace")
    assert booted, (f"no 'litex>' prompt after {elapsed:.0f} s (exit {proc.returncode}); "
                    f"log {log}; tail:\n{text[-3000:]}")
    assert "BIOS CRC passed" in text
    assert "VexRiscv_IMAC" in text
    print(f"\nVerilator sim reached the litex> prompt in {elapsed:.0f} s")
