/* Control for scripts/cross/check-riscv32-static-nofpu.sh --control: a
 * static rv32imac program (its ELF attributes claim no FPU) that holds one
 * floating-point instruction, fadd.s, written as raw bits so the assembler
 * accepts it. The check must reject it: by its disassembly, and by the
 * SIGILL when it runs on a CPU without an FPU. */
int main(void) {
    __asm__ volatile(".insn r 0x53, 0, 0, f0, f0, f0");
    return 0;
}
