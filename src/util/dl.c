/*
 * dl.c — resolving entry points of libraries loaded at run time (NVRTC, the CUDA driver, the
 * OpenCL ICD loader), so ragjit builds and runs where none of them exists.
 *
 * dlsym returns an object pointer; copying its bits into the function pointer is the
 * POSIX-sanctioned way to get a function pointer without the cast ISO C forbids.
 */
#include <dlfcn.h>
#include <string.h>

#include "util.h"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers are not data sized");

bool dl_sym(void *lib, const char *name, void *fnptr) {
    void *s = dlsym(lib, name);
    if (!s) return false;
    memcpy(fnptr, &s, sizeof s);
    return true;
}
