/* TEMPORARY: replaced by the loop-IR branch's target.c */
#include "target.h"
#include "ragjit.h"
static const target_desc cpu = {.name = "cpu", .warp = 1, .vector_bytes = 64, .l1_bytes = 32768, .l2_bytes = 1 << 20, .max_block = 1};
static const target_desc cuda = {.name = "cuda", .simt = true, .warp = 32, .vector_bytes = 16, .l1_bytes = 256 << 10, .l2_bytes = 50 << 20, .shared_bytes = 48 << 10, .max_block = 1024};
const target_desc *target_desc_for(int t) { return t == RJ_TARGET_CUDA ? &cuda : &cpu; }
