/*
 * elfload.c — links the object files ragjit's code generator wrote (in this process, or in an
 * earlier one: the persistent cache) into executable memory of the program's own, without ORC.
 *
 * Why a linker of our own: in a new process, ORC's LLJIT costs about half a millisecond to
 * create (it detects the host again and builds two TargetMachines of its own) and a few tenths
 * more to link a program's objects, which is most of what a persistent-cache hit costs. Yet the
 * objects jit.c writes are very plain: x86-64 ELF relocatable files with one text section,
 * read-only constant pools (.rodata, .rodata.cst*), no writable data, no thread-local storage,
 * no unwind tables, and two kinds of relocations: references to the constants relative to the
 * instruction pointer (small code model, position-independent), and calls to the runtime
 * routines (rt.c) and libm. Linking those is a page of arithmetic.
 *
 * What it takes, and what it leaves to ORC: objects for x86-64 whose allocated sections are
 * code or read-only data, relocations of the kinds listed in apply() against symbols it can
 * resolve (defined in one of the program's objects, one of rt.c's routines, or a symbol of the
 * process, as ORC's process generator would find it). Anything else (another machine, a
 * writable, TLS or unwind section, another relocation kind, an unresolved name, a kernel not
 * found) is refused as a whole with a reason, and jit.c hands the objects to ORC, which links
 * whatever LLVM writes: refusing is never an error.
 *
 * Memory: one anonymous mapping per program: code, then a 16-byte stub per external routine
 * that a call cannot reach directly (a jump through the address stored beside it), then the
 * constants, each part starting on a page. It is written while read-write, then the code is
 * made read+execute and the constants read-only, so no page is ever writable and executable at
 * once. x86-64 keeps instruction fetch coherent with stores, so no cache flush is needed. The
 * mapping lives until the program is freed (elf_code_free).
 *
 * Safety: cache entries are checked before they reach here (the key byte for byte, a checksum,
 * the sizes), but every offset, size, index, alignment and name read from an object is still
 * checked against the object, so a damaged file is refused, never followed out of bounds.
 * Objects sit at any byte offset of the cache's packing, so headers are copied out, never
 * dereferenced in place.
 */
#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "llvm_backend.h"

#define STUB_BYTES 16
#define MAX_ALIGN 4096
#define MAX_IMAGE ((size_t)1 << 28) /* sections that add up to more (overlapping in the file) are not ours */

struct elf_code {
    void *base;
    size_t size;
};

/* One object being linked: its section headers and symbols (copied out), and where each
 * allocated section and each symbol landed. */
typedef struct eobj {
    const unsigned char *b;
    size_t len;
    Elf64_Shdr *sh;
    uint32_t nsh;
    uint32_t symtab;        /* section index of the symbol table */
    Elf64_Sym *sym;
    uint32_t nsym;
    const char *str;        /* the symbol table's strings */
    size_t nstr;
    size_t *off;            /* per section: offset in its part of the mapping */
    unsigned char *part;    /* per section: 0 not loaded, 1 code, 2 constants */
    uintptr_t *sec;         /* per section: its address (0: not loaded) */
    uintptr_t *addr;        /* per symbol: its address */
    int32_t *stub;          /* per symbol: its stub (-1: none) */
    bool *ext;              /* per symbol: resolved outside the object */
} eobj;

typedef struct linker {
    rj_ctx *ctx;
    eobj *o;
    int32_t n;
    char why[160]; /* the reason for refusing */
    bool nomem;    /* the refusal is the allocator's */
    unsigned char *map;
    size_t code_size, stub_at, nstubs, stub_cap, ro_at, ro_size, total;
} linker;

RJ_PRINTF(2, 3) static bool refuse(linker *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->why, sizeof L->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool in_file(const eobj *o, uint64_t off, uint64_t size) {
    return size <= o->len && off <= o->len - size;
}

static bool pow2(uint64_t a) {
    return a && !(a & (a - 1));
}

static size_t align_up(size_t v, size_t a) {
    return (v + a - 1) & ~(a - 1);
}

/* A symbol's name, if its string is inside the table and ends there. */
static const char *sym_name(const eobj *o, const Elf64_Sym *s) {
    if (s->st_name >= o->nstr) return NULL;
    const char *p = o->str + s->st_name;
    return memchr(p, 0, o->nstr - s->st_name) ? p : NULL;
}

/* Header, section headers, symbol table, and the place of every allocated section in its part
 * of the mapping. */
static bool parse(linker *L, eobj *o) {
    Elf64_Ehdr eh;
    if (o->len < sizeof eh) return refuse(L, "an object of %llu bytes", (unsigned long long)o->len);
    memcpy(&eh, o->b, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_ident[EI_VERSION] != EV_CURRENT)
        return refuse(L, "not a 64-bit little-endian ELF file");
    if (eh.e_type != ET_REL) return refuse(L, "ELF type %llu, not a relocatable object", (unsigned long long)eh.e_type);
    if (eh.e_machine != EM_X86_64) return refuse(L, "ELF machine %llu, not x86-64", (unsigned long long)eh.e_machine);
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
        !in_file(o, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return refuse(L, "section headers outside the file");
    o->nsh = eh.e_shnum;
    size_t nsh = o->nsh;
    o->sh = mem_alloc(L->ctx, nsh * sizeof *o->sh);
    o->off = mem_zalloc(L->ctx, nsh * sizeof *o->off);
    o->part = mem_zalloc(L->ctx, nsh);
    o->sec = mem_zalloc(L->ctx, nsh * sizeof *o->sec);
    if (!o->sh || !o->off || !o->part || !o->sec) return L->nomem = true, refuse(L, "out of memory");
    memcpy(o->sh, o->b + eh.e_shoff, nsh * sizeof *o->sh);
    bool have_symtab = false;
    for (uint32_t i = 1; i < o->nsh; i++) {
        const Elf64_Shdr *s = &o->sh[i];
        if (s->sh_type == SHT_SYMTAB) {
            if (have_symtab) return refuse(L, "two symbol tables");
            have_symtab = true;
            o->symtab = i;
        }
        if (s->sh_type == SHT_REL) return refuse(L, "REL relocations");
        if (s->sh_type == SHT_GROUP) return refuse(L, "a section group");
        if (!(s->sh_flags & SHF_ALLOC)) continue;
        if (s->sh_type != SHT_PROGBITS) return refuse(L, "an allocated section of type %#llx", (unsigned long long)s->sh_type);
        if (s->sh_flags & (SHF_WRITE | SHF_TLS)) return refuse(L, "a writable or TLS section");
        if (!in_file(o, s->sh_offset, s->sh_size)) return refuse(L, "a section outside the file");
        uint64_t a = s->sh_addralign ? s->sh_addralign : 1;
        if (!pow2(a) || a > MAX_ALIGN) return refuse(L, "a section aligned to %llu bytes", (unsigned long long)a);
        bool code = (s->sh_flags & SHF_EXECINSTR) != 0;
        size_t *at = code ? &L->code_size : &L->ro_size;
        *at = align_up(*at, (size_t)a);
        o->off[i] = *at;
        o->part[i] = code ? 1 : 2;
        *at += (size_t)s->sh_size;
    }
    if (!have_symtab) return refuse(L, "no symbol table");
    const Elf64_Shdr *st = &o->sh[o->symtab];
    if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_size % sizeof(Elf64_Sym) ||
        !in_file(o, st->sh_offset, st->sh_size) || st->sh_link == 0 || st->sh_link >= o->nsh ||
        o->sh[st->sh_link].sh_type != SHT_STRTAB || !in_file(o, o->sh[st->sh_link].sh_offset, o->sh[st->sh_link].sh_size))
        return refuse(L, "a malformed symbol table");
    o->nsym = (uint32_t)(st->sh_size / sizeof(Elf64_Sym));
    size_t ns = o->nsym ? o->nsym : 1;
    o->sym = mem_alloc(L->ctx, ns * sizeof *o->sym);
    o->addr = mem_zalloc(L->ctx, ns * sizeof *o->addr);
    o->stub = mem_alloc(L->ctx, ns * sizeof *o->stub);
    o->ext = mem_zalloc(L->ctx, ns * sizeof *o->ext);
    if (!o->sym || !o->addr || !o->stub || !o->ext) return L->nomem = true, refuse(L, "out of memory");
    memcpy(o->sym, o->b + st->sh_offset, o->nsym * sizeof *o->sym);
    for (uint32_t i = 0; i < o->nsym; i++) {
        o->stub[i] = -1;
        if (o->sym[i].st_shndx == SHN_UNDEF && i) L->stub_cap++; /* at most one stub each */
    }
    o->str = (const char *)o->b + o->sh[st->sh_link].sh_offset;
    o->nstr = o->sh[st->sh_link].sh_size;
    return true;
}

/* A global symbol defined by one of the program's objects, or 0. */
static uintptr_t defined(const linker *L, const char *name) {
    for (int32_t k = 0; k < L->n; k++) {
        const eobj *o = &L->o[k];
        for (uint32_t i = 1; i < o->nsym; i++) {
            const Elf64_Sym *s = &o->sym[i];
            int bind = ELF64_ST_BIND(s->st_info);
            if (s->st_shndx == SHN_UNDEF || s->st_shndx >= SHN_LORESERVE || (bind != STB_GLOBAL && bind != STB_WEAK))
                continue;
            const char *nm = sym_name(o, s);
            if (nm && !strcmp(nm, name)) return o->addr[i];
        }
    }
    return 0;
}

/* Every symbol's address: sections placed, names resolved. */
static bool resolve(linker *L, eobj *o) {
    for (uint32_t i = 1; i < o->nsym; i++) {
        const Elf64_Sym *s = &o->sym[i];
        uint16_t x = s->st_shndx;
        if (x == SHN_UNDEF) continue; /* second round, once every object's definitions are placed */
        if (x == SHN_ABS) o->addr[i] = (uintptr_t)s->st_value;
        else if (x >= SHN_LORESERVE) return refuse(L, "a symbol in special section %llu", (unsigned long long)x);
        else if (x >= o->nsh) return refuse(L, "a symbol in section %llu, past the last", (unsigned long long)x);
        else if (o->sec[x]) {
            if (s->st_value > o->sh[x].sh_size) return refuse(L, "a symbol past its section's end");
            o->addr[i] = o->sec[x] + (uintptr_t)s->st_value;
        } /* else in a section not loaded (debug information): no address; relocating against it is refused */
    }
    return true;
}

static bool resolve_external(linker *L, eobj *o, elf_resolver ext, void *ud) {
    for (uint32_t i = 1; i < o->nsym; i++) {
        if (o->sym[i].st_shndx != SHN_UNDEF) continue;
        const char *name = sym_name(o, &o->sym[i]);
        if (!name || !*name) return refuse(L, "an undefined symbol without a name");
        uintptr_t a = defined(L, name);
        if (!a) {
            a = (uintptr_t)ext(name, ud);
            o->ext[i] = true;
        }
        if (!a) {
            if (ELF64_ST_BIND(o->sym[i].st_info) == STB_WEAK) continue; /* an absent weak symbol is 0 */
            return refuse(L, "unresolved symbol %s", name);
        }
        o->addr[i] = a;
    }
    return true;
}

static bool fits32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* A stub jumping to the symbol's address, for calls that cannot reach it in ±2 GiB. */
static uintptr_t stub_of(linker *L, eobj *o, uint32_t si) {
    if (o->stub[si] < 0) {
        if (L->nstubs >= L->stub_cap) return 0;
        o->stub[si] = (int32_t)L->nstubs++;
        unsigned char *p = L->map + L->stub_at + (size_t)o->stub[si] * STUB_BYTES;
        static const unsigned char jmp[6] = {0xff, 0x25, 0, 0, 0, 0}; /* jmp *0(%rip) */
        uint64_t target = o->addr[si];
        memcpy(p, jmp, sizeof jmp);
        memcpy(p + 6, &target, 8);
    }
    return (uintptr_t)(L->map + L->stub_at + (size_t)o->stub[si] * STUB_BYTES);
}

/* Applies one RELA section's relocations to the section they patch. */
static bool apply(linker *L, eobj *o, const Elf64_Shdr *rs) {
    if (rs->sh_link != o->symtab) return refuse(L, "relocations against another symbol table");
    if (rs->sh_info >= o->nsh) return refuse(L, "relocations of section %llu, past the last", (unsigned long long)rs->sh_info);
    uint32_t t = rs->sh_info;
    if (!o->sec[t]) return true; /* of a section not loaded (debug information) */
    if (rs->sh_entsize != sizeof(Elf64_Rela) || rs->sh_size % sizeof(Elf64_Rela) || !in_file(o, rs->sh_offset, rs->sh_size))
        return refuse(L, "a malformed relocation section");
    uint64_t size = o->sh[t].sh_size;
    for (uint64_t r = 0; r < rs->sh_size / sizeof(Elf64_Rela); r++) {
        Elf64_Rela e;
        memcpy(&e, o->b + rs->sh_offset + r * sizeof e, sizeof e);
        uint32_t type = ELF64_R_TYPE(e.r_info), si = ELF64_R_SYM(e.r_info);
        if (type == R_X86_64_NONE) continue;
        if (si == 0 || si >= o->nsym) return refuse(L, "a relocation against symbol %llu", (unsigned long long)si);
        unsigned width = type == R_X86_64_64 || type == R_X86_64_PC64 ? 8 : 4;
        if (e.r_offset > size || size - e.r_offset < width) return refuse(L, "a relocation outside its section");
        uint16_t x = o->sym[si].st_shndx;
        if (!o->addr[si] && !(x == SHN_UNDEF || x == SHN_ABS))
            return refuse(L, "a relocation against a section not loaded");
        unsigned char *where = (unsigned char *)o->sec[t] + e.r_offset;
        uint64_t S = o->addr[si], P = (uint64_t)(uintptr_t)where, A = (uint64_t)e.r_addend;
        int64_t v;
        switch (type) {
        case R_X86_64_64: {
            uint64_t u = S + A;
            memcpy(where, &u, 8);
            break;
        }
        case R_X86_64_PC64: {
            uint64_t u = S + A - P;
            memcpy(where, &u, 8);
            break;
        }
        case R_X86_64_PC32:
        case R_X86_64_PLT32:
            v = (int64_t)(S + A - P);
            if (!fits32(v) && type == R_X86_64_PLT32 && o->ext[si]) {
                uintptr_t stub = stub_of(L, o, si);
                if (!stub) return refuse(L, "more stubs than undefined symbols");
                v = (int64_t)((uint64_t)stub + A - P);
            }
            if (!fits32(v)) return refuse(L, "a PC-relative reference out of range (symbol %s)", sym_name(o, &o->sym[si]) ? sym_name(o, &o->sym[si]) : "?");
            {
                int32_t w = (int32_t)v;
                memcpy(where, &w, 4);
            }
            break;
        case R_X86_64_32:
        case R_X86_64_32S: {
            uint64_t u = S + A;
            bool ok = type == R_X86_64_32 ? u <= UINT32_MAX : fits32((int64_t)u);
            if (!ok) return refuse(L, "an absolute 32-bit reference out of range");
            uint32_t w = (uint32_t)u;
            memcpy(where, &w, 4);
            break;
        }
        default:
            return refuse(L, "relocation type %llu", (unsigned long long)type);
        }
    }
    return true;
}

static void release(linker *L) {
    for (int32_t k = 0; k < L->n; k++) {
        eobj *o = &L->o[k];
        size_t nsh = o->nsh, ns = o->nsym ? o->nsym : 1;
        mem_free(L->ctx, o->sh, nsh * sizeof *o->sh);
        mem_free(L->ctx, o->off, nsh * sizeof *o->off);
        mem_free(L->ctx, o->part, nsh);
        mem_free(L->ctx, o->sec, nsh * sizeof *o->sec);
        mem_free(L->ctx, o->sym, ns * sizeof *o->sym);
        mem_free(L->ctx, o->addr, ns * sizeof *o->addr);
        mem_free(L->ctx, o->stub, ns * sizeof *o->stub);
        mem_free(L->ctx, o->ext, ns * sizeof *o->ext);
    }
    mem_free(L->ctx, L->o, sizeof *L->o * (size_t)(L->n ? L->n : 1));
}

static bool link_all(linker *L, const unsigned char *const *objs, const size_t *lens, elf_resolver ext, void *ud,
                     const char *const *names, int32_t nnames, void **addrs) {
    for (int32_t k = 0; k < L->n; k++) {
        L->o[k].b = objs[k];
        L->o[k].len = lens[k];
        if (!parse(L, &L->o[k])) return false;
    }
    if (!L->code_size) return refuse(L, "no code");
    if (L->code_size > MAX_IMAGE || L->ro_size > MAX_IMAGE) return refuse(L, "sections of more than 256 MiB");
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    L->stub_at = align_up(L->code_size, STUB_BYTES);
    L->ro_at = align_up(L->stub_at + L->stub_cap * STUB_BYTES, page);
    L->total = align_up(L->ro_at + L->ro_size, page);
    void *m = mmap(NULL, L->total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return refuse(L, "mmap of %llu bytes failed", (unsigned long long)L->total);
    L->map = m;
    for (int32_t k = 0; k < L->n; k++) {
        eobj *o = &L->o[k];
        for (uint32_t i = 1; i < o->nsh; i++) {
            if (!o->part[i]) continue;
            unsigned char *at = L->map + (o->part[i] == 1 ? 0 : L->ro_at) + o->off[i];
            memcpy(at, o->b + o->sh[i].sh_offset, (size_t)o->sh[i].sh_size);
            o->sec[i] = (uintptr_t)at;
        }
    }
    for (int32_t k = 0; k < L->n; k++)
        if (!resolve(L, &L->o[k])) return false;
    for (int32_t k = 0; k < L->n; k++)
        if (!resolve_external(L, &L->o[k], ext, ud)) return false;
    for (int32_t k = 0; k < L->n; k++)
        for (uint32_t i = 1; i < L->o[k].nsh; i++)
            if (L->o[k].sh[i].sh_type == SHT_RELA && !apply(L, &L->o[k], &L->o[k].sh[i])) return false;
    for (int32_t q = 0; q < nnames; q++) {
        uintptr_t a = defined(L, names[q]);
        if (!a || a < (uintptr_t)L->map || a >= (uintptr_t)L->map + L->stub_at)
            return refuse(L, "no function %s in the objects", names[q]);
        addrs[q] = (void *)a;
    }
    if (mprotect(L->map, L->ro_at, PROT_READ | PROT_EXEC) ||
        (L->total > L->ro_at && mprotect(L->map + L->ro_at, L->total - L->ro_at, PROT_READ)))
        return refuse(L, "mprotect refused executable or read-only pages");
    return true;
}

rj_status elf_link(rj_ctx *ctx, const unsigned char *const *objs, const size_t *lens, int32_t n, elf_resolver ext,
                   void *ud, const char *const *names, int32_t nnames, void **addrs, elf_code **out, char *why,
                   size_t why_size) {
    linker L = {.ctx = ctx, .n = n};
    *out = NULL;
    if (why_size) why[0] = 0;
    elf_code *c = NULL;
    bool ok = n > 0 && (L.o = mem_zalloc(ctx, sizeof *L.o * (size_t)n)) != NULL;
    if (!ok) {
        L.nomem = n > 0;
        L.n = 0;
        refuse(&L, "%s", n > 0 ? "out of memory" : "no objects");
    } else
        ok = link_all(&L, objs, lens, ext, ud, names, nnames, addrs);
    if (ok && !(c = mem_alloc(ctx, sizeof *c))) {
        ok = false;
        L.nomem = true;
    }
    if (ok) {
        c->base = L.map;
        c->size = L.total;
        *out = c;
    } else {
        if (L.map) munmap(L.map, L.total);
        for (int32_t q = 0; q < nnames; q++) addrs[q] = NULL;
        if (why_size) snprintf(why, why_size, "%s", L.why);
    }
    release(&L);
    return L.nomem ? ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory linking the machine code") : RJ_OK;
}

void elf_code_free(rj_ctx *ctx, elf_code *c) {
    if (!c) return;
    munmap(c->base, c->size);
    mem_free(ctx, c, sizeof *c);
}
