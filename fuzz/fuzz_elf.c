/*
 * fuzz_elf.c — the fuzzer's bytes as damage done to object files, for ragjit's own linker
 * (src/codegen/llvm/elfload.c).
 *
 * The linker reads object files from the persistent cache, which checks an entry's key and
 * checksum first; still, it must never read outside an object, write outside its mapping or
 * crash, whatever an object says: it links it or refuses it with a reason. Random bytes would
 * rarely get past the ELF header, so the harness starts from real objects, compiled by LLVM at
 * start-up exactly as ragjit compiles kernels (small code model, position-independent), from
 * IR with what kernels use: constants in read-only pools of several alignments (scalars and a
 * 64-byte vector), calls to routines outside the object, two functions, each in an object of
 * its own, the second calling the first. The input is then a list of edits, four bytes each:
 *
 *   byte 0       which object: the first, the second, or both linked together (bits 0-1);
 *                whether the resolver knows the routines outside (bit 2); which allocation
 *                fails, if any (the byte after it, when bit 3 is set)
 *   then, per 4 bytes: a 16-bit offset (modulo the object's size), an operation (set, xor,
 *                add to the byte; write a 32-bit little-endian value; truncate the object
 *                there) and a value.
 *
 * A linked program is freed unrun (a damaged instruction is still an instruction). The tracker
 * must find nothing allocated afterwards; a failed allocation must give RJ_ERR_NOMEM, and a
 * refusal must leave a reason and the addresses NULL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../src/codegen/llvm/llvm_backend.h"
#include "../tests/objcode.h"

static const char ir_a[] =
    "define float @f_a(float %x) nounwind {\n"
    "  %a = fmul float %x, 3.250000e+00\n"
    "  %c = call float @f_ext(float %a)\n"
    "  %d = fadd float %c, 1.500000e+00\n"
    "  ret float %d\n"
    "}\n"
    "declare float @f_ext(float)\n";

static const char ir_b[] =
    "define void @f_b(ptr %p) nounwind {\n"
    "  %v = load <16 x float>, ptr %p, align 4\n"
    "  %w = fmul <16 x float> %v, <float 1.0, float 2.0, float 3.0, float 4.0, float 5.0, float 6.0,"
    " float 7.0, float 8.0, float 9.0, float 10.0, float 11.0, float 12.0, float 13.0, float 14.0,"
    " float 15.0, float 16.0>\n"
    "  store <16 x float> %w, ptr %p, align 4\n"
    "  %r = call float @f_a(float 2.0)\n"
    "  call void @f_missing(float %r)\n"
    "  ret void\n"
    "}\n"
    "declare float @f_a(float)\n"
    "declare void @f_missing(float)\n";

static unsigned char *objs[2];
static size_t lens[2];

static float ext_fn(float v) {
    return v * 2.0f;
}

static void *resolver(const char *name, void *ud) {
    bool *knows = ud;
    (void)name;
    if (!*knows) return NULL;
    float (*f)(float) = ext_fn;
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

static unsigned char *compile(const char *ir, size_t *len) {
    char err[300];
    unsigned char *obj = objcode_compile(ir, len, err, sizeof err);
    if (!obj) fz_die("%s", err);
    return obj;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    objs[0] = compile(ir_a, &lens[0]);
    objs[1] = compile(ir_b, &lens[1]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_bytes in = {data, size, 0};
    unsigned head = fz_byte(&in);
    int which = (int)(head & 3) % 3; /* 0, 1: one object; 2: both */
    bool knows = (head & 4) != 0;
    fz_mem mem = {0};
    if (head & 8) mem.tr.fail_at = 1 + (long)fz_byte(&in);
    unsigned char *copy[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    int n = which == 2 ? 2 : 1;
    for (int k = 0; k < n; k++) {
        int src = which == 2 ? k : which;
        len[k] = lens[src];
        if (!(copy[k] = malloc(len[k]))) fz_die("out of memory");
        memcpy(copy[k], objs[src], len[k]);
    }
    while (fz_more(&in)) {
        unsigned lo = fz_byte(&in), hi = fz_byte(&in), op = fz_byte(&in), v = fz_byte(&in);
        int k = (int)(op >> 7) % n;
        if (!len[k]) continue;
        size_t at = ((size_t)hi << 8 | lo) % len[k];
        switch (op & 7) {
        case 0: copy[k][at] = (unsigned char)v; break;
        case 1: copy[k][at] ^= (unsigned char)v; break;
        case 2: copy[k][at] = (unsigned char)(copy[k][at] + v); break;
        case 3: /* a 32-bit value: small, near a boundary, or huge */
            for (size_t i = 0; i < 4 && at + i < len[k]; i++)
                copy[k][at + i] = (unsigned char)(i == 0 ? v : (v & 0x80) ? 0xff : 0);
            break;
        case 4: len[k] = at; break;
        default: copy[k][at] = (unsigned char)(v & 1 ? 0xff : 0); break;
        }
    }
    rj_ctx *ctx = fz_ctx_new(&mem);
    if (ctx) {
        static const char *const names[] = {"f_a", "f_b"};
        void *addrs[2] = {(void *)1, (void *)1};
        elf_code *code = NULL;
        char why[200];
        const unsigned char *o[2] = {copy[0], copy[1]};
        int nn = which == 2 ? 2 : 1;
        const char *const *nm = which == 1 ? names + 1 : names;
        rj_status s = elf_link(ctx, o, len, n, resolver, &knows, nm, nn, addrs, &code, why, sizeof why);
        if (s && s != RJ_ERR_NOMEM) fz_die("elf_link returned status %d", (int)s);
        if (s == RJ_ERR_NOMEM && !mem.tr.fail_at) fz_die("RJ_ERR_NOMEM without a failed allocation");
        if (code) {
            for (int q = 0; q < nn; q++)
                if (!addrs[q]) fz_die("linked, but function %s has no address", nm[q]);
            elf_code_free(ctx, code);
        } else {
            for (int q = 0; q < nn; q++)
                if (addrs[q]) fz_die("refused, but function %s has an address", nm[q]);
            if (!s && !why[0]) fz_die("refused without a reason");
            if (fz_tracing()) fprintf(stderr, "refused: %s\n", why);
        }
        fz_ctx_free(ctx, &mem);
    }
    free(copy[0]);
    free(copy[1]);
    return 0;
}
