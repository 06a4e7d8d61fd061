/*
 * lower/map.c — the map template: elementwise groups.
 *
 * One pass over an output domain writing every output of that domain (element_nest: units
 * over its rows, a lanes loop over its last dim).
 */
#include "kit.h"

static void map_body(lower *L, blk *b, at *a, void *ud) {
    const fuse_group *gr = ud;
    for (int32_t m = 0; m < gr->nmembers; m++) {
        int32_t id = gr->members[m];
        store_node(L, b, id, value_fresh(L, id, a), a, LF_NT);
    }
}

void lower_map(lower *L, const fuse_group *gr) {
    const node *d = &L->g->nodes[gr->root];
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "map over ");
    print_node_type(&w, L->g, d);
    set_what(L, &w);
    element_nest(L, d, d->dims, map_body, (void *)gr);
}
