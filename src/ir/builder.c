/*
 * builder.c — the graph builder: one public call per op family, each creating a node and
 * inferring its type on the spot.
 *
 * Builder calls share one shape: check the graph and the operands, fill a node with the op
 * and its attributes, let infer_node decide dtype and shape (or reject the node with a
 * message), append it. An operand of RJ_NONE after an earlier failure fails quietly, keeping
 * the first message; RJ_NONE with no earlier failure is reported, since it means the caller
 * passed a node that never existed. An input is built the same way (rj_graph_input), so this
 * file, not graph.c, is where nodes meet inference: the graph's storage stays below it.
 */
#include <math.h>
#include <string.h>

#include "ir.h"

static bool operands_ok(rj_graph *g, const char *op, const rj_node *ops, int n) {
    for (int i = 0; i < n; i++) {
        if (ops[i] >= 0 && ops[i] < g->n) continue;
        if (ops[i] == RJ_NONE && g->status != RJ_OK) return false;
        graph_fail(g, RJ_ERR_GRAPH, "%s: operand %d is %s", op, i + 1,
                   ops[i] == RJ_NONE ? "RJ_NONE (no node)" : "not a node of this graph");
        return false;
    }
    return true;
}

static rj_node build(rj_graph *g, node *n) {
    n->loc = g->cur_loc;
    if (infer_node(g, n) != RJ_OK) return RJ_NONE;
    return graph_add_node(g, n);
}

static node make(rj_op op, int nin, rj_node a, rj_node b, rj_node c) {
    return (node){.op = op, .nin = (uint8_t)nin, .in = {a, b, c}, .loc = -1};
}

static bool op_is(rj_graph *g, rj_op op, const char *call, op_kind k1, op_kind k2) {
    if ((unsigned)op < RJ_OP_COUNT && (op_table[op].kind == k1 || op_table[op].kind == k2))
        return true;
    graph_fail(g, RJ_ERR_ARG, "%s: op %d (%s) is not a %s op", call, (int)op,
               (unsigned)op < RJ_OP_COUNT ? op_table[op].name : "invalid", call + 9);
    return false;
}

static rj_node scalar(rj_graph *g, int weak, double f, int64_t i) {
    if (!g) return RJ_NONE;
    node n = make(RJ_OP_SCALAR, 0, -1, -1, -1);
    n.weak = (uint8_t)weak;
    n.fval = f;
    n.ival = i;
    return build(g, &n);
}

rj_node rj_graph_scalar(rj_graph *g, double v) { return scalar(g, WEAK_FLOAT, v, 0); }
rj_node rj_graph_scalar_int(rj_graph *g, int64_t v) {
    return scalar(g, WEAK_INT, (double)v, v);
}
rj_node rj_graph_scalar_bool(rj_graph *g, bool v) { return scalar(g, WEAK_BOOL, v, v); }

/* An input: a leaf named in the graph's one namespace of inputs, outputs and symbols. */
rj_node rj_graph_input(rj_graph *g, const char *name, rj_dtype dtype, int rank,
                       const rj_dim *dims) {
    if (!g) return RJ_NONE;
    if (!graph_name_valid(name)) {
        graph_fail(g, RJ_ERR_ARG, "input: '%s' is not a valid name", name ? name : "(NULL)");
        return RJ_NONE;
    }
    const char *user = graph_name_user(g, name, RJ_NONE);
    if (user) {
        graph_fail(g, RJ_ERR_ARG, "input: the name '%s' is already used by %s", name, user);
        return RJ_NONE;
    }
    if ((unsigned)dtype >= RJ_DTYPE_COUNT) {
        graph_fail(g, RJ_ERR_ARG, "input %s: invalid dtype %d", name, (int)dtype);
        return RJ_NONE;
    }
    if (rank < 0 || rank > RJ_MAX_RANK || (rank > 0 && !dims)) {
        graph_fail(g, RJ_ERR_ARG, "input %s: rank %d is out of range 0..%d%s", name, rank,
                   RJ_MAX_RANK, rank > 0 && !dims ? " or dims is NULL" : "");
        return RJ_NONE;
    }
    node n = {.op = RJ_OP_INPUT, .dtype = dtype, .rank = (uint8_t)rank, .loc = g->cur_loc,
              .in = {-1, -1, -1}};
    for (int i = 0; i < rank; i++) {
        if (!graph_is_valid_dim(g, dims[i])) {
            graph_fail(g, RJ_ERR_ARG, "input %s: dim %d is not a constant or a symbol of this "
                       "graph", name, i);
            return RJ_NONE;
        }
        n.dims[i] = dims[i];
    }
    if (infer_node(g, &n) != RJ_OK) return RJ_NONE;
    if (!mem_grow(g->ctx, (void **)&g->inputs, &g->capinputs, g->ninputs + 1, sizeof(int32_t)) ||
        !(n.name = mem_strdup(g->ctx, name))) {
        graph_keep_error(g, RJ_ERR_NOMEM);
        return RJ_NONE;
    }
    int32_t id = graph_add_node(g, &n);
    if (id < 0) {
        mem_strfree(g->ctx, n.name);
        return RJ_NONE;
    }
    g->inputs[g->ninputs++] = id;
    return id;
}

rj_node rj_graph_unary(rj_graph *g, rj_op op, rj_node x) {
    if (!g || !op_is(g, op, "rj_graph_unary", KIND_UNARY, KIND_UNARY)) return RJ_NONE;
    if (!operands_ok(g, op_table[op].name, &x, 1)) return RJ_NONE;
    node n = make(op, 1, x, -1, -1);
    return build(g, &n);
}

rj_node rj_graph_binary(rj_graph *g, rj_op op, rj_node a, rj_node b) {
    if (!g || !op_is(g, op, "rj_graph_binary", KIND_BINARY, KIND_COMPARE)) return RJ_NONE;
    if (!operands_ok(g, op_table[op].name, (rj_node[]){a, b}, 2)) return RJ_NONE;
    node n = make(op, 2, a, b, -1);
    return build(g, &n);
}

rj_node rj_graph_where(rj_graph *g, rj_node c, rj_node a, rj_node b) {
    if (!g || !operands_ok(g, "where", (rj_node[]){c, a, b}, 3)) return RJ_NONE;
    node n = make(RJ_OP_WHERE, 3, c, a, b);
    return build(g, &n);
}

rj_node rj_graph_masked_fill(rj_graph *g, rj_node x, rj_node mask, double value) {
    if (!g || !operands_ok(g, "masked_fill", (rj_node[]){x, mask}, 2)) return RJ_NONE;
    node n = make(RJ_OP_MASKED_FILL, 2, x, mask, -1);
    n.fval = value;
    return build(g, &n);
}

rj_node rj_graph_cast(rj_graph *g, rj_node x, rj_dtype to) {
    if (!g || !operands_ok(g, "cast", &x, 1)) return RJ_NONE;
    node n = make(RJ_OP_CAST, 1, x, -1, -1);
    n.ival = (int64_t)to;
    return build(g, &n);
}

rj_node rj_graph_reduce(rj_graph *g, rj_op op, rj_node x, int dim, bool keepdim) {
    if (!g || !op_is(g, op, "rj_graph_reduce", KIND_REDUCE, KIND_REDUCE)) return RJ_NONE;
    if (!operands_ok(g, op_table[op].name, &x, 1)) return RJ_NONE;
    /* over dim 1 of [B, j1, j1, ...], keepdim: the reduction's [B, j1, ...] as a row of
     * columns [B, 1, j1, ...], which broadcasts against the pair like any column */
    const node *xn = &g->nodes[x];
    if (keepdim && (dim == 1 || dim == 1 - xn->rank) && node_is_pair(g, xn)) {
        rj_node r = rj_graph_reduce(g, op, x, 1, false);
        return r == RJ_NONE ? RJ_NONE : rj_graph_unsqueeze(g, r, 1);
    }
    node n = make(op, 1, x, -1, -1);
    n.axis = dim;
    n.keepdim = keepdim;
    return build(g, &n);
}

static rj_node softmax(rj_graph *g, rj_op op, rj_node x, int dim) {
    if (!g || !operands_ok(g, op_table[op].name, &x, 1)) return RJ_NONE;
    node n = make(op, 1, x, -1, -1);
    n.axis = dim;
    return build(g, &n);
}

rj_node rj_graph_softmax(rj_graph *g, rj_node x, int dim) {
    return softmax(g, RJ_OP_SOFTMAX, x, dim);
}

rj_node rj_graph_log_softmax(rj_graph *g, rj_node x, int dim) {
    return softmax(g, RJ_OP_LOG_SOFTMAX, x, dim);
}

/* Optional operands (weight, bias) are appended only when present; NORM nodes therefore
 * have nin 1..3 and a flag in ival telling which of weight/bias they hold (bit 0: weight,
 * bit 1: bias). */
static rj_node norm(rj_graph *g, rj_op op, rj_node x, int ndims, rj_node w, rj_node b,
                    double eps) {
    const char *name = op_table[op].name;
    if (!g || !operands_ok(g, name, &x, 1)) return RJ_NONE;
    node n = make(op, 1, x, -1, -1);
    if (w != RJ_NONE) {
        if (!operands_ok(g, name, &w, 1)) return RJ_NONE;
        n.in[n.nin++] = w;
        n.ival |= 1;
    }
    if (b != RJ_NONE) {
        if (!operands_ok(g, name, &b, 1)) return RJ_NONE;
        n.in[n.nin++] = b;
        n.ival |= 2;
    }
    if (isnan(eps)) {
        graph_fail(g, RJ_ERR_ARG, "%s: eps is NaN", name);
        return RJ_NONE;
    }
    n.axis = ndims;
    n.fval = eps;
    return build(g, &n);
}

rj_node rj_graph_layer_norm(rj_graph *g, rj_node x, int ndims, rj_node weight, rj_node bias,
                            double eps) {
    return norm(g, RJ_OP_LAYER_NORM, x, ndims, weight, bias, eps < 0 ? 1e-5 : eps);
}

rj_node rj_graph_rms_norm(rj_graph *g, rj_node x, int ndims, rj_node weight, double eps) {
    /* eps < 0 is resolved to the dtype's epsilon once the dtype is known (lowering) */
    return norm(g, RJ_OP_RMS_NORM, x, ndims, weight, RJ_NONE, eps < 0 ? -1.0 : eps);
}

rj_node rj_graph_pad(rj_graph *g, rj_node x, double value, rj_dim len) {
    if (!g || !operands_ok(g, "pad", &x, 1)) return RJ_NONE;
    if (len != RJ_DIM_NONE && !graph_is_valid_dim(g, len)) {
        graph_fail(g, RJ_ERR_ARG, "pad: len is not a constant or a symbol of this graph");
        return RJ_NONE;
    }
    node n = make(RJ_OP_PAD, 1, x, -1, -1);
    n.fval = value;
    n.ival = len;
    return build(g, &n);
}

static rj_node unpad(rj_graph *g, rj_node p, rj_dim ragged, bool blocks) {
    if (!g || !operands_ok(g, "unpad", &p, 1)) return RJ_NONE;
    node n = make(RJ_OP_UNPAD, 1, p, -1, -1);
    n.ival = ragged;
    n.keepdim = blocks;
    return build(g, &n);
}

rj_node rj_graph_unpad(rj_graph *g, rj_node p, rj_dim ragged) { return unpad(g, p, ragged, false); }
rj_node rj_graph_unpad_blocks(rj_graph *g, rj_node p, rj_dim ragged) { return unpad(g, p, ragged, true); }

/* ---- index ops and views ------------------------------------------------------------------- */

static rj_node index_op(rj_graph *g, rj_op op, rj_node x, rj_node idx, int dim) {
    if (!g || !operands_ok(g, op_table[op].name, (rj_node[]){x, idx}, 2)) return RJ_NONE;
    node n = make(op, 2, x, idx, -1);
    n.axis = dim;
    return build(g, &n);
}

rj_node rj_graph_embedding(rj_graph *g, rj_node table, rj_node idx) {
    return index_op(g, RJ_OP_EMBEDDING, table, idx, 0);
}

rj_node rj_graph_gather(rj_graph *g, rj_node x, int dim, rj_node index) {
    return index_op(g, RJ_OP_GATHER, x, index, dim);
}

rj_node rj_graph_take_along_dim(rj_graph *g, rj_node x, rj_node index, int dim) {
    return index_op(g, RJ_OP_TAKE_ALONG_DIM, x, index, dim);
}

rj_node rj_graph_index_select(rj_graph *g, rj_node x, int dim, rj_node index) {
    return index_op(g, RJ_OP_INDEX_SELECT, x, index, dim);
}

/* arange and full: the shape is the node's; the value kept as a double and, for integer and
 * bool dtypes, converted once here as a cast converts. */
static rj_node constant_node(rj_graph *g, rj_op op, int rank, const rj_dim *dims, double value,
                                rj_dtype dtype) {
    if (!g) return RJ_NONE;
    const char *name = op == RJ_OP_ARANGE ? "arange" : "full";
    if (rank < 0 || rank > RJ_MAX_RANK || (rank && !dims)) {
        graph_fail(g, RJ_ERR_ARG, "%s: rank %d is not 0..%d (or dims is NULL)", name, rank, RJ_MAX_RANK);
        return RJ_NONE;
    }
    for (int k = 0; k < rank; k++)
        if (dims[k] == RJ_DIM_NONE) {
            graph_fail(g, RJ_ERR_ARG, "%s: dim %d of the shape is RJ_DIM_NONE", name, k);
            return RJ_NONE;
        }
    node n = make(op, 0, -1, -1, -1);
    n.rank = (uint8_t)rank;
    if (rank) memcpy(n.dims, dims, sizeof(rj_dim) * (size_t)rank);
    n.axis = (int32_t)dtype;
    n.fval = value;
    n.ival = dtype == RJ_BOOL ? value != 0 : (unsigned)dtype < RJ_DTYPE_COUNT && dtype_is_int(dtype) ? cast_float_to_int(value, dtype) : 0;
    if (op == RJ_OP_FULL && dtype_is_float(dtype)) n.fval = dtype == RJ_F32 ? (double)(float)value : value;
    return build(g, &n);
}

rj_node rj_graph_positions(rj_graph *g, rj_dim ragged) {
    if (!g) return RJ_NONE;
    node n = make(RJ_OP_POSITIONS, 0, -1, -1, -1);
    n.ival = ragged;
    return build(g, &n);
}

rj_node rj_graph_arange(rj_graph *g, rj_dim n, rj_dtype dtype) {
    return constant_node(g, RJ_OP_ARANGE, 1, &n, 0, dtype);
}

rj_node rj_graph_full(rj_graph *g, int rank, const rj_dim *dims, double value, rj_dtype dtype) {
    return constant_node(g, RJ_OP_FULL, rank, dims, value, dtype);
}

rj_node rj_graph_reshape(rj_graph *g, rj_node x, int rank, const rj_dim *dims) {
    if (!g || !operands_ok(g, "reshape", &x, 1)) return RJ_NONE;
    if (rank < 0 || rank > RJ_MAX_RANK || (rank && !dims)) {
        graph_fail(g, RJ_ERR_ARG, "reshape: rank %d is not 0..%d (or dims is NULL)", rank, RJ_MAX_RANK);
        return RJ_NONE;
    }
    node n = make(RJ_OP_RESHAPE, 1, x, -1, -1);
    n.rank = (uint8_t)rank;
    const node *xn = &g->nodes[x];
    int infer_at = -1;
    for (int k = 0; k < rank; k++) {
        n.dims[k] = dims[k];
        if (dims[k] != RJ_DIM_NONE) continue;
        if (infer_at >= 0) {
            graph_fail(g, RJ_ERR_ARG, "reshape: only one dim can be -1");
            return RJ_NONE;
        }
        infer_at = k;
    }
    if (infer_at >= 0) { /* -1: the constant that makes the counts agree */
        int keep = dim_ragged_pos(g, xn) >= 0 ? 2 : 0;
        int64_t have = 1, want = 1;
        bool consts = true;
        for (int k = keep; k < xn->rank; k++) consts &= xn->dims[k] >= 0, want *= xn->dims[k] >= 0 ? xn->dims[k] : 1;
        for (int k = keep; k < rank; k++) {
            if (k == infer_at) continue;
            consts &= n.dims[k] >= 0;
            if (n.dims[k] > 0 && have > want / n.dims[k]) have = 0; /* more than the input has */
            else have *= n.dims[k] >= 0 ? n.dims[k] : 1;
        }
        if (!consts || infer_at < keep || have == 0 || want % have) {
            graph_fail(g, RJ_ERR_SHAPE, "reshape: -1 cannot be inferred here (it needs constant sizes after the %s "
                       "that divide the input's)", keep ? "ragged dim" : "start");
            return RJ_NONE;
        }
        n.dims[infer_at] = want / have;
    }
    return build(g, &n);
}

rj_node rj_graph_unsqueeze(rj_graph *g, rj_node x, int dim) {
    if (!g || !operands_ok(g, "unsqueeze", &x, 1)) return RJ_NONE;
    const node *xn = &g->nodes[x];
    int r = xn->rank;
    if (dim < -(r + 1) || dim > r || r + 1 > RJ_MAX_RANK) {
        graph_fail(g, RJ_ERR_SHAPE, "unsqueeze: dim %d is out of range for rank %d", dim, r);
        return RJ_NONE;
    }
    if (dim < 0) dim += r + 1;
    rj_dim d[RJ_MAX_RANK];
    for (int k = 0, j = 0; k <= r; k++) d[k] = k == dim ? 1 : xn->dims[j++];
    return rj_graph_reshape(g, x, r + 1, d);
}

rj_node rj_graph_squeeze(rj_graph *g, rj_node x, int dim) {
    if (!g || !operands_ok(g, "squeeze", &x, 1)) return RJ_NONE;
    const node *xn = &g->nodes[x];
    int r = xn->rank;
    if (dim < -r || dim >= r) {
        graph_fail(g, RJ_ERR_SHAPE, "squeeze: dim %d is out of range for rank %d", dim, r);
        return RJ_NONE;
    }
    if (dim < 0) dim += r;
    if (xn->dims[dim] != 1) return x; /* as PyTorch: nothing to squeeze */
    rj_dim d[RJ_MAX_RANK];
    for (int k = 0, j = 0; k < r; k++)
        if (k != dim) d[j++] = xn->dims[k];
    return rj_graph_reshape(g, x, r - 1, d);
}

/* ---- matrix products ----------------------------------------------------------------------- */

static rj_node matmul(rj_graph *g, rj_node x, rj_node w, bool weight_nk) {
    if (!g || !operands_ok(g, weight_nk ? "linear" : "matmul", (rj_node[]){x, w}, 2)) return RJ_NONE;
    node n = make(RJ_OP_MATMUL, 2, x, w, -1);
    n.ival = weight_nk;
    return build(g, &n);
}

rj_node rj_graph_matmul(rj_graph *g, rj_node x, rj_node w) { return matmul(g, x, w, false); }

/* F.linear. With a bias and a 16-bit result, the product and the bias meet in f32 and the sum
 * is rounded once, as PyTorch's addmm does: the product rounded to 16 bits first and then the
 * sum would round twice. (The nodes of the plain form stay behind unused, as any dead value.) */
rj_node rj_graph_linear(rj_graph *g, rj_node x, rj_node weight, rj_node bias) {
    rj_node y = matmul(g, x, weight, true);
    if (y == RJ_NONE || bias == RJ_NONE) return y;
    rj_node sum = rj_graph_binary(g, RJ_OP_ADD, y, bias);
    if (sum == RJ_NONE || !dtype_is_half(g->nodes[y].dtype)) return sum;
    rj_dtype t = g->nodes[sum].dtype;
    rj_node y32 = matmul(g, rj_graph_cast(g, x, RJ_F32), rj_graph_cast(g, weight, RJ_F32), true);
    return rj_graph_cast(g, rj_graph_binary(g, RJ_OP_ADD, y32, bias), t);
}

/* softmax(scores, dim=-1) @ v as one op; ival: 1 for the safe softmax (a row of -inf gives 0) */
rj_node rj_graph_attention(rj_graph *g, rj_node scores, rj_node v, bool safe) {
    if (!g || !operands_ok(g, "attention", (rj_node[]){scores, v}, 2)) return RJ_NONE;
    node n = make(RJ_OP_ATTENTION, 2, scores, v, -1);
    n.ival = safe;
    return build(g, &n);
}

rj_node rj_graph_narrow(rj_graph *g, rj_node x, int dim, int64_t start, int64_t length) {
    if (!g || !operands_ok(g, "narrow", &x, 1)) return RJ_NONE;
    if (length < 0 || length > ((int64_t)1 << 53))
        return graph_fail(g, RJ_ERR_ARG, "narrow: length %lld is %s", (long long)length,
                          length < 0 ? "negative" : "out of range"), RJ_NONE;
    node n = make(RJ_OP_NARROW, 1, x, -1, -1);
    n.axis = dim;
    n.ival = start;
    n.fval = (double)length; /* the length until infer_narrow makes it the dim's size */
    return build(g, &n);
}

rj_node rj_graph_transpose(rj_graph *g, rj_node x, int dim0, int dim1) {
    if (!g || !operands_ok(g, "transpose", &x, 1)) return RJ_NONE;
    node n = make(RJ_OP_TRANSPOSE, 1, x, -1, -1);
    n.axis = dim0;
    n.ival = dim1;
    return build(g, &n);
}

/* permute(x, perm): a chain of transposes that puts dim perm[k] of x at k. A jagged tensor
 * keeps its batch dim in place, and its ragged dim too but for heads (4 dims or more). */
rj_node rj_graph_permute(rj_graph *g, rj_node x, int rank, const int *perm) {
    if (!g || !operands_ok(g, "permute", &x, 1)) return RJ_NONE;
    const node *xn = &g->nodes[x];
    int r = xn->rank, p[RJ_MAX_RANK];
    bool seen[RJ_MAX_RANK] = {false};
    if (rank != r || (rank && !perm)) {
        graph_fail(g, RJ_ERR_SHAPE, "permute: %d dims given for a tensor of %d dims", rank, r);
        return RJ_NONE;
    }
    for (int k = 0; k < r; k++) {
        p[k] = perm[k] < 0 ? perm[k] + r : perm[k];
        if (p[k] < 0 || p[k] >= r || seen[p[k]]) {
            graph_fail(g, RJ_ERR_SHAPE, "permute: dim %d %s", perm[k],
                       p[k] < 0 || p[k] >= r ? "is out of range" : "appears twice (perm must name every dim once)");
            return RJ_NONE;
        }
        seen[p[k]] = true;
    }
    /* heads: a jagged tensor of 4 dims or more may move its ragged dim among the others
     * (x.view(B, j, H, D).permute(0, 2, 1, 3)); the transposes say which layouts this version takes */
    int rp = dim_ragged_pos(g, xn), keep = r >= 4 ? (rp >= 0 ? 0 : -1) : rp;
    for (int k = 0; k <= keep; k++)
        if (p[k] != k) {
            graph_fail(g, RJ_ERR_UNSUPPORTED, "permute: dim %d of the jagged tensor must stay in place (a jagged "
                       "tensor permutes only the dims after its ragged dim %d)", k, rp);
            return RJ_NONE;
        }
    /* cur[k]: which dim of x is at k now; swap the wanted one into place, left to right */
    int cur[RJ_MAX_RANK];
    for (int k = 0; k < r; k++) cur[k] = k;
    rj_node y = x;
    for (int k = 0; k < r && y != RJ_NONE; k++) {
        int at = k;
        while (cur[at] != p[k]) at++;
        if (at == k) continue;
        y = rj_graph_transpose(g, y, k, at);
        int t = cur[k];
        cur[k] = cur[at], cur[at] = t;
    }
    return y;
}

/* ---- concatenation -------------------------------------------------------------------------
 * A node has at most three operands, so cat of n tensors is a chain of binary cats, each
 * joining the next operand to what came before. Every operand is checked against the first
 * here, where the user's numbering is known, so a message names the operands as given. */

rj_node rj_graph_cat(rj_graph *g, const rj_node *xs, int n, int dim) {
    if (!g) return RJ_NONE;
    if (n < 1 || !xs) {
        graph_fail(g, RJ_ERR_ARG, "cat: expected a non-empty list of tensors");
        return RJ_NONE;
    }
    if (!operands_ok(g, "cat", xs, n)) return RJ_NONE;
    int axis = dim;
    for (int i = 1; i < n; i++) {
        axis = dim;
        if (cat_check(g, &g->nodes[xs[0]], &g->nodes[xs[i]], 1, i + 1, &axis)) return RJ_NONE;
    }
    if (n == 1) {
        node t = g->nodes[xs[0]];
        if (t.weak || t.rank == 0) {
            graph_fail(g, RJ_ERR_SHAPE, "cat: operand 1 is %s: cat joins tensors of at least one dim",
                       t.weak ? "a literal" : "a 0-dim tensor");
            return RJ_NONE;
        }
        if (cat_check(g, &t, &t, 1, 1, &axis)) return RJ_NONE;
        return xs[0];
    }
    rj_node r = xs[0];
    for (int i = 1; i < n && r != RJ_NONE; i++) {
        node c = make(RJ_OP_CAT, 2, r, xs[i], -1);
        c.axis = axis;
        r = build(g, &c);
    }
    return r;
}

rj_node rj_graph_stack(rj_graph *g, const rj_node *xs, int n, int dim) {
    if (!g) return RJ_NONE;
    if (n < 1 || !xs || n > 64) {
        graph_fail(g, RJ_ERR_ARG, "stack: expected a list of 1 to 64 tensors");
        return RJ_NONE;
    }
    if (!operands_ok(g, "stack", xs, n)) return RJ_NONE;
    rj_node u[64];
    int r = g->nodes[xs[0]].rank;
    if (dim < -(r + 1) || dim > r) {
        graph_fail(g, RJ_ERR_SHAPE, "stack: dim %d is out of range for %d-dim tensors (a new dim goes at -%d..%d)",
                   dim, r, r + 1, r);
        return RJ_NONE;
    }
    if (dim < 0) dim += r + 1;
    int rp = dim_ragged_pos(g, &g->nodes[xs[0]]);
    if (rp >= 0 && dim <= rp) {
        graph_fail(g, RJ_ERR_UNSUPPORTED, "stack: dim %d: a jagged tensor stacks along a new dim after its "
                   "ragged dim %d", dim, rp);
        return RJ_NONE;
    }
    for (int i = 0; i < n; i++) {
        u[i] = rj_graph_unsqueeze(g, xs[i], dim);
        if (u[i] == RJ_NONE) return RJ_NONE;
    }
    return rj_graph_cat(g, u, n, dim);
}
