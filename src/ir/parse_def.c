/*
 * parse_def.c — functions in the text format: a layer written once, called many times.
 *
 *     def layer(x, w, b):            def_stmt = "def" IDENT "(" [ IDENT { "," IDENT } ] ")" ":"
 *         h = relu(linear(x, w, b))      then the body: the indented lines below, assignments
 *         return layer_norm(h + x, 64)   ending with "return" expr { "," expr }
 *     y = layer(layer(x, w1, b1), w2, b2)
 *
 * A function is Python's: untyped parameters, the body run at each call with the arguments'
 * values, names assigned in it local to the call (a local may shadow a value of the program,
 * which the body may read), several return values taken apart by a tuple assignment
 * (`h, c = cell(x, h, c)`). The body is kept as text and run again at every call — the graph
 * it builds is the call's, each call's shapes checked where they are used — so a call costs
 * what writing its body out would. Kernels that come out the same in every call are compiled
 * once (the program's kernels are keyed by their structure).
 *
 * The body is only read when a call runs it: an error in it is reported at its line, in the
 * call that reached it. A function calls only functions defined before it, so recursion
 * cannot start; calls nest at most MAX_CALLS deep.
 */
#include <string.h>

#include "parse.h"

enum { MAX_CALLS = 32 };

typedef struct pdef {
    char name[128];
    char params[MAX_ARGS][128];
    int nparams;
    const char *body; /* the start of the body's first line */
    int line;         /* its line number */
    token at;         /* the function's name in its def line */
} pdef;

static pdef *find_def(parser *P, const char *name) {
    for (int32_t i = 0; i < P->ndefs; i++)
        if (!strcmp(P->defs[i].name, name)) return &P->defs[i];
    return NULL;
}

/* The first word of the line at q (after blanks) is `word`. */
static bool line_starts_with(const char *q, const char *word) {
    while (*q == ' ' || *q == '\t') q++;
    size_t n = strlen(word);
    return !strncmp(q, word, n) && !(is_ident_char(q[n]));
}

/* A line of blanks or a comment alone. */
static bool line_empty(const char *q) {
    while (*q == ' ' || *q == '\t' || *q == '\r') q++;
    return !*q || *q == '\n' || *q == '#';
}

static const char *next_line(const char *q) {
    while (*q && *q != '\n') q++;
    return *q ? q + 1 : q;
}

/* def_stmt, after "def" (at kw): the name, the parameters, ':' and the end of the line; then
 * the body's lines are skipped (they run at each call), and the next statement follows. */
void parse_def(parser *P, const token *kw) {
    token at = P->tok;
    char name[128];
    if (!lex_ident(P, name, sizeof name, "the function's name (def name(params):)")) return;
    rj_op op;
    if (call_find(name, &op)) {
        fail_at(P, &at, RJ_ERR_PARSE, "'%s' is one of ragjit's functions: give yours another name", name);
        return;
    }
    if (find_def(P, name)) {
        fail_at(P, &at, RJ_ERR_PARSE, "function '%s' is defined already", name);
        return;
    }
    if (!new_name(P, &at, name, false)) return;
    if (!mem_grow(P->ctx, (void **)&P->defs, &P->capdefs, P->ndefs + 1, sizeof(pdef))) {
        fail_at(P, &at, RJ_ERR_NOMEM, "out of memory");
        return;
    }
    pdef *d = &P->defs[P->ndefs];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->at = at;
    if (!lex_expect(P, T_LPAREN, "'(' and the parameters")) return;
    while (!P->failed && P->tok.kind != T_RPAREN) {
        token pt = P->tok;
        char pn[128];
        if (!lex_ident(P, pn, sizeof pn, "a parameter's name")) return;
        if (d->nparams == MAX_ARGS) {
            fail_at(P, &pt, RJ_ERR_PARSE, "a function takes at most %d parameters", MAX_ARGS);
            return;
        }
        for (int i = 0; i < d->nparams; i++)
            if (!strcmp(d->params[i], pn)) {
                fail_at(P, &pt, RJ_ERR_PARSE, "parameter '%s' appears twice", pn);
                return;
            }
        snprintf(d->params[d->nparams++], sizeof d->params[0], "%s", pn);
        if (P->tok.kind != T_RPAREN && !lex_expect(P, T_COMMA, "',' or ')'")) return;
    }
    if (!lex_expect(P, T_RPAREN, "')'") || !lex_expect(P, T_COLON, "':' after the parameters")) return;
    if (P->tok.kind != T_NEWLINE) {
        fail_at(P, &P->tok, RJ_ERR_PARSE, "the body of a function goes on the lines below its def, indented");
        return;
    }
    /* the body: the indented (and empty) lines that follow, the last of them a return */
    d->body = P->p, d->line = P->line;
    const char *q = P->p, *last = NULL;
    int lines = 0;
    while (*q && (line_empty(q) || *q == ' ' || *q == '\t')) {
        if (!line_empty(q)) last = q;
        q = next_line(q), lines++;
    }
    if (!last || !line_starts_with(last, "return")) {
        fail_at(P, kw, RJ_ERR_PARSE, "def %s: the body (the indented lines below) must end with a return", name);
        return;
    }
    P->ndefs++;
    P->p = q, P->line += lines, P->line_start = q;
    P->tok = (token){.kind = T_NEWLINE, .start = q, .line = P->line, .col = 1};
}

/* The call's arguments bound to the parameters, as Python binds them; false after reporting. */
static bool bind_params(parser *P, const token *fn, const pdef *d, args *a, rj_node *in) {
    if (a->npos > d->nparams) {
        fail_at(P, &a->pos[d->nparams].at, RJ_ERR_PARSE, "%s takes %d arguments, %d given", d->name, d->nparams,
                a->npos + a->nkw);
        return false;
    }
    for (int i = 0; i < d->nparams; i++) in[i] = RJ_NONE;
    for (int i = 0; i < a->npos && !P->failed; i++) in[i] = as_node(P, &a->pos[i]);
    for (int k = 0; k < a->nkw && !P->failed; k++) {
        int i = 0;
        while (i < d->nparams && strcmp(d->params[i], a->key[k])) i++;
        if (i == d->nparams || in[i] != RJ_NONE) {
            fail_at(P, &a->kw[k].at, RJ_ERR_PARSE, i == d->nparams ? "%s has no parameter '%s'"
                    : "%s: argument '%s' given twice", d->name, a->key[k]);
            return false;
        }
        in[i] = as_node(P, &a->kw[k]);
    }
    for (int i = 0; i < d->nparams && !P->failed; i++)
        if (in[i] == RJ_NONE) {
            fail_at(P, fn, RJ_ERR_PARSE, "%s: missing argument '%s'", d->name, d->params[i]);
            return false;
        }
    return !P->failed;
}

/* What a call changes of the parser, restored when the body returns. */
typedef struct saved {
    const char *p, *line_start;
    int line, depth, nest;
    token tok;
    var *vars;
    int32_t nvars;
} saved;

static bool save(parser *P, saved *s) {
    *s = (saved){.p = P->p, .line_start = P->line_start, .line = P->line, .depth = P->depth, .nest = P->nest,
                 .tok = P->tok, .nvars = P->nvars};
    size_t bytes = sizeof(var) * (size_t)(P->nvars ? P->nvars : 1);
    if (!(s->vars = mem_alloc(P->ctx, bytes))) return false;
    if (P->nvars) memcpy(s->vars, P->vars, sizeof(var) * (size_t)P->nvars);
    return true;
}

/* The program's names as they were before the call (its locals gone, shadowed values back). */
static void restore(parser *P, saved *s) {
    P->p = s->p, P->line_start = s->line_start, P->line = s->line, P->depth = s->depth, P->nest = s->nest;
    P->tok = s->tok;
    if (s->nvars) memcpy(P->vars, s->vars, sizeof(var) * (size_t)s->nvars);
    P->nvars = s->nvars;
    strmap_free(&P->var_index);
    strmap_init(&P->var_index, P->ctx);
    for (int32_t i = 0; i < P->nvars; i++)
        if (!strmap_put(&P->var_index, P->vars[i].name, i) && !P->failed)
            fail_at(P, &P->tok, RJ_ERR_NOMEM, "out of memory");
    mem_free(P->ctx, s->vars, sizeof(var) * (size_t)(s->nvars ? s->nvars : 1));
}

/* "return" expr { "," expr }: one value, or several as pieces (a tuple assignment takes them). */
static value parse_return(parser *P, const token *fn) {
    token rt = P->tok;
    lex_next(P);
    rj_node out[MAX_ARGS];
    int n = 0;
    for (;;) {
        value v = parse_expr(P);
        if (P->failed) return node_value(RJ_NONE, *fn);
        if (n == MAX_ARGS) {
            fail_at(P, &rt, RJ_ERR_PARSE, "a function returns at most %d values", MAX_ARGS);
            return node_value(RJ_NONE, *fn);
        }
        out[n++] = as_node(P, &v);
        if (P->tok.kind != T_COMMA) break;
        lex_next(P);
    }
    if (!P->failed && P->tok.kind != T_NEWLINE && P->tok.kind != T_EOF)
        fail_at(P, &P->tok, RJ_ERR_PARSE, "expected end of line after the return");
    if (P->failed) return node_value(RJ_NONE, *fn);
    if (n == 1) return node_value(out[0], *fn);
    value r = {.node = RJ_NONE, .is_pieces = true, .piece0 = P->npieces, .npieces = n, .at = *fn};
    if (!mem_grow(P->ctx, (void **)&P->pieces, &P->cappieces, P->npieces + n, sizeof(rj_node))) {
        fail_at(P, fn, RJ_ERR_NOMEM, "out of memory");
        return node_value(RJ_NONE, *fn);
    }
    memcpy(P->pieces + P->npieces, out, sizeof(rj_node) * (size_t)n);
    P->npieces += n;
    return r;
}

value def_run(parser *P, const token *fn, const char *name, args *a, bool *found) {
    value r = node_value(RJ_NONE, *fn);
    pdef *d = find_def(P, name);
    *found = d != NULL;
    if (!d) return r;
    if (P->calls == MAX_CALLS) {
        fail_at(P, fn, RJ_ERR_PARSE, "%s: calls nest more than %d deep", name, MAX_CALLS);
        return r;
    }
    rj_node in[MAX_ARGS];
    if (!bind_params(P, fn, d, a, in)) return r;
    saved s;
    if (!save(P, &s)) {
        fail_at(P, fn, RJ_ERR_NOMEM, "out of memory");
        return r;
    }
    const pdef body = *d; /* a copy: P->defs does not move while a body runs, but cheaply sure */
    for (int i = 0; i < body.nparams && !P->failed; i++) set_var(P, fn, body.params[i], in[i]);
    const char *outer = P->in_def;
    int outer_line = P->in_def_line;
    P->in_def = d->name, P->in_def_line = fn->line;
    P->calls++;
    P->p = body.body, P->line = body.line, P->line_start = body.body, P->depth = 0, P->nest = 0;
    lex_next(P);
    while (!P->failed) {
        if (P->tok.kind == T_NEWLINE) {
            lex_next(P);
            continue;
        }
        if (P->tok.kind == T_IDENT && P->tok.len == 6 && !strncmp(P->tok.start, "return", 6)) {
            r = parse_return(P, fn);
            break;
        }
        P->statement(P);
        if (!P->failed && P->tok.kind != T_NEWLINE && P->tok.kind != T_EOF) {
            char got[80];
            tok_text(&P->tok, got, sizeof got);
            fail_at(P, &P->tok, RJ_ERR_PARSE, "expected end of line, found %s", got);
        }
    }
    P->calls--;
    P->in_def = outer, P->in_def_line = outer_line;
    restore(P, &s);
    return r;
}

void defs_free(parser *P) {
    mem_free(P->ctx, P->defs, sizeof(pdef) * (size_t)P->capdefs);
    P->defs = NULL, P->ndefs = P->capdefs = 0;
}
