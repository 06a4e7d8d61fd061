/*
 * parse.c — the text format: its statements, the names they declare, and rj_graph_parse.
 *
 * The language is a few statements over Python-like expressions (parse_expr.c):
 *
 *     # comment
 *     ragged j1 : B                 declares a ragged symbol varying over B
 *     same j1 j2                    declares two ragged symbols equal
 *     input x : f32[B, j1, 64]      an input with its type (dense size names are declared on use)
 *     h = relu(x * w + 0.5)         an assignment: any expression
 *     q, k, v = h.split(64, dim=2)  the tensors of a split or chunk, one name each
 *     output h, s                   the outputs, by variable name
 *
 * One statement a line. The parser builds the graph as it goes, so an error the builder finds
 * is reported where the text caused it: at the operator or call of an expression, or at the
 * name a statement declares. Names of inputs, values and symbols share one namespace with
 * outputs (parse_names.c: name_user, new_name); a clash is reported at the statement that makes it, and
 * literal keywords are reserved. A dense size is declared by its first use in a type, so a
 * typo of a ragged symbol would silently be a new size: such names get a warning, as do
 * ragged symbols and inputs that nothing uses.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

static bool tok_is(const token *t, const char *word) {
    return t->kind == T_IDENT && (int)strlen(word) == t->len && !strncmp(t->start, word, (size_t)t->len);
}

/* type = DTYPE "[" [ dim { "," dim } ] "]" */
static bool parse_type(parser *P, rj_dtype *dt, int *rank, rj_dim *dims) {
    token t = P->tok;
    char name[32];
    if (!lex_ident(P, name, sizeof name, "a type such as f32[B, j1, 64]")) return false;
    if (!parse_dtype_name(name, dt)) {
        fail_at(P, &t, RJ_ERR_PARSE, "unknown dtype '%s' (f32, f64, f16, bf16, i32, i64, bool)", name);
        return false;
    }
    if (!lex_expect(P, T_LBRACK, "'[' after the dtype")) return false;
    *rank = 0;
    while (!P->failed && P->tok.kind != T_RBRACK) {
        if (*rank == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "more than %d dims", RJ_MAX_RANK);
            return false;
        }
        dims[(*rank)++] = parse_dim(P);
        if (P->tok.kind != T_RBRACK && !lex_expect(P, T_COMMA, "',' or ']'")) return false;
    }
    return lex_expect(P, T_RBRACK, "']'");
}

/* ---- statements ------------------------------------------------------------------------------ */

/* ragged_stmt = "ragged" IDENT ":" IDENT */
static void parse_ragged(parser *P) {
    char name[128], parent[128];
    token t = P->tok;
    if (!lex_ident(P, name, sizeof name, "the ragged symbol's name")) return;
    /* a symbol declared again is the builder's to judge (same parent: fine) */
    if (rj_graph_find_dim(P->g, name) == RJ_DIM_NONE && !new_name(P, &t, name, false)) return;
    if (!lex_expect(P, T_COLON, "':' and the dim it varies over (ragged j1 : B)")) return;
    token pt = P->tok;
    if (!lex_ident(P, parent, sizeof parent, "the dim the ragged symbol varies over")) return;
    rj_dim pd = rj_graph_find_dim(P->g, parent);
    if (pd == RJ_DIM_NONE && !new_name(P, &pt, parent, false)) return;
    if (pd == RJ_DIM_NONE) pd = rj_graph_dense(P->g, parent);
    if (pd == RJ_DIM_NONE) {
        fail_builder(P, &pt);
        return;
    }
    rj_dim rd = rj_graph_ragged(P->g, name, pd);
    if (rd == RJ_DIM_NONE) {
        fail_builder(P, &t);
        return;
    }
    if (P->nrag < 64) P->rag_at[P->nrag] = t, P->rag_sym[P->nrag++] = dim_sym(rd);
}

/* same_stmt = "same" IDENT IDENT */
static void parse_same(parser *P) {
    token t1 = P->tok;
    char a[128], b[128];
    if (!lex_ident(P, a, sizeof a, "a ragged symbol")) return;
    token t2 = P->tok;
    if (!lex_ident(P, b, sizeof b, "a second ragged symbol")) return;
    rj_dim da = rj_graph_find_dim(P->g, a), db = rj_graph_find_dim(P->g, b);
    if (da == RJ_DIM_NONE || db == RJ_DIM_NONE) {
        const token *t = da == RJ_DIM_NONE ? &t1 : &t2;
        const char *nm = da == RJ_DIM_NONE ? a : b, *user = name_user(P, nm);
        if (user) fail_at(P, t, RJ_ERR_PARSE, "'%s' is %s, not a ragged symbol", nm, user);
        else fail_at(P, t, RJ_ERR_PARSE, "undefined ragged symbol '%s'", nm);
        return;
    }
    if (rj_graph_same(P->g, da, db) != RJ_OK) fail_builder(P, &t1);
}

/* input_stmt = "input" IDENT ":" type */
static void parse_input(parser *P) {
    char name[128];
    token t = P->tok;
    if (!lex_ident(P, name, sizeof name, "the input's name") || !new_name(P, &t, name, false)) return;
    if (!lex_expect(P, T_COLON, "':' and the input's type (input x : f32[B, j1, 64])")) return;
    rj_dtype dt;
    int rank;
    rj_dim dims[RJ_MAX_RANK];
    if (!parse_type(P, &dt, &rank, dims)) return;
    rj_node n = rj_graph_input(P->g, name, dt, rank, dims);
    if (n == RJ_NONE) fail_builder(P, &t);
    else set_var(P, &t, name, n);
}

/* output_stmt = "output" IDENT { "," IDENT } */
static void parse_output(parser *P) {
    do {
        token t = P->tok;
        char name[128];
        if (!lex_ident(P, name, sizeof name, "an output's name")) return;
        var *v = find_var(P, name);
        if (!v) {
            fail_at(P, &t, RJ_ERR_PARSE, "undefined name '%s'", name);
            return;
        }
        if (v->dtype >= 0) {
            fail_at(P, &t, RJ_ERR_PARSE, "'%s' is a dtype, not a tensor", name);
            return;
        }
        rj_node n = v->node;
        const node *lit = graph_node(P->g, n);
        if (lit && lit->op == RJ_OP_SCALAR) { /* y = 2 * 1, a number as Python computed it: a 0-d tensor */
            double val = lit->weak == WEAK_FLOAT ? lit->fval : (double)lit->ival;
            rj_dtype dt = lit->weak == WEAK_FLOAT ? RJ_F32 : lit->weak == WEAK_BOOL ? RJ_BOOL : RJ_I64;
            if (lit->weak == WEAK_INT && (lit->ival > (int64_t)1 << 53 || lit->ival < -((int64_t)1 << 53))) {
                fail_at(P, &t, RJ_ERR_ARG, "output: the integer %lld is beyond 2^53, which a constant output cannot hold",
                        (long long)lit->ival);
                return;
            }
            if ((n = rj_graph_full(P->g, 0, NULL, val, dt)) == RJ_NONE) {
                fail_builder(P, &t);
                return;
            }
            v->node = n;
        }
        for (int32_t i = 0; i < P->g->noutputs; i++)
            if (P->g->outputs[i].node == n) {
                /* y = z, output y, z: the graph has one output per node (the C API names
                 * outputs by node), so one name gets a node of its own: a cast to the same
                 * dtype, which canonicalisation folds away, leaving the compiled program two
                 * outputs of one value, each written in full */
                rj_node copy = rj_graph_cast(P->g, n, rj_node_dtype(P->g, n));
                if (copy == RJ_NONE) {
                    fail_builder(P, &t);
                    return;
                }
                const node *nd = graph_node(P->g, n);
                if (nd->op == RJ_OP_INPUT && !strcmp(nd->name, name)) /* an input keeps its own name */
                    P->g->outputs[i].node = copy;
                else
                    n = copy;
                break;
            }
        if (rj_graph_output(P->g, n, name) != RJ_OK) {
            fail_builder(P, &t);
            return;
        }
    } while (P->tok.kind == T_COMMA && (lex_next(P), !P->failed));
}

/* The variable `name` (declared at t) for node n; the name also labels the node in dumps. */
static void assign(parser *P, const token *t, const char *name, rj_node n) {
    node *nd = graph_node(P->g, n);
    /* a function's locals label nothing: every call would give its nodes the same names */
    if (nd && !P->calls && !nd->name && nd->op != RJ_OP_SCALAR && !(nd->name = mem_strdup(P->ctx, name))) {
        fail_at(P, t, RJ_ERR_NOMEM, "out of memory");
        return;
    }
    set_var(P, t, name, n);
}

enum { MAX_TARGETS = 64 };

/* assignment = IDENT { "," IDENT } "=" expr   (several names take apart the tensors of a split
 * or chunk, as Python unpacks a tuple: q, k, v = qkv.split(384, dim=2)) */
static void parse_assignment(parser *P) {
    token names[MAX_TARGETS];
    int n = 0;
    char name[128];
    do {
        if (n > 0) lex_next(P); /* ',' */
        if (n == MAX_TARGETS) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "too many names on the left of '=' (at most %d)", MAX_TARGETS);
            return;
        }
        names[n] = P->tok;
        if (!lex_ident(P, name, sizeof name, n ? "a name after ','" :
                       "a statement (ragged, same, input, output or an assignment)"))
            return;
        n++;
    } while (P->tok.kind == T_COMMA);
    if (P->tok.kind != T_ASSIGN) {
        char got[80];
        tok_text(&P->tok, got, sizeof got);
        fail_at(P, &P->tok, RJ_ERR_PARSE, "expected '=' after '%s', found %s", name, got);
        return;
    }
    for (int i = 0; i < n; i++) {
        char ni[128];
        snprintf(ni, sizeof ni, "%.*s", names[i].len < 127 ? names[i].len : 127, names[i].start);
        if (!new_name(P, &names[i], ni, true)) return;
    }
    lex_next(P);
    value v = parse_expr(P);
    if (P->failed) return;
    rj_dtype dt;
    if (n == 1 && v.is_string && dtype_value(&v, &dt)) { /* input_dtype = x.dtype */
        set_dtype_var(P, &names[0], name, dt);
        return;
    }
    if (n == 1) {
        rj_node x = as_node(P, &v);
        if (!P->failed) assign(P, &names[0], name, x);
        return;
    }
    if (v.has_indices && n == 2) { /* values, indices = x.max(1) */
        rj_node ind = indices_of(P, &names[1], &v);
        for (int i = 0; i < n && !P->failed; i++) {
            snprintf(name, sizeof name, "%.*s", names[i].len < 127 ? names[i].len : 127, names[i].start);
            assign(P, &names[i], name, i ? ind : v.node);
        }
        return;
    }
    if (!v.is_pieces || v.npieces != n) {
        fail_at(P, &names[0], RJ_ERR_PARSE, "%d names on the left of '=', but the right gives %s%d%s", n,
                v.is_pieces ? "" : "one tensor, not ", v.is_pieces ? (int)v.npieces : n,
                v.is_pieces ? " tensors" : " (a split or chunk gives several)");
        return;
    }
    for (int i = 0; i < n && !P->failed; i++) {
        snprintf(name, sizeof name, "%.*s", names[i].len < 127 ? names[i].len : 127, names[i].start);
        assign(P, &names[i], name, P->pieces[v.piece0 + i]);
    }
}

/* statement = ragged_stmt | same_stmt | input_stmt | output_stmt | assignment */
static void parse_statement(parser *P) {
    token t = P->tok;
    P->g->cur_loc = t.line;
    if (tok_is(&t, "ragged") || tok_is(&t, "same") || tok_is(&t, "input") || tok_is(&t, "output") ||
        tok_is(&t, "def")) {
        /* a keyword unless used as a variable name in an assignment ("input = x") */
        const char *q = P->p;
        while (*q == ' ' || *q == '\t') q++;
        if (!(q[0] == '=' && q[1] != '=')) {
            if (P->calls) {
                fail_at(P, &t, RJ_ERR_PARSE, "a function's body holds assignments and its return: '%.*s' belongs "
                        "outside it", t.len, t.start);
                return;
            }
            lex_next(P);
            if (tok_is(&t, "def")) {
                parse_def(P, &t);
                return;
            }
            if (tok_is(&t, "ragged")) parse_ragged(P);
            else if (tok_is(&t, "same")) parse_same(P);
            else if (tok_is(&t, "input")) parse_input(P);
            else parse_output(P);
            return;
        }
    }
    if (t.kind == T_IDENT) { /* a word, then no '=': a misspelt statement keyword? */
        const char *q = t.start + t.len;
        while (*q == ' ' || *q == '\t') q++;
        if (is_ident_start(*q)) {
            char word[64];
            snprintf(word, sizeof word, "%.*s", t.len < 63 ? t.len : 63, t.start);
            suggest s = {.word = word};
            static const char *const keywords[] = {"ragged", "same", "input", "output", "def"};
            for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) suggest_try(&s, keywords[i]);
            char hint[96];
            suggestion(&s, hint, sizeof hint);
            fail_at(P, &t, RJ_ERR_PARSE, "unknown statement '%s'%s: a statement is ragged, same, input, output, "
                    "def, or an assignment (name = expression)", word, hint);
            return;
        }
    }
    parse_assignment(P);
}

/* Warnings for ragged symbols no input uses and for inputs no output uses. */
static void warn_unused(parser *P) {
    for (int i = 0; i < P->nrag; i++) { /* ragged symbols no input uses */
        rj_dim d = sym_dim(P->rag_sym[i]);
        bool used = false;
        for (int32_t k = 0; k < P->g->ninputs && !used; k++) {
            const node *in = &P->g->nodes[P->g->inputs[k]];
            for (int j = 0; j < in->rank; j++) used |= in->dims[j] == d;
        }
        if (!used)
            warn_at(P, &P->rag_at[i], "ragged symbol %s is declared but no input uses it",
                    P->g->syms[P->rag_sym[i]].name);
    }
    for (int32_t k = 0; k < P->g->ninputs; k++) { /* inputs no output uses need no data (bind.c) */
        const node *in = &P->g->nodes[P->g->inputs[k]];
        var *v = rj_graph_input_used(P->g, k) ? NULL : find_var(P, in->name);
        if (v) warn_at(P, &v->decl, "input %s is not used by any output (it needs no data)", in->name);
    }
}

/* program = { [ statement ] NEWLINE } EOF */
rj_graph *rj_graph_parse(rj_ctx *ctx, const char *source, const char *filename) {
    if (!ctx) return NULL;
    if (!source) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_graph_parse: source is NULL");
        return NULL;
    }
    /* token lengths and columns are ints */
    if (strnlen(source, (size_t)INT_MAX) == (size_t)INT_MAX) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_graph_parse: the source is 2 GiB or longer");
        return NULL;
    }
    parser P = {.ctx = ctx, .src = source, .p = source, .line = 1, .line_start = source,
                .file = filename ? filename : "<input>", .run_def = def_run, .statement = parse_statement};
    strmap_init(&P.var_index, ctx);
    sbuf_init(&P.warn, ctx);
    if (!(P.g = rj_graph_new(ctx))) return NULL;
    lex_next(&P);
    while (!P.failed && P.tok.kind != T_EOF) {
        if (P.tok.kind == T_NEWLINE) {
            lex_next(&P);
            continue;
        }
        parse_statement(&P);
        if (!P.failed && P.tok.kind != T_NEWLINE && P.tok.kind != T_EOF) {
            char got[80];
            tok_text(&P.tok, got, sizeof got);
            fail_at(&P, &P.tok, RJ_ERR_PARSE, "expected end of line, found %s", got);
        }
    }
    if (!P.failed && rj_graph_output_count(P.g) == 0) {
        token end = P.tok;
        fail_at(&P, &end, RJ_ERR_PARSE, "the program has no outputs (add: output <name>)");
    }
    if (!P.failed) warn_unused(&P);
    if (!P.failed && P.warn.len) { /* the graph keeps them */
        if (!(P.g->warnings = sbuf_finish(&P.warn))) fail_at(&P, &P.tok, RJ_ERR_NOMEM, "out of memory");
    }
    sbuf_free(&P.warn);
    mem_free(ctx, P.vars, sizeof(var) * (size_t)P.capvars);
    mem_free(ctx, P.pieces, sizeof(rj_node) * (size_t)P.cappieces);
    defs_free(&P);
    strmap_free(&P.var_index);
    P.g->cur_loc = -1;
    if (P.failed) {
        rj_graph_free(P.g);
        return NULL;
    }
    return P.g;
}
