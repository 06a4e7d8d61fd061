/*
 * objcode.h — object files compiled by LLVM from IR text, as ragjit's code generator compiles
 * kernels (the host CPU, small code model, position-independent): what test_elfload and
 * fuzz_elf give ragjit's linker (no cmocka here, so the fuzz harnesses can link it too).
 */
#ifndef RJ_TEST_OBJCODE_H
#define RJ_TEST_OBJCODE_H

#include <stddef.h>

/* The object file for the IR text, malloc'd (*len bytes); NULL with a message in err (of
 * err_size bytes) if the IR does not parse or LLVM cannot compile it. */
unsigned char *objcode_compile(const char *ir, size_t *len, char *err, size_t err_size);

#endif
