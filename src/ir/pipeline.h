/*
 * pipeline.h — running the backend-neutral part of compilation (pipeline.c).
 */
#ifndef RJ_PIPELINE_H
#define RJ_PIPELINE_H

#include "loopir.h"
#include "passes.h"

typedef struct compiled {
    rj_graph *opt;   /* the graph after the graph passes */
    fuse_plan plan;  /* kernels and what they compute */
    lprog lp;        /* the loop IR */
} compiled;

/* Runs verify, canonicalize, eliminate_pads, canonicalize, fuse, lower (for the target desc
 * describes: target_desc_for) on a copy of `user`. */
rj_status pipeline_run(const rj_graph *user, const target_desc *desc, compiled *c);
void compiled_free(compiled *c);

#endif
