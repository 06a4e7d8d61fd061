/*
 * rewrite.h — rebuilding a graph in topological order (see rewrite.c).
 *
 * A pass: rw_begin; mark live nodes with rw_live; for each live old node in order either
 * rw_copy it or build replacement nodes with rw_add and store the new id in rw.map; then
 * rw_finish swaps the new graph into place (or rw_abort discards it).
 */
#ifndef RJ_REWRITE_H
#define RJ_REWRITE_H

#include "ir.h"

typedef struct rewriter {
    rj_graph *g;    /* the graph being rewritten */
    rj_graph *out;  /* the graph being built */
    int32_t *map;   /* old id -> new id (-1 until built) */
    int32_t nmap;
    int32_t *table; /* hash-consing of new nodes */
    int32_t tcap;
} rewriter;

rj_status rw_begin(rewriter *rw, rj_graph *g);
int32_t rw_add(rewriter *rw, node *n);   /* infer, hash-cons and append; -1 on failure */
int32_t rw_copy(rewriter *rw, int32_t old); /* old node with mapped operands */
void rw_label(rewriter *rw, int32_t id, const char *label); /* keeps a variable name */
void rw_live(const rj_graph *g, uint8_t *live); /* nodes reachable from outputs */
rj_status rw_finish(rewriter *rw);
void rw_abort(rewriter *rw);

#endif
