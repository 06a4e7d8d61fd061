/* TEMPORARY: replaced by the loop-IR branch's target.c */
#include <pthread.h>
#include <unistd.h>

#include "target.h"
#include "ragjit.h"
static target_desc cpu = {.name = "cpu", .warp = 1, .vector_bytes = 64, .l1_bytes = 32768, .l2_bytes = 1 << 20, .max_block = 1};
static const target_desc cuda = {.name = "cuda", .simt = true, .warp = 32, .vector_bytes = 16, .l1_bytes = 256 << 10, .l2_bytes = 50 << 20, .shared_bytes = 48 << 10, .max_block = 1024};
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void probe(void) {
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (v > 0) cpu.l2_bytes = v;
}
const target_desc *target_desc_for(int t) {
    pthread_once(&once, probe);
    return t == RJ_TARGET_CUDA ? &cuda : &cpu;
}
