/*
 * parse.c — the text format: a hand-written lexer and recursive-descent parser that drives the
 * graph builder.
 *
 * The language is a few statements over Python-like expressions:
 *
 *     # comment
 *     ragged j1 : B                 declares a ragged symbol varying over B
 *     same j1 j2                    declares two ragged symbols equal
 *     input x : f32[B, j1, 64]      an input with its type (dense size names are declared on use)
 *     h = relu(x * w + 0.5)         an assignment: any expression
 *     output h, s                   the outputs, by variable name
 *
 * Statements end at a newline; inside parentheses and brackets newlines are ignored (as in
 * Python). Expressions have the usual precedence (comparisons < + - < * / < unary -), number
 * literals are Python numbers for dtype promotion (2 is an int, 2.0 and inf are floats),
 * True/False are bools, and calls take positional and keyword arguments with PyTorch's names.
 * Every op of the op table is callable by its name; infix operators map to add, sub, mul, div
 * and the comparisons.
 *
 * Attributes are checked here, where the text still says what the user wrote: an integer
 * argument (a dim, a length, a size) must be an integer literal in range, since a float or a
 * wrapped value would silently mean another dim, and a negative constant would be taken for a
 * symbol's id (rj_dim). Number literals are converted from the whole token, never a prefix.
 * Names of inputs, values and symbols share one namespace with outputs (name_user, new_name);
 * a clash is reported at the statement that makes it, and literal keywords are reserved.
 *
 * The parser builds the graph as it goes, so a shape error found by the builder is reported
 * at the operator or call that caused it. Every error has the form
 *
 *     prog.rj:3:9: add: f32[B, j1, 64] and f32[B, j2, 64] differ in dim 1 (ragged j1 vs j2)
 *       h = x + y
 *             ^
 *
 * Each parse function below carries its grammar rule in a comment.
 *
 * The parser recurses only through expressions (parentheses, call arguments, unary minus),
 * and every such cycle opens a level with nest_in, which stops at PARSE_MAX_NEST levels: a
 * program is data an embedding may not have written, and 1,500 nested parentheses must be a
 * parse error at the offending one, not a stack overflow. A call's arguments live on the heap
 * rather than in the recursing frames, which keeps the stack of the deepest expression allowed
 * under about 1 MiB.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Python's own parser stops at 200 nested parentheses; real programs nest a handful. */
enum { PARSE_MAX_NEST = 256 };

typedef enum {
    T_EOF, T_NEWLINE, T_IDENT, T_INT, T_FLOAT, T_STRING,
    T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COMMA, T_COLON, T_ASSIGN,
    T_PLUS, T_MINUS, T_STAR, T_SLASH, T_LT, T_LE, T_GT, T_GE, T_EQ, T_NE,
    T_DOT, T_TILDE, T_AMP, T_PIPE, T_AT,
} tok_kind;

typedef struct token {
    tok_kind kind;
    const char *start; /* in the source */
    int len;
    int line, col;
    int64_t ival;
    double fval;
} token;

typedef struct var {
    char name[128];
    rj_node node;
    token decl;        /* where the name was first given (an input's declaration) */
} var;

typedef struct parser {
    rj_ctx *ctx;
    rj_graph *g;
    const char *src, *file, *p;
    int line;
    const char *line_start;
    int depth;          /* open parentheses and brackets: newlines are ignored inside */
    int nest;           /* open levels of expression nesting (see nest_in) */
    token tok;          /* current token */
    bool failed;
    var *vars;
    int32_t nvars, capvars;
    strmap var_index;   /* name -> index in vars: lookups stay O(1) in long programs */
    sbuf warn;          /* warnings, one a line (rj_graph_warnings) */
    token rag_at[64];   /* where the first 64 ragged symbols were declared, by symbol id */
    int32_t rag_sym[64];
    int nrag;
} parser;

typedef struct value {
    rj_node node;      /* RJ_NONE for the non-node values below */
    bool is_none;      /* None */
    bool is_string;    /* a string literal: str and slen, its text in the source */
    const char *str;
    int slen;
    bool is_list;      /* [d, d, ...] */
    bool is_size;      /* a size by name (D, j1) or x.size(k): a list of one symbolic dim */
    bool is_tuple;     /* (a, b, ...): integers in dims (negative ones too), sizes where tuple_syms has a bit */
    uint32_t tuple_syms;
    rj_dim dims[RJ_MAX_RANK];
    int ndims;
    token at;          /* where the value starts */
} value;

/* ---- errors ------------------------------------------------------------------------------- */

/* The message for an error at token t: "file:line:col: msg", the line, a caret. */
static void fail_at(parser *P, const token *t, rj_status s, const char *fmt, ...) RJ_PRINTF(4, 5);

static void fail_at(parser *P, const token *t, rj_status s, const char *fmt, ...) {
    if (P->failed) return;
    P->failed = true;
    /* the graph is failed too, so builder calls still on the stack stay quiet */
    if (P->g && P->g->status == RJ_OK) P->g->status = s;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the source line containing t; of a long line, a window that keeps the caret in view */
    const char *ls = t->start;
    while (ls > P->src && ls[-1] != '\n') ls--;
    const char *le = t->start;
    while (*le && *le != '\n') le++;
    int c = (int)(t->start - ls), skip = c > 150 ? c - 100 : 0;
    const char *ws = ls + skip, *dots = skip ? "..." : "";
    int n = (int)(le - ws);
    if (n > 200) n = 200;
    char caret[256];
    int k = 0;
    for (; k < (int)strlen(dots); k++) caret[k] = ' ';
    for (int i = 0; i < c - skip; i++) caret[k++] = ws[i] == '\t' ? '\t' : ' ';
    caret[k++] = '^';
    caret[k] = 0;
    ctx_fail(P->ctx, s, "%s:%d:%d: %s\n  %s%.*s\n  %s", P->file, t->line, t->col, msg, dots, n,
             ws, caret);
}

/* A builder call failed: re-report its message at the token that made the call. */
static void fail_builder(parser *P, const token *t) {
    if (P->failed) return;
    char msg[768];
    snprintf(msg, sizeof msg, "%s", rj_ctx_error(P->ctx));
    fail_at(P, t, rj_graph_status(P->g) ? rj_graph_status(P->g) : ctx_last_status(P->ctx), "%s", msg);
}

/* ---- lexer -------------------------------------------------------------------------------- */

static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static void next(parser *P) {
    const char *p = P->p;
    token *t = &P->tok;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p == '#')
            while (*p && *p != '\n') p++;
        if (*p == '\\' && p[1] == '\n') { /* explicit line continuation */
            p += 2;
            P->line++;
            P->line_start = p;
            continue;
        }
        if (*p == '\n' && P->depth > 0) {
            p++;
            P->line++;
            P->line_start = p;
            continue;
        }
        break;
    }
    *t = (token){.start = p, .line = P->line, .col = (int)(p - P->line_start) + 1, .len = 1};
    char c = *p;
    if (!c) {
        t->kind = T_EOF;
        t->len = 0;
    } else if (c == '\n') {
        t->kind = T_NEWLINE;
        p++;
        P->line++;
        P->line_start = p;
        P->p = p;
        return;
    } else if (is_ident_start(c)) {
        const char *s = p;
        while (is_ident_char(*p)) p++;
        t->kind = T_IDENT;
        t->len = (int)(p - s);
        P->p = p;
        return;
    } else if (is_digit(c) || (c == '.' && is_digit(p[1]))) {
        const char *s = p;
        bool flt = false;
        while (is_digit(*p)) p++;
        if (*p == '.') {
            flt = true;
            p++;
            while (is_digit(*p)) p++;
        }
        if (*p == 'e' || *p == 'E') {
            const char *q = p + 1;
            if (*q == '+' || *q == '-') q++;
            if (is_digit(*q)) {
                flt = true;
                p = q;
                while (is_digit(*p)) p++;
            }
        }
        t->len = (int)(p - s);
        P->p = p;
        if (is_ident_char(*p)) {
            t->kind = T_INT;
            fail_at(P, t, RJ_ERR_PARSE, "malformed number '%.*s%c'", t->len, s, *p);
            return;
        }
        /* the whole token, read in place (the source ends with a NUL and the token is followed
         * by a character no number contains); a conversion that stops early (a locale with
         * another decimal point, say) is an error, never a shorter number */
        char *end;
        errno = 0;
        if (flt) {
            t->kind = T_FLOAT;
            t->fval = strtod(s, &end); /* out of range: inf or 0, as Python's float literals */
        } else {
            t->kind = T_INT;
            t->ival = strtoll(s, &end, 10);
        }
        if (end != p) {
            fail_at(P, t, RJ_ERR_PARSE, "cannot read the number '%.*s'", t->len < 40 ? t->len : 40, s);
        } else if (!flt && errno == ERANGE) {
            fail_at(P, t, RJ_ERR_PARSE, "integer %.*s%s is too large (the limit is 2^63 - 1)",
                    t->len < 40 ? t->len : 40, s, t->len > 40 ? "..." : "");
        }
        return;
    } else if (c == '"' || c == '\'') {
        const char *s = p++;
        while (*p && *p != c && *p != '\n') p++;
        if (*p != c) {
            t->kind = T_STRING;
            fail_at(P, t, RJ_ERR_PARSE, "unterminated string");
            P->p = p;
            return;
        }
        p++;
        t->kind = T_STRING;
        t->len = (int)(p - s);
        P->p = p;
        return;
    } else {
        static const struct {
            const char *s;
            tok_kind k;
        } ops[] = {{"<=", T_LE}, {">=", T_GE}, {"==", T_EQ}, {"!=", T_NE}, {"(", T_LPAREN},
                   {")", T_RPAREN}, {"[", T_LBRACK}, {"]", T_RBRACK}, {",", T_COMMA},
                   {":", T_COLON}, {"=", T_ASSIGN}, {"+", T_PLUS}, {"-", T_MINUS},
                   {"*", T_STAR}, {"/", T_SLASH}, {"<", T_LT}, {">", T_GT},
                   {".", T_DOT}, {"~", T_TILDE}, {"&", T_AMP}, {"|", T_PIPE}, {"@", T_AT}};
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            size_t n = strlen(ops[i].s);
            if (!strncmp(p, ops[i].s, n)) {
                t->kind = ops[i].k;
                t->len = (int)n;
                if (t->kind == T_LPAREN || t->kind == T_LBRACK) P->depth++;
                if ((t->kind == T_RPAREN || t->kind == T_RBRACK) && P->depth > 0) P->depth--;
                P->p = p + n;
                return;
            }
        }
        t->kind = T_EOF;
        fail_at(P, t, RJ_ERR_PARSE, "unexpected character '%c'", c);
        return;
    }
    P->p = p;
}

/* ---- suggestions ------------------------------------------------------------------------------
 * An unknown name is most often a typo of a known one: the closest known name by edit distance
 * (insertions, deletions, substitutions, and swaps of neighbours count one each), if it is
 * close enough to be what was meant: one edit in a word of 3 to 5 letters, a third of a longer
 * word's length, none in a shorter one. */

typedef struct suggest {
    const char *word;
    const char *best;
    int dist;
} suggest;

static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[n][m];
}

static void suggest_try(suggest *s, const char *cand) {
    if (!cand || !strcmp(cand, s->word)) return;
    int len = (int)strlen(s->word), limit = len < 3 ? 0 : len < 6 ? 1 : len / 3; /* "z" is no typo of "x" */
    int d = edit_distance(s->word, cand);
    if (d <= limit && (!s->best || d < s->dist)) s->best = cand, s->dist = d;
}

/* Equal but for the case of ASCII letters (true, TRUE and True). */
static bool same_letters(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a, y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return !*a && !*b;
}

/* " (did you mean 'x'?)" or "" */
static void suggestion(const suggest *s, char *out, size_t n) {
    if (s->best) snprintf(out, n, " (did you mean '%s'?)", s->best);
    else if (n) out[0] = 0;
}

static bool tok_is(const token *t, const char *word) {
    return t->kind == T_IDENT && (int)strlen(word) == t->len && !strncmp(t->start, word, (size_t)t->len);
}

static void tok_text(const token *t, char *out, size_t n) {
    if (t->kind == T_EOF) snprintf(out, n, "end of input");
    else if (t->kind == T_NEWLINE) snprintf(out, n, "end of line");
    else snprintf(out, n, "'%.*s'", t->len < 60 ? t->len : 60, t->start);
}

static bool expect(parser *P, tok_kind k, const char *what) {
    if (P->failed) return false;
    if (P->tok.kind == k) {
        next(P);
        return !P->failed;
    }
    char got[80];
    tok_text(&P->tok, got, sizeof got);
    fail_at(P, &P->tok, RJ_ERR_PARSE, "expected %s, found %s", what, got);
    return false;
}

/* ---- variables ---------------------------------------------------------------------------- */

static var *find_var(parser *P, const char *name) {
    int32_t i = strmap_get(&P->var_index, name);
    return i >= 0 ? &P->vars[i] : NULL;
}

static void set_var(parser *P, const token *t, const char *name, rj_node n) {
    var *v = find_var(P, name);
    if (v) {
        v->node = n;
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
    v->decl = *t;
}

static bool ident(parser *P, char *out, size_t n, const char *what) {
    if (P->failed) return false;
    if (P->tok.kind != T_IDENT) {
        char got[80];
        tok_text(&P->tok, got, sizeof got);
        fail_at(P, &P->tok, RJ_ERR_PARSE, "expected %s, found %s", what, got);
        return false;
    }
    if (P->tok.len >= (int)n) {
        fail_at(P, &P->tok, RJ_ERR_PARSE, "name is too long");
        return false;
    }
    snprintf(out, n, "%.*s", P->tok.len, P->tok.start);
    next(P);
    return !P->failed;
}

/* What already uses `name`, as a phrase for messages, or NULL. Inputs, outputs, values,
 * ragged symbols and dense sizes share one namespace, since `ragjit run` gives each a file
 * named after it in the same directory: an input named like a symbol would read, and an
 * output write, the symbol's offsets. (Output names are variable names here.) */
static const char *name_user(parser *P, const char *name) {
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
static bool new_name(parser *P, const token *t, const char *name, bool reassign) {
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
/* "file:line:col: warning: ..." as a line of the graph's warnings. */
static void warn_at(parser *P, const token *t, const char *fmt, ...) RJ_PRINTF(3, 4);
static void warn_at(parser *P, const token *t, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbuf_printf(&P->warn, "%s:%d:%d: warning: %s\n", P->file, t->line, t->col, msg);
}

static rj_dim parse_dim(parser *P) {
    token t = P->tok;
    if (t.kind == T_INT) {
        next(P);
        if (t.ival < 0) fail_at(P, &t, RJ_ERR_PARSE, "a dim must not be negative");
        return t.ival;
    }
    char name[128];
    if (!ident(P, name, sizeof name, "a dim (a number or a size name)")) return RJ_DIM_NONE;
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

static bool parse_dtype_name(const char *s, rj_dtype *out) {
    static const struct {
        const char *name;
        rj_dtype t;
    } names[] = {{"f32", RJ_F32}, {"f64", RJ_F64}, {"i32", RJ_I32}, {"i64", RJ_I64},
                 {"bool", RJ_BOOL}, {"float32", RJ_F32}, {"float64", RJ_F64},
                 {"int32", RJ_I32}, {"int64", RJ_I64}, {"float", RJ_F32}, {"double", RJ_F64}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].name, s)) {
            *out = names[i].t;
            return true;
        }
    return false;
}

/* type = DTYPE "[" [ dim { "," dim } ] "]" */
static bool parse_type(parser *P, rj_dtype *dt, int *rank, rj_dim *dims) {
    token t = P->tok;
    char name[32];
    if (!ident(P, name, sizeof name, "a type such as f32[B, j1, 64]")) return false;
    if (!parse_dtype_name(name, dt)) {
        fail_at(P, &t, RJ_ERR_PARSE, "unknown dtype '%s' (f32, f64, i32, i64, bool)", name);
        return false;
    }
    if (!expect(P, T_LBRACK, "'[' after the dtype")) return false;
    *rank = 0;
    while (!P->failed && P->tok.kind != T_RBRACK) {
        if (*rank == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "more than %d dims", RJ_MAX_RANK);
            return false;
        }
        dims[(*rank)++] = parse_dim(P);
        if (P->tok.kind != T_RBRACK && !expect(P, T_COMMA, "',' or ']'")) return false;
    }
    return expect(P, T_RBRACK, "']'");
}

/* ---- expressions ----------------------------------------------------------------------------- */

static value parse_expr(parser *P);
static value parse_postfix(parser *P);
static const node *scalar_of(parser *P, const value *v);

static value node_value(rj_node n, token at) {
    return (value){.node = n, .at = at};
}

/* A value used as a tensor operand. */
static rj_node as_node(parser *P, const value *v) {
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
    if (v->is_string || v->is_list || v->is_none || v->is_tuple) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s is not a tensor",
                v->is_none ? "None" : v->is_string ? "a string" : v->is_tuple ? "a tuple" : "a list");
        return RJ_NONE;
    }
    return v->node;
}

static rj_node check(parser *P, rj_node n, const token *t) {
    if (n == RJ_NONE) fail_builder(P, t);
    return n;
}

/* The literal value of a scalar node, for attributes given as numbers. */
static bool literal(parser *P, const value *v, double *out) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "expected a number");
        return false;
    }
    *out = n->weak == WEAK_FLOAT ? n->fval : (double)n->ival;
    return true;
}

/* An integer literal that a double cannot hold (|v| > 2^53, not a multiple of its spacing):
 * attributes taken as doubles (pad's value) would round it. */
static bool inexact_int(parser *P, const value *v) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR || n->weak != WEAK_INT) return false;
    double d = (double)n->ival;
    return d >= 9223372036854775808.0 || (int64_t)d != n->ival;
}

typedef struct args {
    const char *fname;
    bool method;       /* x.name(...): x is pos[0] */
    value pos[8];
    int npos;
    char key[8][32];
    value kw[8];
    int nkw;
} args;

/* The rest of a tuple or of a list of dims, after its opening bracket and `first` elements
 * already in v: { "," expr } [ "," ] close. Each element is an integer literal (a dim, which
 * may be negative) or a size. */
static void tuple_rest(parser *P, value *v, tok_kind close, const char *closing) {
    v->is_tuple = true;
    while (!P->failed && P->tok.kind != close) {
        if (v->ndims > 0 && !expect(P, T_COMMA, close == T_RPAREN ? "',' or ')'" : "',' or ']'")) return;
        if (P->tok.kind == close) break; /* (1,) */
        if (v->ndims == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "tuple too long (at most %d elements)", RJ_MAX_RANK);
            return;
        }
        value e = parse_expr(P);
        if (P->failed) return;
        const node *n = scalar_of(P, &e);
        if (e.is_size) {
            v->tuple_syms |= 1u << v->ndims;
            v->dims[v->ndims++] = e.dims[0];
        } else if (n && n->weak == WEAK_INT) {
            v->dims[v->ndims++] = n->ival;
        } else {
            fail_at(P, &e.at, RJ_ERR_PARSE, "a tuple holds integers (dims) or sizes");
            return;
        }
    }
    expect(P, close, closing);
}

/* list_dim = dim | postfix   (a size taken from a tensor: [B, j1, x.size(2) * 2] is not
 * allowed, [B, j1, x.size(2)] and [B, -1, x.shape[-1]] are) */
static rj_dim list_dim(parser *P) {
    const char *q = P->p;
    while (*q == ' ' || *q == '\t') q++;
    if (P->tok.kind != T_IDENT || *q != '.') return parse_dim(P);
    value v = parse_postfix(P);
    if (P->failed) return RJ_DIM_NONE;
    if (v.is_size) return v.dims[0];
    const node *n = scalar_of(P, &v);
    if (n && n->weak == WEAK_INT && n->ival >= 0) return n->ival;
    fail_at(P, &v.at, RJ_ERR_PARSE, "expected a size in the list (a number, a size name, x.size(k) or x.shape[k])");
    return RJ_DIM_NONE;
}

/* arg = [ IDENT "=" ] ( expr | "[" [ list_dim { "," list_dim } ] "]" ) */
static void parse_arg(parser *P, args *a) {
    token start = P->tok;
    char key[32] = "";
    if (start.kind == T_IDENT) {
        /* look ahead for "name =" (but not "name ==") */
        const char *q = P->p;
        while (*q == ' ' || *q == '\t') q++;
        if (q[0] == '=' && q[1] != '=') {
            ident(P, key, sizeof key, "an argument name");
            next(P); /* '=' */
        }
    }
    value v;
    bool size_slot = a->fname && !strcmp(a->fname, "pad") && (!strcmp(key, "len") || (!key[0] && a->npos == 2));
    if (size_slot && P->tok.kind == T_IDENT) {
        char nm[128];
        snprintf(nm, sizeof nm, "%.*s", P->tok.len < 127 ? P->tok.len : 127, P->tok.start);
        if (!find_var(P, nm) && strcmp(nm, "None")) { /* a size name, declared on use */
            v = (value){.node = RJ_NONE, .is_list = true, .ndims = 1, .at = P->tok};
            v.dims[0] = parse_dim(P);
            goto have_value;
        }
    }
    /* sum(x, dim=[1, 2]): dims, which may be negative, rather than sizes */
    rj_op rop = a->fname ? rj_op_from_name(a->fname) : RJ_OP_COUNT;
    bool dims_slot = a->fname && (!strcmp(a->fname, "amax") || !strcmp(a->fname, "amin") ||
                                  (rop != RJ_OP_COUNT && op_table[rop].kind == KIND_REDUCE)) &&
                     (!strcmp(key, "dim") || (!key[0] && a->npos == 1));
    if (dims_slot && P->tok.kind == T_LBRACK) {
        v = (value){.node = RJ_NONE, .at = P->tok};
        next(P);
        tuple_rest(P, &v, T_RBRACK, "']'");
    } else if (P->tok.kind == T_LBRACK) {
        v = (value){.node = RJ_NONE, .is_list = true, .at = P->tok};
        next(P);
        while (!P->failed && P->tok.kind != T_RBRACK) {
            if (v.ndims == RJ_MAX_RANK) {
                fail_at(P, &P->tok, RJ_ERR_PARSE, "list too long");
                return;
            }
            if (P->tok.kind == T_MINUS) { /* -1: reshape's inferred size */
                token m = P->tok;
                next(P);
                if (P->tok.kind != T_INT || P->tok.ival != 1) {
                    fail_at(P, &m, RJ_ERR_PARSE, "a dim must not be negative (-1 is reshape's inferred size)");
                    return;
                }
                next(P);
                v.dims[v.ndims++] = RJ_DIM_NONE;
            } else {
                v.dims[v.ndims++] = list_dim(P);
            }
            if (P->tok.kind != T_RBRACK && !expect(P, T_COMMA, "',' or ']'")) return;
        }
        expect(P, T_RBRACK, "']'");
    } else if (P->tok.kind == T_STRING) {
        v = (value){.node = RJ_NONE, .is_string = true, .str = P->tok.start + 1,
                    .slen = P->tok.len - 2, .at = P->tok};
        next(P);
    } else {
        v = parse_expr(P);
    }
have_value:
    if (P->failed) return;
    if (key[0]) {
        if (a->nkw == 8) {
            fail_at(P, &start, RJ_ERR_PARSE, "too many arguments");
            return;
        }
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->key[i], key)) {
                fail_at(P, &start, RJ_ERR_PARSE, "argument '%s' given twice", key);
                return;
            }
        snprintf(a->key[a->nkw], sizeof a->key[0], "%s", key);
        v.at = start; /* messages about a keyword argument point at its name */
        a->kw[a->nkw++] = v;
    } else {
        if (a->nkw) {
            fail_at(P, &start, RJ_ERR_PARSE, "positional argument after keyword arguments");
            return;
        }
        if (a->npos == 8) {
            fail_at(P, &start, RJ_ERR_PARSE, "too many arguments");
            return;
        }
        a->pos[a->npos++] = v;
    }
}

/* Binds arguments to parameter names (as Python does): names[i] receives positional i or
 * the keyword names[i]; a parameter may be optional. Returns false after reporting. */
static bool bind_args(parser *P, const token *fn, const char *fname, args *a,
                      const char *const *names, int nparams, int nrequired, value **out) {
    for (int i = 0; i < nparams; i++) out[i] = NULL;
    if (a->npos > nparams) {
        fail_at(P, &a->pos[nparams].at, RJ_ERR_PARSE, "%s takes at most %d arguments", fname, nparams);
        return false;
    }
    for (int i = 0; i < a->npos; i++) out[i] = &a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int i = 0;
        while (i < nparams && strcmp(names[i], a->key[k])) i++;
        if (i == nparams) {
            suggest s = {.word = a->key[k]};
            char list[160] = "", hint[96];
            for (int j = 0; j < nparams; j++) {
                suggest_try(&s, names[j]);
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", names[j]);
            }
            suggestion(&s, hint, sizeof hint);
            fail_at(P, &a->kw[k].at, RJ_ERR_PARSE, "%s has no argument '%s'%s; it takes %s", fname, a->key[k], hint,
                    list);
            return false;
        }
        if (out[i]) {
            fail_at(P, &a->kw[k].at, RJ_ERR_PARSE, "%s: argument '%s' given twice", fname, names[i]);
            return false;
        }
        out[i] = &a->kw[k];
    }
    for (int i = 0; i < nrequired; i++)
        if (!out[i]) {
            fail_at(P, fn, RJ_ERR_PARSE, "%s: missing argument '%s'", fname, names[i]);
            return false;
        }
    return true;
}

/* A scalar literal given for an attribute, or NULL. */
static const node *scalar_of(parser *P, const value *v) {
    const node *n = v->node >= 0 && !v->is_list ? graph_node(P->g, v->node) : NULL;
    return n && n->op == RJ_OP_SCALAR ? n : NULL;
}

/* An integer argument: an integer literal (not a float, not a bool: PyTorch refuses both for
 * dims and sizes) within lo..hi. Messages name the function, the argument and the value. */
static bool int_arg(parser *P, const char *fname, const char *arg, const value *v, int64_t lo,
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

static bool bool_arg(parser *P, const char *fname, const char *arg, const value *v, bool *out) {
    const node *n = scalar_of(P, v);
    if (!n || n->weak != WEAK_BOOL) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be True or False", fname, arg);
        return false;
    }
    *out = n->ival != 0;
    return true;
}

static bool is_none(const value *v) { return v && v->is_none; }

static bool str_is(const value *v, const char *s) {
    return v->is_string && v->slen == (int)strlen(s) && !strncmp(v->str, s, (size_t)v->slen);
}

/* normalized_shape: a dim, or a list of dims, matching the input's trailing dims. */
static bool norm_shape(parser *P, const char *fname, const value *v, rj_node x, int *ndims) {
    rj_dim want[RJ_MAX_RANK];
    int n = 0;
    if (v->is_list || v->is_tuple) { /* [D], (64,), (D,) */
        n = v->ndims;
        memcpy(want, v->dims, sizeof(rj_dim) * (size_t)n);
        for (int i = 0; v->is_tuple && i < n; i++)
            if (!(v->tuple_syms >> i & 1) && want[i] < 0) { /* a negative size would read as a symbol's id */
                fail_at(P, &v->at, RJ_ERR_PARSE, "%s: normalized_shape holds a negative size", fname);
                return false;
            }
    } else {
        const node *s = scalar_of(P, v);
        if (!s || s->weak != WEAK_INT) {
            fail_at(P, &v->at, RJ_ERR_PARSE, "normalized_shape must be a size or a list of sizes");
            return false;
        }
        /* a constant size: a negative number would read as a symbol's id */
        if (s->ival < 0) {
            fail_at(P, &v->at, RJ_ERR_PARSE, "%s: normalized_shape=%lld is negative", fname,
                    (long long)s->ival);
            return false;
        }
        want[n++] = s->ival;
    }
    rj_dim dims[RJ_MAX_RANK];
    int r = rj_node_shape(P->g, x, dims);
    if (n < 1 || n > r) {
        fail_at(P, &v->at, RJ_ERR_SHAPE, "normalized_shape has %d dims but the input has rank %d", n, r);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!dim_equal(P->g, want[i], dims[r - n + i])) {
            fail_at(P, &v->at, RJ_ERR_SHAPE, "normalized_shape does not match the input's last %d dims", n);
            return false;
        }
    *ndims = n;
    return true;
}

/* unsqueeze(x, dim), squeeze(x, dim=None): views made by rj_graph_reshape. */
static value call_squeeze(parser *P, const token *fn, const char *name, args *a) {
    value r = node_value(RJ_NONE, *fn);
    value *v[2];
    static const char *const names[] = {"input", "dim"};
    bool un = name[0] == 'u';
    int64_t dim = 0;
    if (!bind_args(P, fn, name, a, names, 2, un ? 2 : 1, v)) return r;
    if (v[1] && !is_none(v[1]) && !int_arg(P, name, "dim", v[1], INT_MIN, INT_MAX, &dim)) return r;
    rj_node x = as_node(P, v[0]);
    if (P->failed) return r;
    if (un) {
        r.node = check(P, rj_graph_unsqueeze(P->g, x, (int)dim), fn);
    } else if (v[1] && !is_none(v[1])) {
        r.node = check(P, rj_graph_squeeze(P->g, x, (int)dim), fn);
    } else { /* every dim of size 1 */
        rj_dim dims[RJ_MAX_RANK], keep[RJ_MAX_RANK];
        int rank = rj_node_shape(P->g, x, dims), n = 0;
        for (int k = 0; k < rank; k++)
            if (dims[k] != 1) keep[n++] = dims[k];
        r.node = n == rank ? x : check(P, rj_graph_reshape(P->g, x, n, keep), fn);
    }
    return r;
}

/* linear(input, weight, bias=None), PyTorch's F.linear: weight [N, K]. */
static value call_linear(parser *P, const token *fn, args *a) {
    value r = node_value(RJ_NONE, *fn);
    value *v[3];
    static const char *const names[] = {"input", "weight", "bias"};
    if (!bind_args(P, fn, "linear", a, names, 3, 2, v)) return r;
    rj_node x = as_node(P, v[0]), w = as_node(P, v[1]), b = v[2] && !is_none(v[2]) ? as_node(P, v[2]) : RJ_NONE;
    if (P->failed) return r;
    r.node = check(P, rj_graph_linear(P->g, x, w, b), fn);
    return r;
}

/* PyTorch's x.t() and x.T (2-D: the transpose; fewer dims: x itself) and x.mT (the last two
 * dims of any tensor). PyTorch's .T of more dims reverses them all, which ragjit's views cannot
 * do; that is an error that names what to write. */
static value transpose_last(parser *P, const token *at, const char *what, const value *self, bool batched) {
    value r = node_value(RJ_NONE, self->at);
    rj_node x = as_node(P, self);
    if (P->failed) return r;
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (batched ? rank < 2 : rank > 2) {
        fail_at(P, at, RJ_ERR_SHAPE, batched ? "%s: the tensor has %d dim(s); .mT transposes the last two of at least 2"
                : "%s: the tensor has %d dims; PyTorch's .T and t() are the transpose of a 2-D tensor (.T of more "
                  "dims reverses them all): write .mT or transpose(-2, -1) for the last two", what, rank);
        return r;
    }
    r.node = rank < 2 ? x : check(P, rj_graph_transpose(P->g, x, rank - 2, rank - 1), at);
    return r;
}

/* x.size(k) and x.shape[k]: a constant dim is an integer literal, usable in arithmetic; a
 * named one is that size by name, as if the user had written it (D, j1). */
static value size_value(parser *P, const token *at, const char *what, const value *self, const value *dimv) {
    value r = node_value(RJ_NONE, self->at);
    int64_t k;
    rj_node x = as_node(P, self);
    if (P->failed || !int_arg(P, what, "dim", dimv, INT_MIN, INT_MAX, &k)) return r;
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (k < -rank || k >= rank) {
        fail_at(P, &dimv->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", what,
                (long long)k, rank);
        return r;
    }
    rj_dim d = dims[k < 0 ? k + rank : k];
    if (d >= 0) {
        r.node = check(P, rj_graph_scalar_int(P->g, d), at);
    } else {
        r.is_list = r.is_size = true;
        r.ndims = 1;
        r.dims[0] = d;
    }
    return r;
}

/* sum(x, dim=(1, 2), keepdim): PyTorch's reduction over several dims, as one reduction per
 * dim from the last to the first, so that with keepdim=False the dims still to reduce keep
 * their numbers. Nesting is exact for sum, max, min and prod, and for mean too: every row of
 * the outer dim holds the same number of elements along the inner ones. v: input, dim, keepdim. */
static value reduce_dims(parser *P, const token *fn, const char *name, rj_op op, value **v) {
    value r = node_value(RJ_NONE, *fn);
    const value *t = v[1];
    bool keep = false;
    if (v[2] && !bool_arg(P, name, "keepdim", v[2], &keep)) return r;
    rj_node x = as_node(P, v[0]);
    if (P->failed) return r;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, shape), dims[RJ_MAX_RANK], n = 0;
    if (t->ndims == 0) {
        fail_at(P, &t->at, RJ_ERR_PARSE, "%s: dim=() names no dim (name the dims to reduce)", name);
        return r;
    }
    for (int i = 0; i < t->ndims; i++) {
        int64_t d = t->dims[i];
        if (t->tuple_syms >> i & 1) {
            fail_at(P, &t->at, RJ_ERR_PARSE, "%s: the dims must be integers", name);
            return r;
        }
        if (d < -rank || d >= rank) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", name,
                    (long long)d, rank);
            return r;
        }
        int k = (int)(d < 0 ? d + rank : d), at = n;
        while (at > 0 && dims[at - 1] < k) at--; /* kept in decreasing order */
        if (at > 0 && dims[at - 1] == k) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %d appears multiple times in the list of dims", name, k);
            return r;
        }
        memmove(dims + at + 1, dims + at, sizeof(int) * (size_t)(n - at));
        dims[at] = k;
        n++;
    }
    for (int i = 0; i < n && !P->failed; i++) x = check(P, rj_graph_reduce(P->g, op, x, dims[i], keep), fn);
    r.node = x;
    return r;
}

/* A call of an op by name, or of a ragjit-specific function (cast, pad, unpad). */
static value call(parser *P, const token *fn, const char *name, args *a) {
    value r = node_value(RJ_NONE, *fn);
    rj_graph *g = P->g;
    value *v[8];
    rj_op op = rj_op_from_name(name);
    if (!strcmp(name, "sign")) op = RJ_OP_SGN;
    if (!strcmp(name, "view")) op = RJ_OP_RESHAPE;
    if (!strcmp(name, "linear")) return call_linear(P, fn, a);
    if (!strcmp(name, "unsqueeze") || !strcmp(name, "squeeze")) return call_squeeze(P, fn, name, a);
    if (!strcmp(name, "amax")) op = RJ_OP_MAX; /* PyTorch's names of the reductions to values */
    if (!strcmp(name, "amin")) op = RJ_OP_MIN;
    if (!strcmp(name, "t")) {
        static const char *const names[] = {"input"};
        return bind_args(P, fn, name, a, names, 1, 1, v) ? transpose_last(P, fn, "t", v[0], false) : r;
    }
    if (!strcmp(name, "size")) {
        static const char *const names[] = {"input", "dim"};
        if (!bind_args(P, fn, name, a, names, 2, 1, v)) return r;
        if (!v[1] || is_none(v[1])) {
            fail_at(P, fn, RJ_ERR_PARSE, "size: name one dim, x.size(k) or x.shape[k] (ragjit has no tuples of sizes)");
            return r;
        }
        return size_value(P, fn, "size", v[0], v[1]);
    }
    if (op == RJ_OP_COUNT || op == RJ_OP_INPUT || op == RJ_OP_SCALAR || op == RJ_OP_GELU_TANH) {
        suggest s = {.word = name};
        char list[1024] = "";
        for (int o = 0; o < RJ_OP_COUNT; o++) {
            if (o == RJ_OP_INPUT || o == RJ_OP_SCALAR || o == RJ_OP_GELU_TANH) continue;
            suggest_try(&s, rj_op_name((rj_op)o));
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", l ? " " : "", rj_op_name((rj_op)o));
        }
        static const char *const more[] = {"sign", "view", "unsqueeze", "squeeze", "linear", "t", "size", "amax",
                                           "amin"};
        for (size_t i = 0; i < RJ_ARRAY_LEN(more); i++) {
            suggest_try(&s, more[i]);
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, " %s", more[i]);
        }
        char hint[96];
        suggestion(&s, hint, sizeof hint);
        if (s.best) fail_at(P, fn, RJ_ERR_PARSE, "unknown %s '%s'%s", a->method ? "method" : "function", name, hint);
        else if (a->method) /* the list of functions says little about methods */
            fail_at(P, fn, RJ_ERR_PARSE, "unknown method '%s': x.%s(...) would be %s(x, ...), and there is no function "
                    "%s (docs/guide.md lists them)", name, name, name, name);
        else fail_at(P, fn, RJ_ERR_PARSE, "unknown function '%s'; the functions are: %s", name, list);
        return r;
    }
    op_kind kind = op_table[op].kind;
    if (op == RJ_OP_GELU) {
        static const char *const names[] = {"input", "approximate"};
        if (!bind_args(P, fn, name, a, names, 2, 1, v)) return r;
        if (v[1] && !str_is(v[1], "tanh") && !str_is(v[1], "none")) {
            fail_at(P, &v[1]->at, RJ_ERR_PARSE, "gelu: approximate must be \"none\" or \"tanh\"");
            return r;
        }
        if (v[1] && str_is(v[1], "tanh")) op = RJ_OP_GELU_TANH;
        r.node = check(P, rj_graph_unary(g, op, as_node(P, v[0])), fn);
    } else if (kind == KIND_UNARY) {
        static const char *const names[] = {"input"};
        if (!bind_args(P, fn, name, a, names, 1, 1, v)) return r;
        r.node = check(P, rj_graph_unary(g, op, as_node(P, v[0])), fn);
    } else if (kind == KIND_BINARY || kind == KIND_COMPARE) {
        static const char *const names[] = {"input", "other"};
        static const char *const pnames[] = {"input", "exponent"};
        if (!bind_args(P, fn, name, a, op == RJ_OP_POW ? pnames : names, 2, 2, v)) return r;
        r.node = check(P, rj_graph_binary(g, op, as_node(P, v[0]), as_node(P, v[1])), fn);
    } else if (op == RJ_OP_WHERE) {
        static const char *const names[] = {"condition", "input", "other"};
        if (!bind_args(P, fn, name, a, names, 3, 3, v)) return r;
        r.node = check(P, rj_graph_where(g, as_node(P, v[0]), as_node(P, v[1]), as_node(P, v[2])), fn);
    } else if (op == RJ_OP_MASKED_FILL) {
        static const char *const names[] = {"input", "mask", "value"};
        double val;
        if (!bind_args(P, fn, name, a, names, 3, 3, v) || !literal(P, v[2], &val)) return r;
        if (inexact_int(P, v[2])) /* as where(mask, value, x), the literal kept exact */
            r.node = check(P, rj_graph_where(g, as_node(P, v[1]), as_node(P, v[2]), as_node(P, v[0])), fn);
        else
            r.node = check(P, rj_graph_masked_fill(g, as_node(P, v[0]), as_node(P, v[1]), val), fn);
    } else if (op == RJ_OP_CAST) {
        static const char *const names[] = {"input", "dtype"};
        rj_dtype dt;
        char dname[16] = "";
        if (!bind_args(P, fn, name, a, names, 2, 2, v)) return r;
        if (v[1]->is_string && v[1]->slen < (int)sizeof dname)
            memcpy(dname, v[1]->str, (size_t)v[1]->slen);
        if (!v[1]->is_string || !parse_dtype_name(dname, &dt)) {
            fail_at(P, &v[1]->at, RJ_ERR_PARSE, "cast: dtype must be one of \"f32\", \"f64\", "
                    "\"i32\", \"i64\", \"bool\"");
            return r;
        }
        r.node = check(P, rj_graph_cast(g, as_node(P, v[0]), dt), fn);
    } else if (kind == KIND_REDUCE) {
        static const char *const names[] = {"input", "dim", "keepdim"};
        int64_t dim;
        bool keep = false;
        if (!bind_args(P, fn, name, a, names, 3, 2, v)) return r;
        if (v[1]->is_tuple) return reduce_dims(P, fn, name, op, v);
        if (!int_arg(P, name, "dim", v[1], INT_MIN, INT_MAX, &dim)) return r;
        if (v[2] && !bool_arg(P, name, "keepdim", v[2], &keep)) return r;
        r.node = check(P, rj_graph_reduce(g, op, as_node(P, v[0]), (int)dim, keep), fn);
    } else if (kind == KIND_SOFTMAX) {
        static const char *const names[] = {"input", "dim"};
        int64_t dim;
        if (!bind_args(P, fn, name, a, names, 2, 2, v) ||
            !int_arg(P, name, "dim", v[1], INT_MIN, INT_MAX, &dim))
            return r;
        r.node = check(P, op == RJ_OP_SOFTMAX ? rj_graph_softmax(g, as_node(P, v[0]), (int)dim)
                                              : rj_graph_log_softmax(g, as_node(P, v[0]), (int)dim), fn);
    } else if (op == RJ_OP_LAYER_NORM || op == RJ_OP_RMS_NORM) {
        static const char *const lnames[] = {"input", "normalized_shape", "weight", "bias", "eps"};
        static const char *const rnames[] = {"input", "normalized_shape", "weight", "eps"};
        bool layer = op == RJ_OP_LAYER_NORM;
        if (!bind_args(P, fn, name, a, layer ? lnames : rnames, layer ? 5 : 4, 2, v)) return r;
        rj_node x = as_node(P, v[0]), w = RJ_NONE, b = RJ_NONE;
        int nd;
        double eps = -1;
        if (P->failed || !norm_shape(P, name, v[1], x, &nd)) return r;
        if (v[2] && !is_none(v[2])) w = as_node(P, v[2]);
        if (layer && v[3] && !is_none(v[3])) b = as_node(P, v[3]);
        value *ev = v[layer ? 4 : 3];
        if (ev && !is_none(ev) && !literal(P, ev, &eps)) return r;
        if (ev && !is_none(ev) && eps < 0) {
            fail_at(P, &ev->at, RJ_ERR_PARSE, "%s: eps must not be negative", name);
            return r;
        }
        r.node = check(P, layer ? rj_graph_layer_norm(g, x, nd, w, b, eps) : rj_graph_rms_norm(g, x, nd, w, eps), fn);
    } else if (op == RJ_OP_PAD) {
        static const char *const names[] = {"input", "value", "len"};
        double val = 0;
        rj_dim len = RJ_DIM_NONE;
        if (!bind_args(P, fn, name, a, names, 3, 1, v)) return r;
        if (v[1] && !literal(P, v[1], &val)) return r;
        if (v[1] && inexact_int(P, v[1])) {
            fail_at(P, &v[1]->at, RJ_ERR_ARG, "pad: the value is an integer beyond 2^53, which pad "
                    "would round (it takes a double); pad with 0 and write the value with where()");
            return r;
        }
        if (v[2] && !is_none(v[2])) {
            int64_t n;
            if (v[2]->is_list && v[2]->ndims == 1) len = v[2]->dims[0];
            else if (!int_arg(P, name, "len", v[2], 0, INT64_MAX, &n)) return r;
            else len = n; /* a constant: never negative, which would name a symbol */
        }
        r.node = check(P, rj_graph_pad(g, as_node(P, v[0]), val, len), fn);
    } else if (op == RJ_OP_EMBEDDING) {
        /* embedding(table, idx) as the C API has it; F.embedding(input=idx, weight=table) by
         * keyword, or its positional order (indices first) when only the first is integer */
        static const char *const names[] = {"weight", "input"};
        if (!bind_args(P, fn, name, a, names, 2, 2, v)) return r;
        rj_node t = as_node(P, v[0]), i = as_node(P, v[1]);
        if (P->failed) return r;
        if (a->npos == 2 && dtype_is_int(rj_node_dtype(g, t)) && !dtype_is_int(rj_node_dtype(g, i))) {
            rj_node k = t;
            t = i, i = k;
        }
        r.node = check(P, rj_graph_embedding(g, t, i), fn);
    } else if (op == RJ_OP_GATHER || op == RJ_OP_INDEX_SELECT || op == RJ_OP_TAKE_ALONG_DIM) {
        static const char *const gnames[] = {"input", "dim", "index"};
        static const char *const tnames[] = {"input", "indices", "dim"};
        bool take = op == RJ_OP_TAKE_ALONG_DIM;
        int64_t dim;
        if (!bind_args(P, fn, name, a, take ? tnames : gnames, 3, 3, v) ||
            !int_arg(P, name, "dim", v[take ? 2 : 1], INT_MIN, INT_MAX, &dim))
            return r;
        rj_node x = as_node(P, v[0]), i = as_node(P, v[take ? 1 : 2]);
        if (P->failed) return r;
        r.node = check(P, op == RJ_OP_GATHER ? rj_graph_gather(g, x, (int)dim, i)
                          : take            ? rj_graph_take_along_dim(g, x, i, (int)dim)
                                            : rj_graph_index_select(g, x, (int)dim, i), fn);
    } else if (op == RJ_OP_POSITIONS) {
        static const char *const names[] = {"ragged"};
        if (!bind_args(P, fn, name, a, names, 1, 1, v)) return r;
        if (!v[0]->is_list || v[0]->ndims != 1) {
            fail_at(P, &v[0]->at, RJ_ERR_PARSE, "positions: the argument must be a ragged symbol (positions(j1))");
            return r;
        }
        r.node = check(P, rj_graph_positions(g, v[0]->dims[0]), fn);
    } else if (op == RJ_OP_RESHAPE) {
        static const char *const names[] = {"input", "shape"};
        if (!bind_args(P, fn, name, a, names, 2, 2, v)) return r;
        if (!v[1]->is_list) {
            fail_at(P, &v[1]->at, RJ_ERR_PARSE, "%s: shape must be a list of sizes ([B, j1, 8, 8]; -1 for one "
                    "inferred size)", name);
            return r;
        }
        r.node = check(P, rj_graph_reshape(g, as_node(P, v[0]), v[1]->ndims, v[1]->dims), fn);
    } else if (op == RJ_OP_TRANSPOSE) {
        static const char *const names[] = {"input", "dim0", "dim1"};
        int64_t d0, d1;
        if (!bind_args(P, fn, name, a, names, 3, 3, v) || !int_arg(P, name, "dim0", v[1], INT_MIN, INT_MAX, &d0) ||
            !int_arg(P, name, "dim1", v[2], INT_MIN, INT_MAX, &d1))
            return r;
        r.node = check(P, rj_graph_transpose(g, as_node(P, v[0]), (int)d0, (int)d1), fn);
    } else if (op == RJ_OP_MATMUL) {
        static const char *const names[] = {"input", "other"};
        if (!bind_args(P, fn, name, a, names, 2, 2, v)) return r;
        r.node = check(P, rj_graph_matmul(g, as_node(P, v[0]), as_node(P, v[1])), fn);
    } else if (op == RJ_OP_UNPAD) {
        static const char *const names[] = {"input", "ragged"};
        if (!bind_args(P, fn, name, a, names, 2, 2, v)) return r;
        bool blocks = v[1]->is_list && v[1]->ndims == 2 && v[1]->dims[0] == v[1]->dims[1];
        if (!v[1]->is_list || (v[1]->ndims != 1 && !blocks)) {
            fail_at(P, &v[1]->at, RJ_ERR_PARSE, "unpad: the second argument must be a ragged symbol (j1), or [j1, j1] "
                    "for dims 1 and 2");
            return r;
        }
        r.node = check(P, blocks ? rj_graph_unpad_blocks(g, as_node(P, v[0]), v[1]->dims[0])
                                 : rj_graph_unpad(g, as_node(P, v[0]), v[1]->dims[0]), fn);
    }
    return r;
}

/* Opens one level of expression nesting at t (a parenthesis, a call, a unary minus); false
 * after reporting when that is one level too many. Every recursive cycle of the grammar opens
 * a level, so this bounds the parser's recursion. */
static bool nest_in(parser *P, const token *t) {
    if (P->failed) return false;
    if (P->nest == PARSE_MAX_NEST) {
        fail_at(P, t, RJ_ERR_PARSE, "expression nested too deeply (more than %d levels of "
                "parentheses, calls and unary minus)", PARSE_MAX_NEST);
        return false;
    }
    P->nest++;
    return true;
}

/* "(" [ arg { "," arg } ] ")" after a function's name at t: the call, with `self` (a method
 * call's receiver) as the first positional argument when not NULL. */
static value call_args(parser *P, const token *t, const char *name, const value *self) {
    value r = node_value(RJ_NONE, *t);
    if (!nest_in(P, t)) return r;
    next(P); /* '(' */
    args *a = mem_alloc(P->ctx, sizeof *a);
    if (!a) {
        fail_at(P, t, RJ_ERR_NOMEM, "out of memory");
        return r;
    }
    *a = (args){.fname = name, .method = self != NULL};
    if (self) a->pos[a->npos++] = *self;
    while (!P->failed && P->tok.kind != T_RPAREN) {
        parse_arg(P, a);
        if (P->tok.kind != T_RPAREN && !expect(P, T_COMMA, "',' or ')'")) break;
    }
    P->nest--;
    if (!P->failed && expect(P, T_RPAREN, "')'")) r = call(P, t, name, a);
    mem_free(P->ctx, a, sizeof *a);
    return r;
}

static value parse_primary(parser *P);

/* PyTorch's module prefixes: "torch", "F" (torch.nn.functional as F), "torch.nn.functional"
 * and "nn.functional", with the intermediate "torch.nn" and "nn". 2: a module, 1: a prefix of
 * one only, 0: neither. */
static int module_kind(const char *path) {
    static const char *const mods[] = {"torch", "F", "torch.nn.functional", "nn.functional"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(mods); i++)
        if (!strcmp(path, mods[i])) return 2;
    return !strcmp(path, "torch.nn") || !strcmp(path, "nn");
}

/* module_path = MODULE { "." IDENT } "." IDENT, with `name` the first word and the current
 * token the '.' after it: ported code keeps torch.softmax, F.gelu and
 * torch.nn.functional.layer_norm, which name ragjit's functions of the same names. On a
 * module, leaves the function's name in `name` and its token in *t and returns 1; returns 0
 * (consuming nothing) when name is no module, -1 after reporting. */
static int module_path(parser *P, char *name, size_t n, token *t) {
    char path[160];
    snprintf(path, sizeof path, "%s", name);
    if (!module_kind(path)) return 0;
    while (!P->failed && P->tok.kind == T_DOT) {
        next(P);
        token w = P->tok;
        char word[128], longer[300];
        int room = (int)sizeof path - 1;
        if (!ident(P, word, sizeof word, "a function's name")) return -1;
        snprintf(longer, sizeof longer, "%s.%s", path, word);
        if (P->tok.kind == T_DOT && module_kind(longer)) {
            snprintf(path, sizeof path, "%.*s", room, longer);
            continue;
        }
        if (module_kind(path) != 2) {
            fail_at(P, &w, RJ_ERR_PARSE, "'%s' is not a module ragjit knows: write %s(...), or F.%s(...), "
                    "torch.%s(...), torch.nn.functional.%s(...)", longer, word, word, word, word);
            return -1;
        }
        snprintf(name, n, "%s", word);
        *t = w;
        return 1;
    }
    if (!P->failed) fail_at(P, t, RJ_ERR_PARSE, "'%s' is a module: write %s.name(...)", path, path);
    return -1;
}

/* postfix = primary { "." IDENT "(" [ arg { "," arg } ] ")" }: PyTorch's method syntax, any
 * op as a method of its first argument (x.sum(dim=1), x.softmax(1), m.masked_fill(...)) */
static value parse_postfix(parser *P) {
    value r = parse_primary(P);
    while (!P->failed && P->tok.kind == T_DOT) {
        next(P);
        token m = P->tok;
        char name[128];
        if (!ident(P, name, sizeof name, "a method name after '.'")) return r;
        value self = r;
        if (P->tok.kind != T_LPAREN) {
            if (!strcmp(name, "T") || !strcmp(name, "mT")) {
                r = transpose_last(P, &m, name[0] == 'm' ? ".mT" : ".T", &self, name[0] == 'm');
                continue;
            }
            if (!strcmp(name, "shape") && P->tok.kind == T_LBRACK) { /* x.shape[k] */
                next(P);
                value k = parse_expr(P);
                if (!expect(P, T_RBRACK, "']' after x.shape[k]")) return r;
                r = size_value(P, &m, "shape", &self, &k);
                continue;
            }
            if (!strcmp(name, "shape"))
                fail_at(P, &m, RJ_ERR_PARSE, "'.shape' is a tuple of sizes, which ragjit does not have: write "
                        "x.shape[k] or x.size(k) for dim k");
            else
                fail_at(P, &m, RJ_ERR_PARSE, "'.%s' is not a call: write %s(...) (ragjit's attributes are .T, .mT "
                        "and .shape[k]; the rest are methods)", name, name);
            return r;
        }
        r = call_args(P, &m, name, &self);
        r.at = self.at;
    }
    return r;
}

/* primary = NUMBER | "True" | "False" | "inf" | "nan" | IDENT | IDENT "(" [ arg { "," arg } ] ")"
 *         | "(" expr ")" */
static value parse_primary(parser *P) {
    token t = P->tok;
    value r = node_value(RJ_NONE, t);
    if (P->failed) return r;
    switch (t.kind) {
    case T_INT:
        next(P);
        r.node = check(P, rj_graph_scalar_int(P->g, t.ival), &t);
        return r;
    case T_FLOAT:
        next(P);
        r.node = check(P, rj_graph_scalar(P->g, t.fval), &t);
        return r;
    case T_LPAREN:
        if (!nest_in(P, &t)) return r;
        next(P);
        if (P->tok.kind == T_RPAREN) { /* () */
            r.is_tuple = true;
        } else {
            r = parse_expr(P);
            if (!P->failed && P->tok.kind == T_COMMA) { /* (1, 2): a tuple of dims, as PyTorch's dim=(1, 2) */
                value first = r;
                r = node_value(RJ_NONE, t);
                const node *n = scalar_of(P, &first);
                if (first.is_size) r.tuple_syms = 1, r.dims[r.ndims++] = first.dims[0];
                else if (n && n->weak == WEAK_INT) r.dims[r.ndims++] = n->ival;
                else fail_at(P, &first.at, RJ_ERR_PARSE, "a tuple holds integers (dims) or sizes");
                tuple_rest(P, &r, T_RPAREN, "')'");
                P->nest--;
                return r;
            }
        }
        P->nest--;
        expect(P, T_RPAREN, "')'");
        return r;
    case T_IDENT: break;
    default: {
        char got[80];
        tok_text(&t, got, sizeof got);
        fail_at(P, &t, RJ_ERR_PARSE, "expected an expression, found %s", got);
        return r;
    }
    }
    char name[128];
    ident(P, name, sizeof name, "a name");
    if (P->failed) return r;
    if (P->tok.kind == T_DOT && !find_var(P, name)) {
        int m = module_path(P, name, sizeof name, &t);
        if (m < 0) return r;
        if (m > 0 && P->tok.kind != T_LPAREN) {
            fail_at(P, &t, RJ_ERR_PARSE, "'%s' is a function: call it (%s(...))", name, name);
            return r;
        }
    }
    if (P->tok.kind == T_LPAREN) return call_args(P, &t, name, NULL);
    if (!strcmp(name, "True") || !strcmp(name, "False")) {
        r.node = check(P, rj_graph_scalar_bool(P->g, name[0] == 'T'), &t);
        return r;
    }
    if (!strcmp(name, "inf") || !strcmp(name, "nan")) {
        r.node = check(P, rj_graph_scalar(P->g, name[0] == 'i' ? INFINITY : NAN), &t);
        return r;
    }
    if (!strcmp(name, "None")) {
        r.is_none = true;
        return r;
    }
    var *v = find_var(P, name);
    if (v) {
        r.node = v->node;
        return r;
    }
    /* a symbol (unpad's argument, pad's len, a normalized_shape entry) */
    rj_dim d = rj_graph_find_dim(P->g, name);
    if (d != RJ_DIM_NONE) {
        r.is_list = r.is_size = true;
        r.ndims = 1;
        r.dims[0] = d;
        return r;
    }
    suggest s = {.word = name};
    /* Python's keywords first: keepdim=true is JSON's or C's spelling of True */
    static const char *const keywords[] = {"True", "False", "None", "inf", "nan"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(keywords) && !s.best; i++)
        if (same_letters(name, keywords[i])) s.best = keywords[i];
    for (int32_t i = 0; i < P->nvars; i++) suggest_try(&s, P->vars[i].name);
    for (int32_t i = 0; i < P->g->nsym; i++) suggest_try(&s, P->g->syms[i].name);
    char hint[160];
    suggestion(&s, hint, sizeof hint);
    fail_at(P, &t, RJ_ERR_PARSE, "undefined name '%s'%s", name, hint);
    return r;
}

/* unary = "-" unary | "~" unary | postfix */
static value parse_unary(parser *P) {
    token t = P->tok;
    if (t.kind == T_TILDE) { /* logical_not, as on a PyTorch bool tensor */
        next(P);
        value r = node_value(RJ_NONE, t);
        if (!nest_in(P, &t)) return r;
        value x = parse_unary(P);
        P->nest--;
        r.node = check(P, rj_graph_unary(P->g, RJ_OP_LOGICAL_NOT, as_node(P, &x)), &t);
        return r;
    }
    if (t.kind == T_MINUS) {
        next(P);
        /* a negative number literal stays a literal */
        if (P->tok.kind == T_INT || P->tok.kind == T_FLOAT) {
            token n = P->tok;
            next(P);
            value r = node_value(RJ_NONE, t);
            r.node = n.kind == T_INT ? rj_graph_scalar_int(P->g, -n.ival) : rj_graph_scalar(P->g, -n.fval);
            check(P, r.node, &t);
            return r;
        }
        value r = node_value(RJ_NONE, t);
        if (!nest_in(P, &t)) return r;
        value x = parse_unary(P);
        P->nest--;
        const node *lit = x.is_string || x.is_none ? NULL : scalar_of(P, &x);
        if (lit && lit->weak != WEAK_BOOL) { /* -inf, -(2.5): literals */
            r.node = lit->weak == WEAK_INT ? rj_graph_scalar_int(P->g, -lit->ival) : rj_graph_scalar(P->g, -lit->fval);
            check(P, r.node, &t);
            return r;
        }
        r.node = check(P, rj_graph_unary(P->g, RJ_OP_NEG, as_node(P, &x)), &t);
        return r;
    }
    return parse_postfix(P);
}

/* One left-associative level of binary operators: operand { op operand }. */
static value parse_level(parser *P, value (*operand)(parser *), tok_kind k1, rj_op op1, tok_kind k2, rj_op op2) {
    value a = operand(P);
    while (!P->failed && (P->tok.kind == k1 || P->tok.kind == k2)) {
        token op = P->tok;
        next(P);
        value b = operand(P);
        rj_node n = rj_graph_binary(P->g, op.kind == k1 ? op1 : op2, as_node(P, &a), as_node(P, &b));
        token at = a.at;
        a = node_value(check(P, n, &op), at);
    }
    return a;
}

/* term = unary { ("*" | "/" | "@") unary } (Python's precedence: @ with * and /) */
static value parse_term(parser *P) {
    value a = parse_unary(P);
    while (!P->failed && (P->tok.kind == T_STAR || P->tok.kind == T_SLASH || P->tok.kind == T_AT)) {
        token op = P->tok;
        next(P);
        value b = parse_unary(P);
        rj_node x = as_node(P, &a), y = as_node(P, &b);
        rj_node n = op.kind == T_AT ? rj_graph_matmul(P->g, x, y)
                                    : rj_graph_binary(P->g, op.kind == T_STAR ? RJ_OP_MUL : RJ_OP_DIV, x, y);
        token at = a.at;
        a = node_value(check(P, n, &op), at);
    }
    return a;
}

/* additive = term { ("+" | "-") term } */
static value parse_additive(parser *P) {
    return parse_level(P, parse_term, T_PLUS, RJ_OP_ADD, T_MINUS, RJ_OP_SUB);
}

/* and_expr = additive { "&" additive }   (Python's precedence: & binds tighter than |, both
 * looser than + and tighter than comparisons, so masks need parentheses as in PyTorch) */
static value parse_and(parser *P) {
    return parse_level(P, parse_additive, T_AMP, RJ_OP_LOGICAL_AND, T_AMP, RJ_OP_LOGICAL_AND);
}

/* or_expr = and_expr { "|" and_expr } */
static value parse_or(parser *P) {
    return parse_level(P, parse_and, T_PIPE, RJ_OP_LOGICAL_OR, T_PIPE, RJ_OP_LOGICAL_OR);
}

/* expr = or_expr [ ("<" | "<=" | ">" | ">=" | "==" | "!=") or_expr ] */
static value parse_expr(parser *P) {
    value a = parse_or(P);
    static const struct {
        tok_kind k;
        rj_op op;
    } cmp[] = {{T_LT, RJ_OP_LT}, {T_LE, RJ_OP_LE}, {T_GT, RJ_OP_GT}, {T_GE, RJ_OP_GE},
               {T_EQ, RJ_OP_EQ}, {T_NE, RJ_OP_NE}};
    for (size_t i = 0; !P->failed && i < sizeof cmp / sizeof cmp[0]; i++) {
        if (P->tok.kind != cmp[i].k) continue;
        token op = P->tok;
        next(P);
        value b = parse_or(P);
        token at = a.at;
        a = node_value(check(P, rj_graph_binary(P->g, cmp[i].op, as_node(P, &a), as_node(P, &b)), &op), at);
        break;
    }
    return a;
}

/* ---- statements ------------------------------------------------------------------------------ */

/* ragged_stmt = "ragged" IDENT ":" IDENT */
static void parse_ragged(parser *P) {
    char name[128], parent[128];
    token t = P->tok;
    if (!ident(P, name, sizeof name, "the ragged symbol's name")) return;
    /* a symbol declared again is the builder's to judge (same parent: fine) */
    if (rj_graph_find_dim(P->g, name) == RJ_DIM_NONE && !new_name(P, &t, name, false)) return;
    if (!expect(P, T_COLON, "':' and the dim it varies over (ragged j1 : B)")) return;
    token pt = P->tok;
    if (!ident(P, parent, sizeof parent, "the dim the ragged symbol varies over")) return;
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
    if (!ident(P, a, sizeof a, "a ragged symbol")) return;
    token t2 = P->tok;
    if (!ident(P, b, sizeof b, "a second ragged symbol")) return;
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
    if (!ident(P, name, sizeof name, "the input's name") || !new_name(P, &t, name, false)) return;
    if (!expect(P, T_COLON, "':' and the input's type (input x : f32[B, j1, 64])")) return;
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
        if (!ident(P, name, sizeof name, "an output's name")) return;
        var *v = find_var(P, name);
        if (!v) {
            fail_at(P, &t, RJ_ERR_PARSE, "undefined name '%s'", name);
            return;
        }
        rj_node n = v->node;
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
    } while (P->tok.kind == T_COMMA && (next(P), !P->failed));
}

/* assignment = IDENT "=" expr */
static void parse_assignment(parser *P) {
    token t = P->tok;
    char name[128];
    if (!ident(P, name, sizeof name, "a statement (ragged, same, input, output or an assignment)")) return;
    if (P->tok.kind != T_ASSIGN) {
        char got[80];
        tok_text(&P->tok, got, sizeof got);
        fail_at(P, &P->tok, RJ_ERR_PARSE, "expected '=' after '%s', found %s", name, got);
        return;
    }
    if (!new_name(P, &t, name, true)) return;
    next(P);
    value v = parse_expr(P);
    rj_node n = as_node(P, &v);
    if (P->failed) return;
    /* the variable name labels the node in dumps */
    node *nd = graph_node(P->g, n);
    if (nd && !nd->name && nd->op != RJ_OP_SCALAR && !(nd->name = mem_strdup(P->ctx, name))) {
        fail_at(P, &t, RJ_ERR_NOMEM, "out of memory");
        return;
    }
    set_var(P, &t, name, n);
}

/* statement = ragged_stmt | same_stmt | input_stmt | output_stmt | assignment */
static void parse_statement(parser *P) {
    token t = P->tok;
    P->g->cur_loc = t.line;
    if (tok_is(&t, "ragged") || tok_is(&t, "same") || tok_is(&t, "input") || tok_is(&t, "output")) {
        /* a keyword unless used as a variable name in an assignment ("input = x") */
        const char *q = P->p;
        while (*q == ' ' || *q == '\t') q++;
        if (!(q[0] == '=' && q[1] != '=')) {
            next(P);
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
            static const char *const keywords[] = {"ragged", "same", "input", "output"};
            for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) suggest_try(&s, keywords[i]);
            char hint[96];
            suggestion(&s, hint, sizeof hint);
            fail_at(P, &t, RJ_ERR_PARSE, "unknown statement '%s'%s: a statement is ragged, same, input, output, or "
                    "an assignment (name = expression)", word, hint);
            return;
        }
    }
    parse_assignment(P);
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
                .file = filename ? filename : "<input>"};
    strmap_init(&P.var_index, ctx);
    sbuf_init(&P.warn, ctx);
    if (!(P.g = rj_graph_new(ctx))) return NULL;
    next(&P);
    while (!P.failed && P.tok.kind != T_EOF) {
        if (P.tok.kind == T_NEWLINE) {
            next(&P);
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
    for (int i = 0; !P.failed && i < P.nrag; i++) { /* ragged symbols no input uses */
        rj_dim d = sym_dim(P.rag_sym[i]);
        bool used = false;
        for (int32_t k = 0; k < P.g->ninputs && !used; k++) {
            const node *in = &P.g->nodes[P.g->inputs[k]];
            for (int j = 0; j < in->rank; j++) used |= in->dims[j] == d;
        }
        if (!used)
            warn_at(&P, &P.rag_at[i], "ragged symbol %s is declared but no input uses it", P.g->syms[P.rag_sym[i]].name);
    }
    for (int32_t k = 0; !P.failed && k < P.g->ninputs; k++) { /* inputs no output uses need no data (bind.c) */
        const node *in = &P.g->nodes[P.g->inputs[k]];
        var *v = rj_graph_input_used(P.g, k) ? NULL : find_var(&P, in->name);
        if (v) warn_at(&P, &v->decl, "input %s is not used by any output (it needs no data)", in->name);
    }
    if (!P.failed && P.warn.len) { /* the graph keeps them */
        if (!(P.g->warnings = sbuf_finish(&P.warn))) fail_at(&P, &P.tok, RJ_ERR_NOMEM, "out of memory");
    }
    sbuf_free(&P.warn);
    mem_free(ctx, P.vars, sizeof(var) * (size_t)P.capvars);
    strmap_free(&P.var_index);
    P.g->cur_loc = -1;
    if (P.failed) {
        rj_graph_free(P.g);
        return NULL;
    }
    return P.g;
}
