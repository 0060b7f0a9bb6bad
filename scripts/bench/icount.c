/*
 * icount: a QEMU TCG plugin that counts the guest instructions a program
 * executes, for scripts/bench/icount.sh (guest instructions per byte of
 * aesd's cipher on the boards' targets, see docs/performance.md).
 *
 * Build (icount.sh does it, into a cache outside the repository):
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -o libicount.so icount.c
 * Use:
 *   qemu-riscv32 -plugin /path/libicount.so,out=FILE[,hot=N][,profile=PFILE][,threads=1][,skip=LO-HI...] PROGRAM ARGS...
 * At exit the plugin writes to FILE (stderr without out=):
 *   line 1: the number of guest instructions executed;
 *   line 2, with hot=N: the hot code footprint, the bytes of guest code in
 *           blocks that ran at least N times (overlapping blocks counted
 *           once): what a core's instruction cache must hold for the hot
 *           loops not to miss.
 * With profile=PFILE it also writes, for every block that ran, a line
 * "START INSNS RUNS" (START in hexadecimal) to PFILE: where the
 * instructions went (scripts/bench/icount-profile.py sums them per symbol).
 * The runs are counted without atomics: close, not exact, for a
 * multi-threaded guest.
 *
 * How it counts: when QEMU translates a block of guest code (a TB), the
 * plugin attaches an inline "add the block's instruction count to a 64-bit
 * counter" operation to it, which runs every time the block starts (with
 * hot=N, a second one adds 1 to that block's own counter). No callback per
 * block or per instruction, so the guest runs at nearly the speed of plain
 * TCG. The additions are not atomic: counts are exact for a single-threaded
 * guest only (the `cost` workloads are). With threads=1 every block start
 * calls a function that adds atomically instead: slower, but exact for a
 * multi-threaded guest (the whole aesd process, scripts/bench/aesd-icount.sh).
 * skip=LO-HI (hexadecimal guest addresses, repeatable) leaves out the blocks
 * that start in [LO, HI): the SIGILL handler that emulates an instruction the
 * CPU under test has (scripts/bench/vexriscv-icount.sh), so that instruction
 * counts as one, as on the real core; keep=LO-HI counts only blocks that
 * start in [LO, HI) (the program's .text: not qemu's signal-return page).
 * A block left part-way (a fault in
 * its middle) would be counted whole; normal execution leaves blocks only at
 * their end (branches, system calls).
 *
 * Plugin ABI: the declarations below are written for this file from the
 * documented plugin API of QEMU 7.2 (include/qemu/qemu-plugin.h, API version
 * 1; QEMU 7.2 accepts versions 0..1). Only what this plugin uses is declared:
 * pointers to opaque QEMU types, the 64-bit plugin id, and the inline
 * operation "add u64" (the first, value 0, of enum qemu_plugin_op). No QEMU
 * header is needed to build it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ICOUNT_EXPORT __attribute__((visibility("default")))

/* --- the QEMU 7.2 plugin API (version 1), the parts used here ----------- */
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;   /* opaque: a translation block being translated */
struct qemu_plugin_insn; /* opaque: one of its instructions */
struct qemu_info_t;      /* opaque here: not read */
enum icount_plugin_op { ICOUNT_INLINE_ADD_U64 = 0 };

typedef void (*icount_tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*icount_udata_cb)(qemu_plugin_id_t id, void *userdata);
typedef void (*icount_vcpu_udata_cb)(unsigned int vcpu_index, void *userdata);
enum icount_cb_flags { ICOUNT_CB_NO_REGS = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, icount_tb_trans_cb cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
                                              enum icount_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, icount_vcpu_udata_cb cb,
                                          enum icount_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, icount_udata_cb cb,
                                    void *userdata);
/* ------------------------------------------------------------------------ */

ICOUNT_EXPORT int qemu_plugin_version = 1;

static uint64_t executed;
static const char *out_path;
static uint64_t hot_threshold; /* 0: no footprint */
static int threaded;            /* threads=1: atomic additions */
#define MAX_SKIPS 8
static uint64_t skip_lo[MAX_SKIPS], skip_hi[MAX_SKIPS];
static int n_skips;

static uint64_t keep_lo, keep_hi = UINT64_MAX; /* keep=LO-HI: count only there */
static const char *profile_path; /* profile=PFILE: per-block counts */

static int skipped(uint64_t vaddr)
{
    if (vaddr < keep_lo || vaddr >= keep_hi) {
        return 1;
    }
    for (int i = 0; i < n_skips; i++) {
        if (vaddr >= skip_lo[i] && vaddr < skip_hi[i]) {
            return 1;
        }
    }
    return 0;
}

static void add_block_atomically(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    __atomic_fetch_add(&executed, (uint64_t)(uintptr_t)userdata, __ATOMIC_RELAXED);
}

/* One translated block's code range and how often it started. Blocks are
 * allocated one by one and never moved: translated code holds a pointer to
 * `runs`. A block translated again at the same address gets a new record;
 * the footprint merges overlapping ranges, so that does not matter. */
struct block {
    uint64_t start;
    uint64_t end;
    uint64_t insns;
    uint64_t runs;
};
static struct block **blocks;
static size_t n_blocks;
static size_t cap_blocks;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (skipped(qemu_plugin_tb_vaddr(tb))) {
        return;
    }
    if (threaded) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, add_block_atomically, ICOUNT_CB_NO_REGS,
                                             (void *)(uintptr_t)n);
    } else {
        qemu_plugin_register_vcpu_tb_exec_inline(tb, ICOUNT_INLINE_ADD_U64, &executed,
                                                 (uint64_t)n);
    }
    if ((hot_threshold == 0 && profile_path == NULL) || n == 0) {
        return;
    }
    if (n_blocks == cap_blocks) {
        size_t cap = cap_blocks ? 2 * cap_blocks : 4096;
        struct block **grown = realloc(blocks, cap * sizeof *grown);
        if (grown == NULL) {
            return;
        }
        blocks = grown;
        cap_blocks = cap;
    }
    struct block *b = calloc(1, sizeof *b);
    if (b == NULL) {
        return;
    }
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
    b->start = qemu_plugin_tb_vaddr(tb);
    b->end = qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last);
    b->insns = n;
    blocks[n_blocks++] = b;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, ICOUNT_INLINE_ADD_U64, &b->runs, 1);
}

static int by_start(const void *a, const void *b)
{
    const struct block *x = *(struct block *const *)a;
    const struct block *y = *(struct block *const *)b;
    return (x->start > y->start) - (x->start < y->start);
}

/* Bytes covered by the union of the ranges of the blocks that ran at least
 * hot_threshold times. */
static uint64_t hot_bytes(void)
{
    size_t n_hot = 0;
    for (size_t i = 0; i < n_blocks; i++) {
        if (blocks[i]->runs >= hot_threshold) {
            blocks[n_hot++] = blocks[i];
        }
    }
    qsort(blocks, n_hot, sizeof *blocks, by_start);
    uint64_t total = 0, start = 0, end = 0;
    for (size_t i = 0; i < n_hot; i++) {
        if (i == 0 || blocks[i]->start > end) {
            total += end - start;
            start = blocks[i]->start;
            end = blocks[i]->end;
        } else if (blocks[i]->end > end) {
            end = blocks[i]->end;
        }
    }
    return total + (end - start);
}

/* profile=PFILE: "START INSNS RUNS" for every block that ran. */
static void write_profile(void)
{
    FILE *profile = fopen(profile_path, "w");
    if (profile == NULL) {
        fprintf(stderr, "icount: cannot write %s\n", profile_path);
        return;
    }
    for (size_t i = 0; i < n_blocks; i++) {
        if (blocks[i]->runs > 0) {
            fprintf(profile, "%llx %llu %llu\n", (unsigned long long)blocks[i]->start,
                    (unsigned long long)blocks[i]->insns, (unsigned long long)blocks[i]->runs);
        }
    }
    fclose(profile);
}

static void write_counts(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    FILE *out = stderr;
    if (out_path != NULL) {
        out = fopen(out_path, "w");
        if (out == NULL) {
            fprintf(stderr, "icount: cannot write %s\n", out_path);
            return;
        }
    }
    fprintf(out, "%llu\n", (unsigned long long)executed);
    if (profile_path != NULL) {
        /* Before hot_bytes(), which reorders the records. */
        write_profile();
    }
    if (hot_threshold > 0) {
        fprintf(out, "%llu\n", (unsigned long long)hot_bytes());
    }
    if (out != stderr) {
        fclose(out);
    }
}

ICOUNT_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
                                      int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            out_path = argv[i] + 4;
        } else if (strncmp(argv[i], "profile=", 8) == 0) {
            profile_path = argv[i] + 8;
        } else if (strncmp(argv[i], "hot=", 4) == 0) {
            char *end = NULL;
            hot_threshold = strtoull(argv[i] + 4, &end, 10);
            if (end == argv[i] + 4 || *end != '\0') {
                fprintf(stderr, "icount: hot= takes a number, not %s\n", argv[i] + 4);
                return 1;
            }
        } else if (strcmp(argv[i], "threads=1") == 0) {
            threaded = 1;
        } else if (strncmp(argv[i], "keep=", 5) == 0) {
            char *end = NULL;
            keep_lo = strtoull(argv[i] + 5, &end, 16);
            if (end == NULL || *end != '-') {
                fprintf(stderr, "icount: keep= takes LO-HI in hexadecimal, not %s\n", argv[i] + 5);
                return 1;
            }
            keep_hi = strtoull(end + 1, &end, 16);
        } else if (strncmp(argv[i], "skip=", 5) == 0 && n_skips < MAX_SKIPS) {
            char *end = NULL;
            skip_lo[n_skips] = strtoull(argv[i] + 5, &end, 16);
            if (end == NULL || *end != '-') {
                fprintf(stderr, "icount: skip= takes LO-HI in hexadecimal, not %s\n", argv[i] + 5);
                return 1;
            }
            skip_hi[n_skips] = strtoull(end + 1, &end, 16);
            n_skips++;
        } else {
            fprintf(stderr, "icount: unknown argument %s (out=FILE, hot=N, profile=PFILE, threads=1, skip=LO-HI, keep=LO-HI)\n",
                    argv[i]);
            return 1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
