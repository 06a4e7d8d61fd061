/*
 * pipeline.h — running the backend-neutral part of compilation (pipeline.c).
 */
#ifndef RJ_PIPELINE_H
#define RJ_PIPELINE_H

#include "loopir.h"
#include "passes.h"
#include "target.h"

typedef struct compiled {
    rj_graph *opt;   /* the graph after the graph passes */
    fuse_plan plan;  /* kernels and what they compute */
    lprog lp;        /* the loop IR */
} compiled;

/* Runs canonicalize, eliminate_pads, canonicalize, fuse, lowering for `desc` and expand on a
 * copy of `user`, a verified graph. */
rj_status pipeline_run(const rj_graph *user, const target_desc *desc, compiled *c);
void compiled_free(compiled *c);

#endif
