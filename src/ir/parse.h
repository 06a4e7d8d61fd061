/*
 * parse.h — what the pieces of the text-format parser share; private to them.
 *
 * The parser is one recursive descent over one `parser` state, split by layer: parse_lex.c
 * turns the source into tokens and reports errors at them (with did-you-mean suggestions),
 * parse_expr.c is the expression grammar, parse_call.c the table of the functions a call can
 * name, and parse.c the statements, the names they declare, their warnings and the entry
 * point rj_graph_parse. A `value` is what an expression yields before it is known to be
 * a tensor operand: a node, or a size, a list, a tuple, a string or None, which only some
 * arguments accept.
 */
#ifndef RJ_PARSE_H
#define RJ_PARSE_H

#include "ir.h"

typedef enum {
    T_EOF, T_NEWLINE, T_IDENT, T_INT, T_FLOAT, T_STRING,
    T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COMMA, T_COLON, T_ASSIGN,
    T_PLUS, T_MINUS, T_STAR, T_SLASH, T_LT, T_LE, T_GT, T_GE, T_EQ, T_NE,
    T_DOT, T_TILDE, T_AMP, T_PIPE, T_AT, T_POW, T_FLOORDIV, T_PERCENT,
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
    int dtype;         /* a dtype value (dt = x.dtype, torch.float16): its rj_dtype, node RJ_NONE; else -1 */
    token decl;        /* where the name was first given (an input's declaration) */
} var;

struct value;
struct args;

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
    rj_node *pieces;    /* the tensors of every split and chunk so far (value.piece0) */
    int32_t npieces, cappieces;
    struct pdef *defs;  /* the functions defined so far (parse_def.c) */
    int32_t ndefs, capdefs;
    int calls;          /* function bodies being run now (a call inside a body: 1 + its caller's) */
    const char *in_def; /* the innermost of them, and the line of its call (for messages) */
    int in_def_line;
    /* Hooks set by rj_graph_parse, so that the layers of the parser call each other without a
     * circle of files: a call runs a function's body (parse_def.c), whose lines are statements
     * (parse.c). */
    struct value (*run_def)(struct parser *P, const token *fn, const char *name, struct args *a, bool *found);
    void (*statement)(struct parser *P);
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
    bool is_tensors;   /* [x, y, ...] where a list of tensors is read (cat's): their nodes in dims */
    uint32_t tuple_syms;
    rj_dim dims[RJ_MAX_RANK];
    int ndims;
    int8_t info;       /* torch.finfo(dtype) (1) or torch.iinfo(dtype) (2), of info_dt: .min, .max... */
    rj_dtype info_dt;
    bool is_pieces;    /* the tensors of a split or chunk: parser.pieces[piece0 .. piece0+npieces-1] */
    int32_t piece0, npieces;
    bool has_indices;  /* max or min with a dim: PyTorch's (values, indices), node the values; the
                        * indices built when asked for (indices_of) of ind_x over ind_dim */
    bool ind_keep, ind_min;
    rj_node ind_x;
    int ind_dim;
    token at;          /* where the value starts */
} value;

static inline value node_value(rj_node n, token at) {
    return (value){.node = n, .at = at};
}

/* A call's arguments as written, before they are bound to the function's parameters. */
typedef struct call_form call_form; /* a row of the function table (parse_call.c) */
enum { MAX_ARGS = 32 };           /* positional and keyword arguments of a call, each */
typedef struct args {
    const call_form *form; /* the function called, NULL if there is none of its name */
    rj_op op;              /* the op it builds (RJ_OP_COUNT for the text format's own functions) */
    bool method;           /* x.name(...): x is pos[0] */
    value pos[MAX_ARGS];
    int npos;
    char key[MAX_ARGS][32];
    value kw[MAX_ARGS];
    int nkw;
} args;

/* ---- parse_lex.c: tokens, errors, suggestions ---------------------------------------------- */

static inline bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static inline bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

void lex_next(parser *P);
/* The current token if of kind k, then the next one; else reports "expected <what>". */
bool lex_expect(parser *P, tok_kind k, const char *what);
/* The current token's name into out (n bytes), then the next token; else reports. */
bool lex_ident(parser *P, char *out, size_t n, const char *what);
void tok_text(const token *t, char *out, size_t n);

/* The error at token t: "file:line:col: msg", the line, a caret. Only the first is kept. */
void fail_at(parser *P, const token *t, rj_status s, const char *fmt, ...) RJ_PRINTF(4, 5);
/* A builder call failed: re-report its message at the token that made the call. */
void fail_builder(parser *P, const token *t);

/* The known name closest to `word` so far, if close enough to be what was meant. */
typedef struct suggest {
    const char *word;
    const char *best;
    int dist;
} suggest;

int edit_distance(const char *a, const char *b);
void suggest_try(suggest *s, const char *cand);
void suggestion(const suggest *s, char *out, size_t n); /* " (did you mean 'x'?)" or "" */

/* ---- parse_names.c: the namespace, dims and dtypes, values as nodes --------------------------- */

/* "file:line:col: warning: ..." as a line of the graph's warnings. */
void warn_at(parser *P, const token *t, const char *fmt, ...) RJ_PRINTF(3, 4);
var *find_var(parser *P, const char *name);
void set_var(parser *P, const token *t, const char *name, rj_node n);
void set_dtype_var(parser *P, const token *t, const char *name, rj_dtype dt); /* dt = x.dtype */
/* What already uses `name` ("an input", "a ragged symbol"...), or NULL. */
const char *name_user(parser *P, const char *name);
/* name is free for a new input, value (reassign: a value may be assigned again) or symbol;
 * false after reporting at t. */
bool new_name(parser *P, const token *t, const char *name, bool reassign);
rj_dim parse_dim(parser *P);
bool parse_dtype_name(const char *s, rj_dtype *out);
bool dtype_value(const value *v, rj_dtype *out); /* "f16", "float16" or torch.float16 */
value dtype_as_value(rj_dtype dt, token at);     /* x.dtype: a dtype as such a value */
rj_node as_node(parser *P, const value *v);       /* a value used as a tensor operand */
rj_node built(parser *P, rj_node n, const token *t); /* n, reporting at t if the builder failed */
const node *scalar_of(parser *P, const value *v); /* a scalar literal given for an attribute */

/* The call a handler of the function table builds: where, under which name, which op. */
typedef struct call_site {
    const token *fn;   /* the function's name in the source */
    const char *name;  /* as written (an alias's: sign, view, amax), for messages */
    rj_op op;          /* the op called, RJ_OP_COUNT for the text format's own functions */
    const args *a;
} call_site;

typedef value (*call_build)(parser *P, const call_site *c, value **v);

/* A handler's arguments and results (parse_names.c): an integer literal within lo..hi (the
 * messages name the function and the argument); None; the node n made at the call (reported
 * there if the builder failed); nothing, after an error was reported. */
bool int_arg(parser *P, const char *fname, const char *arg, const value *v, int64_t lo, int64_t hi, int64_t *out);
bool is_none(const value *v);
value made(parser *P, const call_site *c, rj_node n);
value nothing(const call_site *c);

/* ---- parse_args.c: attributes, dims, nodes built under a function's name ------------------- */

bool literal(parser *P, const value *v, double *out);    /* a number given for an attribute */
bool inexact_int(parser *P, const value *v);             /* an integer literal a double cannot hold */
bool bool_arg(parser *P, const char *fname, const char *arg, const value *v, bool *out);
rj_node built_as(parser *P, const token *t, const char *as, rj_node n);
int dim_list(parser *P, const char *name, const value *t, int rank, int dims[RJ_MAX_RANK]);
rj_node reduce_over(parser *P, const token *fn, const char *as, rj_op op, rj_node x, const int *dims, int n, bool keep);
rj_node ones_like(rj_graph *g, rj_node x, rj_dtype t);
rj_node mean_over(parser *P, const token *fn, const char *as, rj_node x, const int *dims, int n, bool keep);

/* ---- parse_fns.c: PyTorch's functions built of other ops (handlers of parse_call.c's table) - */

value build_clamp(parser *P, const call_site *c, value **v);
value build_logsumexp(parser *P, const call_site *c, value **v);
value build_normalize(parser *P, const call_site *c, value **v);
value build_leaky_relu(parser *P, const call_site *c, value **v);
value build_elementwise_fn(parser *P, const call_site *c, value **v);
value build_exp_family(parser *P, const call_site *c, value **v);
value build_var(parser *P, const call_site *c, value **v);
value build_argmax(parser *P, const call_site *c, value **v);
value build_norm_fn(parser *P, const call_site *c, value **v);
/* The index along dim d of x, i64, shaped to broadcast against x: [n, 1, ...] by arange along a
 * dense dim, [B, 1.., j, 1..] by positions along a ragged one (the second of a pair [B, j, j]
 * too: [B, 1, j]); RJ_NONE after reporting at fn as `as`. */
rj_node index_along(parser *P, const token *fn, const char *as, rj_node x, int d);
value build_more_fn(parser *P, const call_site *c, value **v);
/* The indices of a max or min with a dim (value.has_indices): argmax / argmin of its input
 * (of a bool input as 0 and 1), reported at t; RJ_NONE after reporting. */
rj_node indices_of(parser *P, const token *t, const value *v);

/* ---- parse_views.c: views and constants (handlers of parse_call.c's table) ------------------- */

value build_narrow(parser *P, const call_site *c, value **v);
value build_split(parser *P, const call_site *c, value **v);
value build_unbind(parser *P, const call_site *c, value **v);
value build_flip(parser *P, const call_site *c, value **v);
value build_tril(parser *P, const call_site *c, value **v);
value build_expand(parser *P, const call_site *c, value **v);
value build_repeat(parser *P, const call_site *c, value **v);
value build_permute(parser *P, const call_site *c, value **v);
value build_flatten(parser *P, const call_site *c, value **v);
value build_unflatten(parser *P, const call_site *c, value **v);
value build_arange(parser *P, const call_site *c, value **v);
value build_full(parser *P, const call_site *c, value **v);
value build_like(parser *P, const call_site *c, value **v);
value build_cat(parser *P, const call_site *c, value **v);

/* ---- parse_def.c: functions -------------------------------------------------------------- */

/* def_stmt (parse.c saw "def"); a call of a function defined so far (P->run_def): *found
 * false if there is none of that name (the caller reports it), else its result (a node, or
 * pieces for a return of several values); the definitions' memory. */
void parse_def(parser *P, const token *kw);
value def_run(parser *P, const token *fn, const char *name, args *a, bool *found);
void defs_free(parser *P);

/* ---- parse_expr.c: expressions ------------------------------------------------------------- */

value parse_expr(parser *P);

/* ---- parse_call.c: the functions ----------------------------------------------------------- */

enum { SLOT_NONE, SLOT_DIMS, SLOT_SIZE, SLOT_TENSORS, SLOT_DIMS_VAR };
/* The function called `name`, and in *op the op it builds; NULL if there is none. */
const call_form *call_find(const char *name, rj_op *op);
/* How the argument about to be read (keyword `key`, or "" for positional number a->npos) is
 * written: SLOT_DIMS, a list of dims ([1, 2]); SLOT_SIZE, a size by name (pad's len);
 * SLOT_TENSORS, a list of tensors (cat's [x, y]); SLOT_DIMS_VAR, a list of dims or the rest of the
 * positional arguments as one (x.permute(0, 1, 3, 2)). */
int call_slot(const args *a, const char *key);
/* The call of a->form (or the error for a name that is none) at fn, with arguments a. */
value call_apply(parser *P, const token *fn, const char *name, args *a);
/* x.T and x.mT (batched), and x.shape[k]: the functions t and size without a call. */
value transpose_last(parser *P, const token *at, const char *what, const value *self, bool batched);
value size_value(parser *P, const token *at, const char *what, const value *self, const value *dimv);

/* x[...]: a subscript as written, each item a slice start:stop:step (any part left out), an
 * integer index, or "...". */
enum { SUB_SLICE, SUB_INDEX, SUB_ELLIPSIS };
typedef struct sub_item {
    uint8_t kind;
    bool has[3];   /* SLICE: start, stop, step given */
    int64_t v[3];  /* SLICE: their values; INDEX: v[0] */
    token at;
} sub_item;
typedef struct subscript {
    int n;
    sub_item item[RJ_MAX_RANK + 1];
} subscript;
/* self[s] at t: a tensor sliced (narrows, a squeeze per integer index) or a split's piece. */
value subscript_value(parser *P, const token *t, const value *self, const subscript *s);

#endif
