/*
 * parse_names.c — what the statements, the grammar and the calls of the text format share:
 * its one namespace (variables, and the inputs, outputs and sizes whose names it shares), dims
 * and dtypes as written in types, and a parsed value as a node of the graph.
 *
 * The bottom of the parser: it calls only the lexer (parse_lex.c) and the graph builder, so
 * statements (parse.c) call expressions (parse_expr.c), which call the function table
 * (parse_call.c), and every one of them calls down here, never back up.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

void warn_at(parser *P, const token *t, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbuf_printf(&P->warn, "%s:%d:%d: warning: %s\n", P->file, t->line, t->col, msg);
}

/* ---- variables ---------------------------------------------------------------------------- */

var *find_var(parser *P, const char *name) {
    int32_t i = strmap_get(&P->var_index, name);
    return i >= 0 ? &P->vars[i] : NULL;
}

void set_var(parser *P, const token *t, const char *name, rj_node n) {
    var *v = find_var(P, name);
    if (v) {
        v->node = n;
        v->dtype = -1;
        return;
    }
    if (!mem_grow(P->ctx, (void **)&P->vars, &P->capvars, P->nvars + 1, sizeof(var)) ||
        !strmap_put(&P->var_index, name, P->nvars)) {
        fail_at(P, t, RJ_ERR_NOMEM, "out of memory");
        return;
    }
    v = &P->vars[P->nvars++];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->node = n;
    v->dtype = -1;
    v->decl = *t;
}

void set_dtype_var(parser *P, const token *t, const char *name, rj_dtype dt) {
    set_var(P, t, name, RJ_NONE);
    var *v = P->failed ? NULL : find_var(P, name);
    if (v) v->dtype = (int)dt;
}

/* What already uses `name`, as a phrase for messages, or NULL. Inputs, outputs, values,
 * ragged symbols and dense sizes share one namespace, since `ragjit run` gives each a file
 * named after it in the same directory: an input named like a symbol would read, and an
 * output write, the symbol's offsets. (Output names are variable names here.) */
const char *name_user(parser *P, const char *name) {
    var *v = find_var(P, name);
    if (v) {
        const node *n = graph_node(P->g, v->node);
        return n && n->op == RJ_OP_INPUT && n->name && !strcmp(n->name, name) ? "an input"
                                                                               : "a value";
    }
    const sym *sy = graph_sym(P->g, rj_graph_find_dim(P->g, name));
    if (sy) return sy->kind == SYM_RAGGED ? "a ragged symbol" : "a dense size";
    return NULL;
}

/* A name about to be given to a new input, value or symbol: not a literal's keyword (an input
 * named inf could never be read: inf is a number wherever it appears) and, unless it may be
 * reassigned (a value), not used already. False after reporting at t. */
bool new_name(parser *P, const token *t, const char *name, bool reassign) {
    static const char *const reserved[] = {"True", "False", "None", "inf", "nan"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (!strcmp(name, reserved[i])) {
            fail_at(P, t, RJ_ERR_PARSE, "'%s' is a reserved name", name);
            return false;
        }
    const char *user = name_user(P, name);
    if (user && !(reassign && find_var(P, name))) {
        fail_at(P, t, RJ_ERR_PARSE, "the name '%s' is already used by %s (inputs, outputs, "
                "values and sizes share one namespace)", name, user);
        return false;
    }
    return true;
}

/* ---- types and dims ------------------------------------------------------------------------ */

/* dim = INT | IDENT      (a name that is not a ragged symbol is a dense size) */
rj_dim parse_dim(parser *P) {
    token t = P->tok;
    if (t.kind == T_INT) {
        lex_next(P);
        if (t.ival < 0) fail_at(P, &t, RJ_ERR_PARSE, "a dim must not be negative");
        return t.ival;
    }
    char name[128];
    if (!lex_ident(P, name, sizeof name, "a dim (a number or a size name)")) return RJ_DIM_NONE;
    rj_dim d = rj_graph_find_dim(P->g, name);
    if (d != RJ_DIM_NONE) return d;
    if (!new_name(P, &t, name, false)) return RJ_DIM_NONE;
    /* a new dense size, declared by this use: a ragged symbol's name never declared (j2, as
     * PyTorch's nested tensors print them) or a typo of a declared one would silently make the
     * tensor dense there */
    bool looks_ragged = name[0] == 'j' && name[1];
    for (const char *c = name + 1; *c; c++) looks_ragged &= is_digit(*c);
    const char *parent = "B";
    for (int32_t s = 0; s < P->g->nsym; s++)
        if (P->g->syms[s].kind == SYM_RAGGED) {
            parent = P->g->syms[P->g->syms[s].parent].name;
            break;
        }
    if (looks_ragged)
        warn_at(P, &t, "'%s' declares a new dense size here (a name is one unless declared ragged); if its length "
                "varies by item, declare `ragged %s : %s` before this line", name, name, parent);
    for (int32_t s = 0; s < P->g->nsym && strlen(name) >= 2 && !looks_ragged; s++) /* (one letter: L is no typo of j) */
        if (P->g->syms[s].kind == SYM_RAGGED && strlen(P->g->syms[s].name) >= 2 &&
            edit_distance(name, P->g->syms[s].name) == 1) {
            warn_at(P, &t, "'%s' declares a new dense size here (sizes are declared by their first use); did "
                    "you mean the ragged symbol '%s'?", name, P->g->syms[s].name);
            break;
        }
    if ((d = rj_graph_dense(P->g, name)) == RJ_DIM_NONE) fail_builder(P, &t);
    return d;
}

/* A dtype given as a value: a string ("f16", "float16") or PyTorch's torch.float16 (a string
 * value too, made by the expression parser from the name after `torch.`). */
bool dtype_value(const value *v, rj_dtype *out) {
    char name[16] = "";
    if (!v || !v->is_string || v->slen >= (int)sizeof name) return false;
    memcpy(name, v->str, (size_t)v->slen);
    return parse_dtype_name(name, out);
}

value dtype_as_value(rj_dtype dt, token at) {
    const char *name = rj_dtype_name(dt); /* static: the value's text outlives the source */
    return (value){.node = RJ_NONE, .is_string = true, .str = name, .slen = (int)strlen(name), .at = at};
}

bool parse_dtype_name(const char *s, rj_dtype *out) {
    static const struct {
        const char *name;
        rj_dtype t;
    } names[] = {{"f32", RJ_F32}, {"f64", RJ_F64}, {"i32", RJ_I32}, {"i64", RJ_I64},
                 {"bool", RJ_BOOL}, {"float32", RJ_F32}, {"float64", RJ_F64},
                 {"int32", RJ_I32}, {"int64", RJ_I64}, {"float", RJ_F32}, {"double", RJ_F64},
                 {"f16", RJ_F16}, {"float16", RJ_F16}, {"half", RJ_F16}, {"bf16", RJ_BF16},
                 {"bfloat16", RJ_BF16}, {"int", RJ_I32}, {"long", RJ_I64}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].name, s)) {
            *out = names[i].t;
            return true;
        }
    return false;
}

/* ---- values --------------------------------------------------------------------------------- */

rj_node as_node(parser *P, const value *v) {
    if (P->failed) return RJ_NONE;
    if (v->is_size) {
        const sym *sy = graph_sym(P->g, v->dims[0]);
        if (sy && sy->kind == SYM_RAGGED)
            fail_at(P, &v->at, RJ_ERR_PARSE, "%s is a ragged symbol (its length varies by item), not a tensor: "
                    "positions(%s) gives each row's index, and mean(...) divides by the lengths", sy->name, sy->name);
        else
            fail_at(P, &v->at, RJ_ERR_PARSE, "the size %s is known only at run time and is not a tensor: sizes go in "
                    "shapes, pad's len and normalized_shape; to compute with a size, declare that dim as a number "
                    "(f32[B, j1, 64]), and mean(...) divides by a count", sy ? sy->name : "?");
        return RJ_NONE;
    }
    if (v->is_pieces) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "the %d tensors of a split or chunk are not one tensor: assign them to as "
                "many names (a, b = x.split(...)) or take one (x.split(...)[0])", (int)v->npieces);
        return RJ_NONE;
    }
    if (v->is_string || v->is_list || v->is_none || v->is_tuple || v->info) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s is not a tensor",
                v->is_none ? "None" : v->is_string ? "a string" : v->is_tuple ? "a tuple"
                : v->info ? "a type's limits (take .min, .max, .eps or .tiny of them)" : "a list");
        return RJ_NONE;
    }
    return v->node;
}

rj_node built(parser *P, rj_node n, const token *t) {
    if (n == RJ_NONE) fail_builder(P, t);
    return n;
}

const node *scalar_of(parser *P, const value *v) {
    const node *n = v->node >= 0 && !v->is_list ? graph_node(P->g, v->node) : NULL;
    return n && n->op == RJ_OP_SCALAR ? n : NULL;
}

/* ---- arguments and results of the function table's handlers (parse_call.c, parse_views.c) --- */

/* An integer argument: an integer literal (not a float, not a bool: PyTorch refuses both for
 * dims and sizes) within lo..hi. Messages name the function, the argument and the value. */
bool int_arg(parser *P, const char *fname, const char *arg, const value *v, int64_t lo,
             int64_t hi, int64_t *out) {
    const node *n = scalar_of(P, v);
    if (!n || n->weak != WEAK_INT) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be an integer", fname, arg);
        return false;
    }
    if (n->ival < lo || n->ival > hi) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s=%lld is %s", fname, arg, (long long)n->ival,
                n->ival < 0 && lo == 0 ? "negative" : "out of range");
        return false;
    }
    *out = n->ival;
    return true;
}

bool is_none(const value *v) { return v && v->is_none; }


/* A handler's result: the node n made at the call, reported there if the builder failed. */
value made(parser *P, const call_site *c, rj_node n) {
    return node_value(built(P, n, c->fn), *c->fn);
}

/* A handler's result after an error has been reported. */
value nothing(const call_site *c) {
    return node_value(RJ_NONE, *c->fn);
}
