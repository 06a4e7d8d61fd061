/*
 * test_parse.c — the text format: every statement and expression form, every op by name,
 * errors with file:line:col, the source line and a caret (builder errors located at the
 * operator or call that caused them), printing and re-parsing as a fixed point, and mutated
 * programs that must never crash.
 */
#include "harness.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char design_example[] =
    "# comment\n"
    "ragged j1 : B                # j1 varies over the batch dim B\n"
    "input x : f32[B, j1, 64]\n"
    "input w : f32[64]\n"
    "h = relu(x * w + 0.5)\n"
    "s = softmax(h, dim=1)        # over the ragged dim\n"
    "m = sum(h, dim=1)            # f32[B, 64]\n"
    "p = pad(h, value=0.0)        # f32[B, max(j1), 64]\n"
    "u = unpad(p * 2.0, j1)       # f32[B, j1, 64]\n"
    "output s, m, u\n";

static char *type_of(rj_ctx *ctx, rj_graph *g, const char *name) {
    rj_node n = rj_graph_find(g, name);
    if (n == RJ_NONE) fail_msg("no node named %s", name);
    char *s = rj_node_type_str(g, n);
    assert_non_null(s);
    (void)ctx;
    return s;
}

static void assert_type(rj_ctx *ctx, rj_graph *g, const char *name, const char *want) {
    char *s = type_of(ctx, g, name);
    if (strcmp(s, want)) fail_msg("%s has type %s, expected %s", name, s, want);
    rj_string_free(ctx, s);
}

static void test_design_example(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, design_example, "design.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    assert_int_equal(rj_graph_output_count(g), 3);
    assert_type(f->ctx, g, "s", "f32[B, j1, 64]");
    assert_type(f->ctx, g, "m", "f32[B, 64]");
    assert_type(f->ctx, g, "u", "f32[B, j1, 64]");
    assert_type(f->ctx, g, "x", "f32[B, j1, 64]");
    rj_graph_free(g);
}

static void test_expressions(void **state) {
    fixture *f = *state;
    static const char src[] =
        "ragged j1 : B\n"
        "ragged j2 : B\n"
        "same j1 j2\n"
        "input x : f32[B, j1, D]\n"
        "input y : f64[B, j2, D]\n"
        "input i : i32[B, j1, D]\n"
        "input m : bool[B, j1, D]\n"
        "input g : f32[D]\n"
        "a = -x + 2 * y - (x / 3.5) * -1e-3\n"
        "c = x < y\n"
        "d = (x <= 1) == (y > -inf)\n"
        "e = where(m, i, 2)\n"
        "k = logical_and(c, logical_not(m))\n"
        "n = masked_fill(x, m, -1e9)\n"
        "q = cast(i, dtype=\"f64\") + cast(x, \"i64\")\n"
        "r = gelu(x, approximate=\"tanh\") + gelu(x) + gelu(x, approximate=\"none\")\n"
        "t = pow(abs(x), exponent=0.5) + maximum(x, y) * minimum(input=x, other=y)\n"
        "v = sum(x, 1, True) + mean(x, dim=-1, keepdim=True) + max(x, dim=2, keepdim=True)\n"
        "w = prod(i, dim=1)\n"
        "z = layer_norm(x, D, weight=g, bias=None, eps=1e-6) + rms_norm(x, [D], g)\n"
        "s = log_softmax(\n"
        "        x,          # newlines inside parentheses are ignored\n"
        "        dim=1)\n"
        "p = pad(x, value=True, len=L)\n"
        "l = sign(sin(x)) + cos(x) + tanh(x) + exp(x) + log(x) + sqrt(x) + rsqrt(x) + \\\n"
        "    sigmoid(x) + silu(x) + relu(x) + neg(x) + sgn(x)\n"
        "b = eq(x, y) != ne(x, y)\n"
        "o = ge(x, 0) >= gt(x, 0)\n"
        "output a, c, d, e, k, n, q, r, t, v, w, z, s, p, l, b, o\n";
    rj_graph *g = rj_graph_parse(f->ctx, src, "exprs.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    assert_type(f->ctx, g, "a", "f64[B, j1, D]");
    assert_type(f->ctx, g, "c", "bool[B, j1, D]");
    assert_type(f->ctx, g, "e", "i32[B, j1, D]");
    assert_type(f->ctx, g, "q", "f64[B, j1, D]");
    assert_type(f->ctx, g, "v", "f32[B, j1, D]");
    assert_type(f->ctx, g, "w", "i64[B, D]");
    assert_type(f->ctx, g, "p", "f32[B, L, D]");
    assert_type(f->ctx, g, "s", "f32[B, j1, D]");
    rj_graph_free(g);
}

static void expect_error(rj_ctx *ctx, const char *src, rj_status s, const char *first_line, int caret_col);

/* head + a and head + b parse to the same graph (the same `graph` dump), returned. */
/* d with its unnamed values (v12) numbered by first appearance and runs of spaces made one: two
 * graphs that differ only in how many literal nodes their parses made (a number Python's
 * arithmetic folded) print alike, their wiring kept. In place. */
static void canonical_names(char *d) {
    long seen[512];
    int nseen = 0;
    char *o = d, prev = 0;
    for (const char *p = d; *p;) {
        if (*p == 'v' && !isalnum((unsigned char)prev) && prev != '_' && isdigit((unsigned char)p[1])) {
            long num = strtol(p + 1, (char **)&p, 10), id = 0;
            while (id < nseen && seen[id] != num) id++;
            if (id == nseen && nseen < 512) seen[nseen++] = num;
            char name[24];
            int len = snprintf(name, sizeof name, "v%ld", id);
            memcpy(o, name, (size_t)len); /* never longer than what it replaces; no NUL over p */
            o += len;
            prev = '0';
            continue;
        }
        char ch = *p++;
        if (!(ch == ' ' && prev == ' ')) *o++ = ch; /* the comments' column moves with the names */
        prev = ch;
    }
    *o = 0;
}

static char *same_graph(rj_ctx *ctx, const char *head, const char *a, const char *b) {
    char src[1024], *dump[2];
    for (int k = 0; k < 2; k++) {
        snprintf(src, sizeof src, "%s%s", head, k ? b : a);
        rj_graph *g = rj_graph_parse(ctx, src, "same.rj");
        if (!g) fail_msg("%s", rj_ctx_error(ctx));
        dump[k] = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
        assert_non_null(dump[k]);
        rj_graph_free(g);
        canonical_names(dump[k]);
    }
    if (strcmp(dump[0], dump[1])) fail_msg("method syntax:\n%s\nfunction syntax:\n%s", dump[0], dump[1]);
    rj_string_free(ctx, dump[1]);
    return dump[0];
}

/* src fails to parse with status s and a message starting with msg (what: the case). */
static void expect_error_start(rj_ctx *ctx, const char *src, const char *what, rj_status s, const char *msg) {
    rj_graph *e = rj_graph_parse(ctx, src, "t.rj");
    if (e) {
        rj_graph_free(e);
        fail_msg("no error for %s", what);
    }
    if (rj_ctx_status(ctx) != s || strncmp(rj_ctx_error(ctx), msg, strlen(msg)))
        fail_msg("%s: got %s: %s\nexpected %s: %s", what, rj_status_str(rj_ctx_status(ctx)), rj_ctx_error(ctx),
                 rj_status_str(s), msg);
}

/* PyTorch's porting syntax: methods, ~, &, | give the graph the function forms give. */
static void test_porting_syntax(void **state) {
    fixture *f = *state;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput m : bool[B, j1, 4]\n";
    static const char methods[] =
        "a = x.relu().sum(dim=1)\n"
        "b = (x * 2.0).softmax(1)\n"
        "c = x.masked_fill(~m, 0.0)\n"
        "d = (x > 0.0) & m | ~m & m\n"
        "e = x.pad(0.0).sum(-2, keepdim=True)\n"
        "output a, b, c, d, e\n";
    static const char functions[] =
        "a = sum(relu(x), dim=1)\n"
        "b = softmax(x * 2.0, 1)\n"
        "c = masked_fill(x, logical_not(m), 0.0)\n"
        "d = logical_or(logical_and(x > 0.0, m), logical_and(logical_not(m), m))\n"
        "e = sum(pad(x, 0.0), -2, keepdim=True)\n"
        "output a, b, c, d, e\n";
    rj_string_free(f->ctx, same_graph(f->ctx, head, methods, functions));
    expect_error(f->ctx, "ragged j1 : B\ninput x : f32[B, j1, 4]\ny = x.shape\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:3:7: '.shape' is a tuple of sizes, which ragjit does not have: write x.shape[k] or x.size(k) "
                 "for dim k", 7);
    expect_error(f->ctx, "ragged j1 : B\ninput x : f32[B, j1, 4]\ny = x.sofmax(1)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:3:7: unknown method 'sofmax' (did you mean 'softmax'?)", 7);
}

/* The dump's fresh names (v12) renumbered in order of appearance, in place: two spellings that
 * make different literals (x.size(2) makes 2 and 4, the 4 it stands for only 4) number their
 * nodes differently. Runs of spaces are one space. */
static void renumber(char *s) {
    long seen[256];
    int nseen = 0;
    char out[8192];
    size_t o = 0;
    for (size_t i = 0; s[i] && o + 16 < sizeof out;) {
        bool word = s[i] == 'v' && (i == 0 || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_')) &&
                    isdigit((unsigned char)s[i + 1]);
        if (!word) { /* and the comments' alignment, which follows the names' lengths */
            if (!(s[i] == ' ' && s[i + 1] == ' ')) out[o++] = s[i];
            i++;
            continue;
        }
        char *end;
        long n = strtol(s + i + 1, &end, 10);
        int k = 0;
        while (k < nseen && seen[k] != n) k++;
        if (k == nseen && nseen < 256) seen[nseen++] = n;
        o += (size_t)snprintf(out + o, sizeof out - o, "v%d", k);
        i = (size_t)(end - s);
    }
    out[o] = 0;
    assert_true(strlen(out) <= strlen(s) + 64);
    strcpy(s, out);
}

/* head + a and head + b make the same graph but for the numbers of fresh names. */
static void same_nodes(rj_ctx *c, const char *head, const char *a, const char *b) {
    char src[2048], *dump[2];
    for (int k = 0; k < 2; k++) {
        snprintf(src, sizeof src, "%s%s", head, k ? b : a);
        rj_graph *g = rj_graph_parse(c, src, "t.rj");
        if (!g) fail_msg("%s", rj_ctx_error(c));
        assert_non_null(dump[k] = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph"));
        rj_graph_free(g);
        char *copy = malloc(strlen(dump[k]) + 65);
        assert_non_null(copy);
        strcpy(copy, dump[k]);
        renumber(copy);
        rj_string_free(c, dump[k]);
        dump[k] = copy;
    }
    if (strcmp(dump[0], dump[1])) fail_msg("PyTorch's spelling:\n%s\nragjit's:\n%s", dump[0], dump[1]);
    free(dump[0]);
    free(dump[1]);
}

/* Issue 33: what a newcomer from PyTorch writes is accepted with PyTorch's meaning, or answered
 * with what to write instead. */
static void test_from_pytorch(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    char src[2048];
    rj_graph *g;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput W : f32[8, 4]\n"
                               "input q : f32[3, 4, 2]\ninput v : f32[4]\n";
    /* W.T, W.t() and .mT are transposes; module prefixes name the same functions; a size is a
     * literal where the dim is a constant, the size's name where it is not */
    static const char pytorch[] =
        "a = x @ W.T + (x @ W.t()) * F.relu(x @ W.mT)\n"
        "b = torch.softmax(x, dim=1) + F.softmax(x, 1) + torch.nn.functional.gelu(x) + nn.functional.silu(x)\n"
        "c = q.mT.sum(-2) + v.T + v.t()\n"
        "d = x / x.size(2) + x.reshape([B, j1, x.shape[-1]]) + x.amax(1, keepdim=True) + x.amin(1, keepdim=True)\n"
        "output a, b, c, d\n";
    static const char ragjit[] =
        "a = x @ transpose(W, 0, 1) + (x @ transpose(W, 0, 1)) * relu(x @ transpose(W, 0, 1))\n"
        "b = softmax(x, dim=1) + softmax(x, 1) + gelu(x) + silu(x)\n"
        "c = transpose(q, 1, 2).sum(-2) + v + v\n"
        "d = x / 4 + x.reshape([B, j1, 4]) + max(x, 1, keepdim=True) + min(x, 1, keepdim=True)\n"
        "output a, b, c, d\n";
    same_nodes(c, head, pytorch, ragjit);
    /* (1) a mask of [B, j1] meets x of [B, j1, D] from the last dim: unsqueeze(-1) is the fix */
    static const char masked[] = "ragged j1 : B\ninput x : f32[B, j1, D]\ninput mask : bool[B, j1]\n"
                                 "y = x.masked_fill(~mask, 0.0)\noutput y\n";
    expect_error(c, masked, RJ_ERR_SHAPE, "t.rj:4:7: masked_fill: f32[B, j1, D] and bool[B, j1] differ in dim 1 "
                 "(ragged j1 vs B); dims are matched from the last: to apply bool[B, j1] along the leading dims of "
                 "f32[B, j1, D], write mask.unsqueeze(-1) (bool[B, j1, 1])", 7);
    g = rj_graph_parse(c, "ragged j1 : B\ninput x : f32[B, j1, D]\ninput mask : bool[B, j1]\n"
                                    "y = x.masked_fill(~mask.unsqueeze(-1), 0.0)\noutput y\n", "t.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    assert_type(c, g, "y", "f32[B, j1, D]");
    rj_graph_free(g);
    expect_error_start(c, "input x : f32[3, 4, 5]\ny = x * (x.sum(2) > 0)\noutput y\n", "unnamed prefix",
                       RJ_ERR_SHAPE, "t.rj:2:7: mul: f32[3, 4, 5] and bool[3, 4] differ in dim 1 (4 vs 3); dims are "
                       "matched from the last: to apply bool[3, 4] along the leading dims of f32[3, 4, 5], write "
                       "(...).unsqueeze(-1) (bool[3, 4, 1])");
    /* (2) a ragged symbol's name never declared is a dense size: warned where it appears, and
     * named in the error it leads to */
    static const char undeclared[] = "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput y : f32[B, j2, 4]\n";
    snprintf(src, sizeof src, "%sz = x + y\noutput z\n", undeclared);
    expect_error(c, src, RJ_ERR_SHAPE, "t.rj:4:7: add: f32[B, j1, 4] and f32[B, j2, 4] differ in dim 1 (ragged j1 vs "
                 "j2); j2 is a dense size (a name is one unless declared ragged): if its length varies by item, "
                 "declare `ragged j2 : B` before its first use", 7);
    snprintf(src, sizeof src, "%soutput x, y\n", undeclared);
    assert_non_null(g = rj_graph_parse(c, src, "w.rj"));
    assert_string_equal(rj_graph_warnings(g), "w.rj:3:18: warning: 'j2' declares a new dense size here (a name is one "
                        "unless declared ragged); if its length varies by item, declare `ragged j2 : B` before this "
                        "line\n");
    rj_graph_free(g);
    /* (3) .T of more than 2 dims reverses them all in PyTorch: say what to write; (4) a
     * run-time size is no value, x.shape alone is a tuple, and an unknown method gets the
     * closest name rather than every function; (5) Python's spelling of the keywords; (7) only
     * PyTorch's modules. Statements after `dense`; col 0: the message's start only. */
    static const char dense[] = "ragged j1 : B\ninput x : f32[B, j1, D]\ninput W : f32[8, 4, 2]\n";
    static const struct {
        const char *stmt;
        rj_status s;
        const char *msg;
        int col;
    } cases[] = {
        {"y = W.T", RJ_ERR_SHAPE, "t.rj:4:7: .T: the tensor has 3 dims; PyTorch's .T and t() are the transpose of a "
         "2-D tensor (.T of more dims reverses them all): write .mT or transpose(-2, -1) for the last two", 7},
        {"y = W.t()", RJ_ERR_SHAPE, "t.rj:4:7: t: the tensor has 3 dims", 0},
        {"y = x / x.size(-1)", RJ_ERR_PARSE, "t.rj:4:9: the size D is known only at run time and is not a tensor: "
         "sizes go in shapes, pad's len and normalized_shape; to compute with a size, declare that dim as a number", 0},
        {"y = x * x.shape[1]", RJ_ERR_PARSE, "t.rj:4:9: j1 is a ragged symbol (its length varies by item), not a "
         "tensor: positions(j1) gives each row's index", 0},
        {"y = x * x.size(3)", RJ_ERR_SHAPE, "t.rj:4:16: size: dim 3 is out of range for a tensor of 3 dims", 0},
        {"y = x * x.size()", RJ_ERR_PARSE, "t.rj:4:11: size: name one dim, x.size(k) or x.shape[k]", 0},
        {"y = x.frobnicate(1)", RJ_ERR_PARSE, "t.rj:4:7: unknown method 'frobnicate': x.frobnicate(...) would be "
         "frobnicate(x, ...), and there is no function frobnicate (docs/guide.md lists them)", 7},
        {"y = x.transpos(1, 2)", RJ_ERR_PARSE, "t.rj:4:7: unknown method 'transpos' (did you mean 'transpose'?)", 7},
        {"y = x.sum(1, keepdim=true)", RJ_ERR_PARSE, "t.rj:4:22: undefined name 'true' (did you mean 'True'?)", 22},
        {"y = x.sum(1, keepdim=FALSE)", RJ_ERR_PARSE, "t.rj:4:22: undefined name 'FALSE' (did you mean 'False'?)", 22},
        {"y = layer_norm(x, D, weight=none)", RJ_ERR_PARSE, "t.rj:4:29: undefined name 'none' (did you mean 'None'?)",
         29},
        {"y = torch.nn.relu(x)", RJ_ERR_PARSE, "t.rj:4:14: 'torch.nn.relu' is not a module ragjit knows: write "
         "relu(...), or F.relu(...), torch.relu(...), torch.nn.functional.relu(...)", 14},
        {"y = F.softmx(x, 1)", RJ_ERR_PARSE, "t.rj:4:7: unknown function 'softmx' (did you mean 'softmax'?)", 7},
        {"y = torch", RJ_ERR_PARSE, "t.rj:4:5: undefined name 'torch'", 5},
        {"y = F.relu", RJ_ERR_PARSE, "t.rj:4:7: 'relu' is a function: call it (relu(...)); the dtypes are torch.float32, float64, float16, "
         "bfloat16, int32, int64 and bool", 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(src, sizeof src, "%s%s\noutput y\n", dense, cases[i].stmt);
        if (cases[i].col) expect_error(c, src, cases[i].s, cases[i].msg, cases[i].col);
        else expect_error_start(c, src, cases[i].stmt, cases[i].s, cases[i].msg);
    }
    /* (6) reductions over several dims: one per dim, the last first; duplicates are an error */
    static const char four[] = "ragged j1 : B\ninput x : f32[B, j1, 4, 5]\n";
    same_nodes(c, four,
               "a = x.sum(dim=(2, 3))\nb = x.mean((-1, 1, 2))\nc = x.amax(dim=[3, -2], keepdim=True)\n"
               "d = torch.amin(x, (1, 3))\ne = x.prod((1,), keepdim=False)\nf = F.layer_norm(x, (4, 5))\n"
               "output a, b, c, d, e, f\n",
               "a = sum(sum(x, 3), 2)\nb = mean(mean(mean(x, 3), 2), 1)\n"
               "c = max(max(x, 3, keepdim=True), 2, keepdim=True)\nd = min(min(x, 3), 1)\ne = prod(x, 1)\n"
               "f = layer_norm(x, [4, 5])\noutput a, b, c, d, e, f\n");
    static const struct {
        const char *stmt, *msg;
        int col;
    } dims_cases[] = {
        {"y = x.sum(dim=(1, -3))", "t.rj:3:11: sum: dim 1 appears multiple times in the list of dims", 11},
        {"y = x.sum(dim=(1, 4))", "t.rj:3:11: sum: dim 4 is out of range for a tensor of 4 dims", 11},
        {"y = x.sum(dim=())", "t.rj:3:11: sum: dim=() names no dim (name the dims to reduce)", 11},
        {"y = x.sum(dim=(1, 2.0))", "t.rj:3:19: a tuple holds integers (dims) or sizes", 19},
        {"y = x.sum(dim=(1, B))", "t.rj:3:11: sum: the dims must be integers", 11},
        {"y = x * (1, 2)", "t.rj:3:9: a tuple is not a tensor", 9},
        {"y = x.softmax(dim=(1, 2))", "t.rj:3:15: softmax: dim must be an integer", 15},
    };
    for (size_t i = 0; i < sizeof dims_cases / sizeof dims_cases[0]; i++) {
        snprintf(src, sizeof src, "%s%s\noutput y\n", four, dims_cases[i].stmt);
        rj_status want = strstr(dims_cases[i].msg, "appears") || strstr(dims_cases[i].msg, "range") ? RJ_ERR_SHAPE
                                                                                                    : RJ_ERR_PARSE;
        expect_error(c, src, want, dims_cases[i].msg, dims_cases[i].col);
    }
    /* a variable named F keeps its methods */
    g = rj_graph_parse(c, "input F : f32[4]\ny = F.relu()\noutput y\n", "t.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    rj_graph_free(g);
    /* integer literals beyond 2^53 stay exact: masked_fill becomes a where, pad refuses */
    same_nodes(c, "input n : i64[N]\ninput m : bool[N]\n", "a = n.masked_fill(m, 9007199254740993)\noutput a\n",
               "a = where(m, 9007199254740993, n)\noutput a\n");
    expect_error(c, "input n : i64[B, N]\na = pad(n, value=-9007199254740993)\noutput a\n", RJ_ERR_ARG,
                 "t.rj:2:12: pad: the value is an integer beyond 2^53, which pad would round (it takes a double); "
                 "pad with 0 and write the value with where()", 12);
}

/* Index ops and views: PyTorch's method forms and argument orders give the graph the
 * function forms give, -1 is inferred in a reshape, and the shape rules are errors that say
 * what is wrong. */
static void test_index_syntax(void **state) {
    fixture *f = *state;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 8]\ninput t : i64[B, j1]\n"
                               "input tab : f32[V, 8]\ninput s : i32[3]\n";
    static const char methods[] =
        "a = x.log_softmax(-1).take_along_dim(t.unsqueeze(-1), dim=-1).squeeze(-1)\n"
        "b = embedding(t, tab).sum(1)\n" /* F.embedding's order: the indices first */
        "c = x.gather(2, t.unsqueeze(2)) + x.index_select(-1, s).sum(-1, keepdim=True)\n"
        "d = x.reshape([B, j1, 2, -1]).view([B, j1, 8]) * positions(j1).unsqueeze(-1)\n"
        "output a, b, c, d\n";
    static const char functions[] =
        "a = squeeze(take_along_dim(log_softmax(x, 2), unsqueeze(t, 2), 2), 2)\n"
        "b = sum(embedding(tab, t), dim=1)\n"
        "c = gather(x, 2, unsqueeze(t, -1)) + sum(index_select(x, 2, s), dim=2, keepdim=True)\n"
        "d = reshape(reshape(x, [B, j1, 2, 4]), [B, j1, 8]) * unsqueeze(positions(j1), 2)\n"
        "output a, b, c, d\n";
    char src[1024];
    char *dump = same_graph(f->ctx, head, methods, functions);
    /* the dump parses back to itself */
    rj_graph *g = rj_graph_parse(f->ctx, dump, "dump.rj");
    if (!g) fail_msg("the dump does not parse: %s\n%s", rj_ctx_error(f->ctx), dump);
    rj_graph_free(g);
    rj_string_free(f->ctx, dump);
    static const struct {
        const char *line, *msg;
        rj_status s;
    } bad[] = {
        {"y = embedding(x, t)", "t.rj:6:5: embedding: the table must be a dense [V, D] tensor, got f32[B, j1, 8]",
         RJ_ERR_SHAPE},
        {"y = embedding(tab, x > 0.0)", "t.rj:6:5: embedding: the indices must be an integer tensor (i32 or i64), got "
         "bool[B, j1, 8] (a bool mask selects with where or masked_fill)", RJ_ERR_DTYPE},
        {"y = gather(x, 2, t)", "t.rj:6:5: gather: the index i64[B, j1] must have the rank of the input f32[B, j1, 8]",
         RJ_ERR_SHAPE},
        {"y = gather(x, 0, t.unsqueeze(-1))", "t.rj:6:5: gather: cannot index the batch dim 0 of the jagged tensor "
         "f32[B, j1, 8]", RJ_ERR_SHAPE},
        {"y = take_along_dim(x, s.reshape([1, 3, 1]), 1)", "t.rj:6:5: take_along_dim: the index i32[1, 3, 1] into the "
         "ragged dim 1 of f32[B, j1, 8] needs a row of indices per item (its dim 0 must be B)", RJ_ERR_SHAPE},
        {"y = index_select(x, 1, s)", "t.rj:6:5: index_select: dim 1 of f32[B, j1, 8] is ragged (gather or "
         "take_along_dim index an item's rows)", RJ_ERR_SHAPE},
        {"y = x.reshape([B, j1, 3, 3])", "t.rj:6:7: reshape: f32[B, j1, 8] to f32[B, j1, 3, 3]: the element counts "
         "differ", RJ_ERR_SHAPE},
        {"y = x.unsqueeze(1)", "t.rj:7:8: output: a jagged tensor with its ragged dim at position 2 (a transpose, or a "
         "row of columns [B, 1, j]) cannot be an output", RJ_ERR_UNSUPPORTED},
        {"y = sum(x.unsqueeze(1), dim=3)", "t.rj:6:5: sum: f32[B, 1, j1, 8] (a jagged tensor as a row of columns) only "
         "takes elementwise ops", RJ_ERR_UNSUPPORTED},
        {"y = x.reshape([B, j1, -2])", "t.rj:6:23: a dim must not be negative (-1 is reshape's inferred size)",
         RJ_ERR_PARSE},
        {"y = positions(x)", "t.rj:6:15: positions: the argument must be a ragged symbol (positions(j1))", RJ_ERR_PARSE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(src, sizeof src, "ragged j1 : B\ninput x : f32[B, j1, 8]\ninput t : i64[B, j1]\ninput tab : f32[V, "
                 "8]\ninput s : i32[3]\n%s\noutput y\n", bad[i].line);
        expect_error_start(f->ctx, src, bad[i].line, bad[i].s, bad[i].msg);
    }
}

/* The dump of a graph with its fresh names (v12) unnumbered and runs of spaces as one: two
 * spellings that make a different number of literal nodes number their values differently. */
static char *dump_unnumbered(rj_ctx *ctx, const char *src) {
    rj_graph *g = rj_graph_parse(ctx, src, "same.rj");
    if (!g) fail_msg("%s", rj_ctx_error(ctx));
    char *d = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    assert_non_null(d);
    rj_graph_free(g);
    char *w = d, prev = ' '; /* the source's character before r (w writes over it) */
    for (const char *r = d; *r; r++) {
        char c = *r;
        if (c == ' ' && prev == ' ') continue; /* the column of the type comments moves too */
        *w++ = c;
        if (c == 'v' && !(isalnum((unsigned char)prev) || prev == '_') && isdigit((unsigned char)r[1]))
            while (isdigit((unsigned char)r[1])) r++;
        prev = *r;
    }
    *w = 0;
    return d;
}

/* Slices: narrow, x[a:b] with Python's clamping, split and chunk with PyTorch's sizes, tuple
 * assignment; each way of asking for what narrow cannot do is an error naming it. */
/* Heads as PyTorch's jagged layout has them: [B, H, j1, D] by view + transpose(1, 2) or by
 * unflatten, and what this version refuses on them, by name. */
static void test_heads_syntax(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 64]\n";
    same_nodes(c, head, "q = x.view(B, j1, 4, 16).transpose(1, 2)\ny = (q @ q.transpose(-2, -1)).softmax(-1) @ q\n"
               "output y\n",
               "q = transpose(unflatten(x, 2, [4, 16]), 1, 2)\ny = matmul(softmax(matmul(q, transpose(q, 2, 3)), dim=3), q)\n"
               "output y\n");
    char src[1024];
    static const struct {
        const char *stmt;
        rj_status s;
        const char *msg;
    } cases[] = {
        {"y = pad(q, 0.0)", RJ_ERR_UNSUPPORTED, "t.rj:4:5: pad: f32[B, 4, j1, 16] is a jagged tensor per head"},
        {"y = q.permute(0, 2, 3, 1).transpose(0, 1)", RJ_ERR_UNSUPPORTED, "t.rj:4:27: transpose: dims 0 and 1"},
        {"y = q.reshape(B, 64, j1)", RJ_ERR_SHAPE, "t.rj:4:7: reshape: f32[B, 4, j1, 16] to f32[B, 64, j1]"},
        {"y = q @ q", RJ_ERR_SHAPE, "t.rj:4:7: matmul: f32[B, 4, j1, 16] times f32[B, 4, j1, 16]: per item and head"},
        {"y = q.transpose(0, 2)", RJ_ERR_UNSUPPORTED, "t.rj:4:7: transpose: dims 0 and 2 of f32[B, 4, j1, 16]"},
        {"y = q.sum(-1)", RJ_ERR_UNSUPPORTED, "t.rj:4:7: sum: f32[B, 4, j1]: a ragged dim at position 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(src, sizeof src, "%sq = x.view(B, j1, 4, 16).transpose(1, 2)\n%s\noutput y\n", head, cases[i].stmt);
        expect_error_start(c, src, cases[i].stmt, cases[i].s, cases[i].msg);
    }
}

/* Functions: a body run at each call gives the graph its written-out form gives; its locals
 * stay local; errors inside it name the call. */
static void test_def_syntax(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 8]\ninput w : f32[8, 8]\n";
    same_nodes(c, head,
               "def block(x, w, scale):\n    h = relu(x @ w)  # local\n\n    return h * scale + x, h\n"
               "y, h1 = block(x, w, 2.0)\nz, h2 = block(y, w=w, scale=0.5)\noutput z, h1\n",
               "h1 = relu(x @ w)\ny = h1 * 2.0 + x\nh2 = relu(y @ w)\nz = h2 * 0.5 + y\noutput z, h1\n");
    char src[1024];
    static const struct {
        const char *text;
        rj_status s;
        const char *msg;
    } cases[] = {
        {"def f(a):\n    b = a @ a\n    return b\ny = f(x)\n", RJ_ERR_UNSUPPORTED,
         "t.rj:5:11: matmul: f32[B, j1, 8] times f32[B, j1, 8]"},
        {"def f(a):\n    b = relu(a)\ny = f(x)\n", RJ_ERR_PARSE,
         "t.rj:4:1: def f: the body (the indented lines below) must end with a return"},
        {"def relu(a):\n    return a\ny = relu(x)\n", RJ_ERR_PARSE, "t.rj:4:5: 'relu' is one of ragjit's functions"},
        {"def f(a):\n    return a\ny = f(x, x)\n", RJ_ERR_PARSE, "t.rj:6:10: f takes 1 arguments, 2 given"},
        {"def f(a):\n    return a\ny = f(b=x)\n", RJ_ERR_PARSE, "t.rj:6:7: f has no parameter 'b'"},
        {"def f(a, b):\n    return a\ny = f(x)\n", RJ_ERR_PARSE, "t.rj:6:5: f: missing argument 'b'"},
        {"def f(a):\n    input z : f32[3]\n    return a\ny = f(x)\n", RJ_ERR_PARSE,
         "t.rj:5:5: a function's body holds assignments and its return: 'input' belongs outside it (in f, called at "
         "line 7)"},
        {"def f(a):\n    return f(a)\ny = f(x)\n", RJ_ERR_PARSE, "t.rj:5:12: f: calls nest more than 32 deep"},
        {"def f(a):\n    t = a * 2.0\n    return t\ny = f(x) + t\n", RJ_ERR_PARSE, "t.rj:7:12: undefined name 't'"},
        {"def f(a, a):\n    return a\ny = f(x, x)\n", RJ_ERR_PARSE, "t.rj:4:10: parameter 'a' appears twice"},
        {"def f(a):\n    return a\ndef f(a):\n    return a\ny = f(x)\n", RJ_ERR_PARSE,
         "t.rj:6:5: function 'f' is defined already"},
        {"def f(a): return a\ny = f(x)\n", RJ_ERR_PARSE, "t.rj:4:11: the body of a function goes on the lines below"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(src, sizeof src, "%s%soutput y\n", head, cases[i].text);
        expect_error_start(c, src, cases[i].text, cases[i].s, cases[i].msg);
    }
}

static void test_slice_syntax(void **state) {
    fixture *f = *state;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 64]\ninput W : f32[96, 48]\n";
    static const char slices[] =
        "a = x[..., 8:24] + x[:, :, -16:] + x[:, :, :16] + x[..., 48:][:, :, ::1]\n"
        "b = x[..., 0:1000] + x[..., -1000:1000] + x[:, :, :] + x[..., 0:]\n"
        "c = x[..., 3] + x[:, :, -1]\n"
        "d = linear(x[..., :48], W[16:64, :]) + W[1, :48] + x[..., 10:10].sum(-1, keepdim=True)\n"
        "q, k, v = x.split(24, dim=2)\n"
        "c1, c2, c3 = torch.chunk(x, 3, dim=-1)\n"
        "s1, s2 = x.split([16, 48], -1)\n"
        "e0, e = x.split(32, dim=-1)\n"
        "output a, b, c, d, q, k, v, c1, c3, s2, e\n";
    static const char narrows[] =
        "a = narrow(x, 2, 8, 16) + x.narrow(2, 48, 16) + torch.narrow(x, -1, 0, 16) + x.narrow(-1, -16, 16)\n"
        "b = x + x + x + x\n"
        "c = x.narrow(2, 3, 1).squeeze(2) + x.narrow(2, 63, 1).squeeze(-1)\n"
        "d = linear(x.narrow(2, 0, 48), W.narrow(0, 16, 48)) + W.narrow(0, 1, 1).squeeze(0) + "
        "x.narrow(2, 10, 0).sum(-1, keepdim=True)\n"
        "q = x.narrow(2, 0, 24)\nk = x.narrow(2, 24, 24)\nv = x.narrow(2, 48, 16)\n"
        "c1 = x.narrow(2, 0, 22)\nc2 = x.narrow(2, 22, 22)\nc3 = x.narrow(2, 44, 20)\n"
        "s1 = x.narrow(2, 0, 16)\ns2 = x.narrow(2, 16, 48)\n"
        "e0 = x.narrow(2, 0, 32)\ne = x.narrow(2, 32, 32)\n"
        "output a, b, c, d, q, k, v, c1, c3, s2, e\n";
    char src[2048], *dump[2];
    for (int k = 0; k < 2; k++) {
        snprintf(src, sizeof src, "%s%s", head, k ? narrows : slices);
        dump[k] = dump_unnumbered(f->ctx, src);
    }
    if (strcmp(dump[0], dump[1])) {
        size_t at = 0;
        while (dump[0][at] == dump[1][at]) at++;
        while (at > 0 && dump[0][at - 1] != '\n') at--;
        fail_msg("slices and narrows differ from:\n%.300s\n---\n%.300s", dump[0] + at, dump[1] + at);
    }
    rj_string_free(f->ctx, dump[1]);
    snprintf(src, sizeof src, "%s%s", head, slices);
    rj_graph *g = rj_graph_parse(f->ctx, src, "t.rj");
    char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    rj_graph_free(g);
    g = rj_graph_parse(f->ctx, text, "dump.rj"); /* the dump parses back */
    if (!g) fail_msg("the dump does not parse: %s\n%s", rj_ctx_error(f->ctx), text);
    assert_type(f->ctx, g, "c", "f32[B, j1]");
    assert_type(f->ctx, g, "c3", "f32[B, j1, 20]");
    assert_type(f->ctx, g, "d", "f32[B, j1, 48]");
    rj_graph_free(g);
    rj_string_free(f->ctx, text);
    rj_string_free(f->ctx, dump[0]);
    /* chunk's sizes are ceil(size / chunks) each: 4 chunks of 6 give 2, 2, 2 (three pieces) */
    g = rj_graph_parse(f->ctx, "input y : f32[6]\na, b, c = y.chunk(4)\nd, e = y.split(5)\nf = y.chunk(2)[-1]\n"
                         "output a, c, e, f\n", "t.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    assert_type(f->ctx, g, "c", "f32[2]");
    assert_type(f->ctx, g, "e", "f32[1]");
    assert_type(f->ctx, g, "f", "f32[3]");
    rj_graph_free(g);
    static const struct {
        const char *line, *msg;
        rj_status s;
    } bad[] = {
        {"y = x[:, 1:]", "t.rj:4:10: narrow: dim 1 of f32[B, j1, 64] is the ragged dim j1: slicing a ragged dim is not "
         "supported", RJ_ERR_UNSUPPORTED},
        {"y = x[0]", "t.rj:4:7: narrow: dim 0 of f32[B, j1, 64] is the batch dim: slicing the batch dim of a jagged "
         "tensor is not supported", RJ_ERR_UNSUPPORTED},
        {"y = x.narrow(1, 0, 2)", "t.rj:4:7: narrow: dim 1 of f32[B, j1, 64] is the ragged dim j1", RJ_ERR_UNSUPPORTED},
        {"y = xd.narrow(2, 0, 2)", "t.rj:4:8: narrow: dim 2 of f32[B, j1, D] has the size D, known only at run time",
         RJ_ERR_UNSUPPORTED},
        {"y = xd[..., :4]", "t.rj:4:13: narrow: dim 2 of f32[B, j1, D] has the size D", RJ_ERR_UNSUPPORTED},
        {"y = x.narrow(3, 0, 2)", "t.rj:4:7: narrow: dim 3 is out of range for f32[B, j1, 64] (3 dims)", RJ_ERR_SHAPE},
        {"y = x.narrow(2, 0, -1)", "t.rj:4:7: narrow: length -1 is negative", RJ_ERR_ARG},
        {"y = x.narrow(2, 60, 8)", "t.rj:4:7: narrow: start 60 + length 8 exceeds the size 64", RJ_ERR_ARG},
        {"y = x.narrow(2, -65, 1)", "t.rj:4:7: narrow: start -65 is out of range for dim 2", RJ_ERR_ARG},
        {"y = x.narrow(2, 1.5, 1)", "t.rj:4:17: narrow: start must be an integer", RJ_ERR_PARSE},
        {"y = x[..., ::2]", "t.rj:4:12: slice step 2 is not supported (only step 1: x[..., a:b])", RJ_ERR_UNSUPPORTED},
        {"y = x[..., 64]", "t.rj:4:12: index 64 is out of range for dim 2 of size 64", RJ_ERR_SHAPE},
        {"y = x[..., ..., 1]", "t.rj:4:12: a subscript can have only one '...'", RJ_ERR_PARSE},
        {"y = x[:, :, :, :]", "t.rj:4:6: too many indices for a tensor of 3 dims: 4 were given", RJ_ERR_SHAPE},
        {"y = x[..., None]", "t.rj:4:12: x[..., None] (a new dim) is not supported: write x.unsqueeze(dim)", RJ_ERR_PARSE},
        {"y = x[..., 1.5]", "t.rj:4:12: a subscript holds integer literals", RJ_ERR_PARSE},
        {"y = x[..., 1:2", "t.rj:5:1: expected ',' or ']', found 'output'", RJ_ERR_PARSE},
        {"y, z = x.split(24, dim=2)", "t.rj:4:1: 2 names on the left of '=', but the right gives 3 tensors",
         RJ_ERR_PARSE},
        {"y, z, w = x", "t.rj:4:1: 3 names on the left of '=', but the right gives one tensor, not 3", RJ_ERR_PARSE},
        {"y = x.split(32, dim=-1)", "t.rj:4:5: the 2 tensors of a split or chunk are not one tensor", RJ_ERR_PARSE},
        {"y = x.split(32, dim=-1)[2]", "t.rj:4:25: index 2 is out of range for the 2 tensors of a split or chunk",
         RJ_ERR_SHAPE},
        {"y = x.split(32, dim=-1)[0:1]", "t.rj:4:24: the tensors of a split or chunk take one integer index",
         RJ_ERR_PARSE},
        {"y, z = x.split(32, dim=1)", "t.rj:4:20: narrow: dim 1 of f32[B, j1, 64] is the ragged dim j1",
         RJ_ERR_UNSUPPORTED},
        {"y, z = x.split([10, 20], dim=2)", "t.rj:4:16: split: the sizes add up to 30, but dim 2 has size 64",
         RJ_ERR_SHAPE},
        {"y, z = x.split(0, dim=2)", "t.rj:4:16: split: split_size can only be 0 if the dim's size is 0", RJ_ERR_ARG},
        {"y, z = x.split(-1, dim=2)", "t.rj:4:16: split: split_size=-1 is negative", RJ_ERR_PARSE},
        {"y, z = x.chunk(0, dim=2)", "t.rj:4:16: chunk: chunks=0 is out of range", RJ_ERR_PARSE},
        {"y, z = x.chunk([1, 2], dim=2)", "t.rj:4:16: chunk: chunks must be an integer", RJ_ERR_PARSE},
        {"y, z = x.split(32, dim=5)", "t.rj:4:20: split: dim 5 is out of range for a tensor of 3 dims", RJ_ERR_SHAPE},
        {"y, = x", "t.rj:4:4: expected a name after ','", RJ_ERR_PARSE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(src, sizeof src, "ragged j1 : B\ninput x : f32[B, j1, 64]\ninput xd : f32[B, j1, D]\n%s\noutput y\n",
                 bad[i].line);
        expect_error_start(f->ctx, src, bad[i].line, bad[i].s, bad[i].msg);
    }
}

/* Matrix products and two ragged dims: every shape rule is an error naming what is wrong. */
static void test_matmul_errors(void **state) {
    fixture *f = *state;
    static const struct {
        const char *line, *msg;
        rj_status s;
    } bad[] = {
        {"y = x @ w", "t.rj:7:7: matmul: f32[B, j1, 8] times f32[4, 16]: the inner dims differ (8 vs 4)", RJ_ERR_SHAPE},
        {"y = linear(x, w)", "t.rj:7:5: linear: f32[B, j1, 8] times f32[4, 16]: the inner dims differ (8 vs 16) "
         "(linear's weight is [out_features, in_features])", RJ_ERR_SHAPE},
        {"y = x @ z", "t.rj:7:7: matmul: f32[B, j1, 8] times f32[B, j2, 8]: this version multiplies by a dense 2-D "
         "matrix [K, N] only", RJ_ERR_UNSUPPORTED},
        /* two ragged classes (cross attention): the scores are [B, j1, j2]; what they meet must
         * be of the right class, and the messages name both */
        {"y = (x @ z.transpose(1, 2)) @ x", "t.rj:7:29: matmul: f32[B, j1, j2] times f32[B, j1, 8]: per item, the "
         "contracted dims differ (ragged j2 vs ragged j1); the values must be of the keys' ragged class (p [B, j1, "
         "j2] @ v [B, j2, D])", RJ_ERR_SHAPE},
        {"y = (x @ z.transpose(1, 2)) + (z @ x.transpose(1, 2))", "t.rj:7:29: add: f32[B, j1, j2] and f32[B, j2, j1] "
         "differ in dim 1 (ragged j1 vs j2); if their items have equal lengths, declare `same j1 j2`", RJ_ERR_SHAPE},
        {"y = (x @ z.transpose(1, 2)).transpose(1, 2)", "t.rj:7:29: transpose: dims 1 and 2 of f32[B, j1, j2]: the "
         "blocks of two ragged classes (j1 by j2) are not transposed in this version", RJ_ERR_UNSUPPORTED},
        {"y = pad(x @ z.transpose(1, 2))", "t.rj:7:5: pad: f32[B, j1, j2]: a tensor of two ragged classes (j1 by j2) "
         "is not padded in this version", RJ_ERR_UNSUPPORTED},
        {"y = x.transpose(0, 1)", "t.rj:7:7: transpose: dims 0 and 1 of f32[B, j1, 8]: a jagged tensor transposes "
         "only dims 1 and 2 of [B, j1, D] (an operand of matmul)", RJ_ERR_UNSUPPORTED},
        {"y = relu(x.transpose(1, 2))", "t.rj:7:5: relu: f32[B, 8, j1] is a transposed jagged tensor: this version "
         "only multiplies it (matmul)", RJ_ERR_UNSUPPORTED},
        {"y = x.transpose(1, 2)", "t.rj:8:8: output: a jagged tensor with its ragged dim at position 2 (a transpose, "
         "or a row of columns [B, 1, j]) cannot be an output", RJ_ERR_UNSUPPORTED},
        {"y = (x @ x.transpose(1, 2)).reshape([B, j1, 1, j1])", "t.rj:7:29: reshape: f32[B, j1, j1] to "
         "f32[B, j1, 1, j1]: a jagged tensor keeps its batch and ragged dims in place", RJ_ERR_SHAPE},
        {"y = (x @ x.transpose(1, 2)).index_select(2, i)", "t.rj:7:29: index_select: f32[B, j1, j1] has two ragged "
         "dims: this version applies elementwise ops", RJ_ERR_UNSUPPORTED},
        {"y = sum(x @ x.transpose(1, 2), dim=1, keepdim=True)", "t.rj:8:8: output: a jagged tensor with its ragged "
         "dim at position 2 (a transpose, or a row of columns [B, 1, j]) cannot be an output", RJ_ERR_UNSUPPORTED},
        {"y = (x @ x.transpose(1, 2)) @ w", "t.rj:7:29: matmul: f32[B, j1, j1] times f32[4, 16]: the inner dims "
         "differ (ragged j1 vs 4)", RJ_ERR_SHAPE},
        {"y = x @ (x > 0.0).transpose(1, 2)", "t.rj:7:7: matmul: f32[B, j1, 8] and bool[B, 8, j1]", RJ_ERR_DTYPE},
    };
    char src[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(src, sizeof src, "ragged j1 : B\nragged j2 : B\ninput x : f32[B, j1, 8]\ninput z : f32[B, j2, 8]\n"
                 "input w : f32[4, 16]\ninput i : i64[3]\n%s\noutput y\n", bad[i].line);
        expect_error_start(f->ctx, src, bad[i].line, bad[i].s, bad[i].msg);
    }
    /* queries and keys of two batch dims: no per-item product */
    expect_error_start(f->ctx, "ragged j1 : B\nragged j3 : C\ninput x : f32[B, j1, 8]\ninput c : f32[C, j3, 8]\n"
                       "y = x @ c.transpose(1, 2)\noutput y\n", "two batch dims", RJ_ERR_SHAPE,
                       "t.rj:5:7: matmul: f32[B, j1, 8] times f32[C, 8, j3]: per item, both operands must vary over "
                       "one batch dim (ragged j1 : B, ragged j3 : C)");
    /* an input with two ragged dims (its blocks), also of two classes; and one whose second
     * ragged dim varies over another dim: not one of the layouts */
    rj_graph *e = rj_graph_parse(f->ctx, "ragged j1 : B\ninput s : f32[B, j1, j1]\noutput s\n", "t.rj");
    if (!e) fail_msg("%s", rj_ctx_error(f->ctx));
    rj_graph_free(e);
    e = rj_graph_parse(f->ctx, "ragged j1 : B\nragged j2 : B\ninput s : f32[B, j1, j2]\noutput s\n", "t.rj");
    if (!e) fail_msg("%s", rj_ctx_error(f->ctx));
    rj_graph_free(e);
    expect_error_start(f->ctx, "ragged j1 : B\nragged j2 : C\ninput s : f32[B, j1, j2]\noutput s\n", "j2 of C",
                       RJ_ERR_SHAPE, "t.rj:3:7: input: f32[B, j1, j2]: ragged j2 must directly follow its parent dim C");
}

/* Legal but suspicious: a ragged symbol no input uses, a dense size named like a ragged symbol. */
static void test_warnings(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, "ragged j1 : B\nragged j2 : B\ninput x : f32[B, jl, 4]\n"
                                         "input y : f32[B, j1, 4]\noutput x, y\n", "w.rj");
    assert_non_null(g);
    const char *w = rj_graph_warnings(g);
    assert_non_null(w);
    assert_string_equal(w, "w.rj:3:18: warning: 'jl' declares a new dense size here (sizes are declared by their first "
                           "use); did you mean the ragged symbol 'j1'?\n"
                           "w.rj:2:8: warning: ragged symbol j2 is declared but no input uses it\n");
    rj_graph_free(g);
    g = rj_graph_parse(f->ctx, "ragged j1 : B\ninput x : f32[B, j1, D]\noutput x\n", "ok.rj");
    assert_non_null(g);
    assert_null(rj_graph_warnings(g)); /* nothing to say */
    rj_graph_free(g);
}

/* Parses src expecting a failure with status s and an exact first line and caret column. */
static void expect_error(rj_ctx *ctx, const char *src, rj_status s, const char *first_line, int caret_col) {
    rj_graph *g = rj_graph_parse(ctx, src, "t.rj");
    if (g) {
        rj_graph_free(g);
        fail_msg("expected an error for:\n%s", src);
    }
    const char *msg = rj_ctx_error(ctx);
    if (rj_ctx_status(ctx) != s)
        fail_msg("status %s, expected %s: %s", rj_status_str(rj_ctx_status(ctx)), rj_status_str(s), msg);
    size_t n = strcspn(msg, "\n");
    if (strlen(first_line) != n || strncmp(msg, first_line, n))
        fail_msg("got:\n%s\nexpected first line:\n%s", msg, first_line);
    /* second line: the source line (on a long one, "..." and a window of it); third line: the
     * caret under the column. Both indented by two spaces. */
    const char *l2 = strchr(msg, '\n');
    assert_non_null(l2);
    l2 += 3;
    const char *l3 = strchr(l2, '\n');
    assert_non_null(l3);
    const char *caret = strchr(l3, '^');
    assert_non_null(caret);
    int dots = strncmp(l2, "...", 3) ? 0 : 3, at = (int)(caret - (l3 + 3));
    int line = 0;
    sscanf(first_line, "t.rj:%d:", &line);
    const char *sl = src;
    for (int i = 1; i < line && sl; i++) sl = strchr(sl, '\n') ? strchr(sl, '\n') + 1 : NULL;
    assert_non_null(sl);
    int start = caret_col - 1 - (at - dots), shown = (int)strcspn(l2 + dots, "\n");
    if (start < 0 || (start > 0) != (dots > 0) || strncmp(l2 + dots, sl + start, (size_t)shown))
        fail_msg("caret not at column %d:\n%s", caret_col, msg);
}

static void test_syntax_errors(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    expect_error(c, "input x : f32[3]\ny = frob(x)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:5: unknown function 'frob'; the functions are: neg abs sgn relu gelu silu sigmoid tanh exp "
                 "log sqrt rsqrt sin cos logical_not add sub mul div pow maximum minimum eq ne lt le gt ge "
                 "logical_and logical_or where masked_fill cast sum mean max min prod softmax log_softmax "
                 "layer_norm rms_norm pad unpad embedding gather take_along_dim index_select positions reshape "
                 "narrow matmul transpose cat arange full attention sign view unsqueeze squeeze linear t "
                 "scaled_dot_product_attention size split chunk unbind flip tril triu expand expand_as repeat amax amin "
                 "permute flatten unflatten zeros ones zeros_like ones_like full_like new_zeros new_ones new_full stack "
                 "clamp clip clamp_min clamp_max logsumexp normalize "
                 "leaky_relu square reciprocal relu6 hardtanh hardsigmoid hardswish softsign log1p expm1 softplus elu celu "
                 "selu mish logsigmoid tanhshrink softshrink hardshrink threshold softmin glu logaddexp var std norm "
                 "vector_norm argmax argmin mm bmm float double half "
                 "bfloat16 int long bool to type type_as finfo iinfo contiguous clone detach dropout", 5);
    /* the closest known name, where one is close (issue 13: diagnostics that teach) */
    expect_error(c, "input x : f32[3]\ny = sofmtax(x, 0)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:5: unknown function 'sofmtax' (did you mean 'softmax'?)", 5);
    expect_error(c, "input x : f32[3]\ny = softmax(x, dims=0)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:16: softmax has no argument 'dims' (did you mean 'dim'?); it takes input, dim, dtype", 16);
    expect_error(c, "input values : f32[3]\ny = relu(valeus)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:10: undefined name 'valeus' (did you mean 'values'?)", 10);
    expect_error(c, "ragged j1 : B\ninptu x : f32[B, j1, 4]\n", RJ_ERR_PARSE,
                 "t.rj:2:1: unknown statement 'inptu' (did you mean 'input'?): a statement is ragged, same, "
                 "input, output, def, or an assignment (name = expression)", 1);
    expect_error(c, "ragged j1 : B\nragegd j2 : B\n", RJ_ERR_PARSE,
                 "t.rj:2:1: unknown statement 'ragegd' (did you mean 'ragged'?): a statement is ragged, same, "
                 "input, output, def, or an assignment (name = expression)", 1);
    expect_error(c, "input x : f32[3]\ny = x + z\noutput y\n", RJ_ERR_PARSE, "t.rj:2:9: undefined name 'z'", 9);
    expect_error(c, "input x : f32[3]\ny = relu(x\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:3:1: expected ',' or ')', found 'output'", 1);
    expect_error(c, "input x : f8[3]\n", RJ_ERR_PARSE,
                 "t.rj:1:11: unknown dtype 'f8' (f32, f64, f16, bf16, i32, i64, bool)", 11);
    expect_error(c, "input x f32[3]\n", RJ_ERR_PARSE,
                 "t.rj:1:9: expected ':' and the input's type (input x : f32[B, j1, 64]), found 'f32'", 9);
    expect_error(c, "input x : f32[3]\ny = x $ 2\n", RJ_ERR_PARSE, "t.rj:2:7: unexpected character '$'", 7);
    expect_error(c, "input x : f32[3]\ny = gelu(x, approximate=\"tanh)\n", RJ_ERR_PARSE,
                 "t.rj:2:25: unterminated string", 25);
    expect_error(c, "input x : f32[3]\ny = softmax(x)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:5: softmax: missing argument 'dim'", 5);
    expect_error(c, "input x : f32[3]\ny = softmax(x, axis=0)\n", RJ_ERR_PARSE,
                 "t.rj:2:16: softmax has no argument 'axis'; it takes input, dim, dtype", 16);
    expect_error(c, "input x : f32[3]\ny = sum(x, dim=0, 1)\n", RJ_ERR_PARSE,
                 "t.rj:2:19: positional argument after keyword arguments", 19);
    expect_error(c, "input x : f32[3]\ny = sum(x, dim=0, dim=0)\n", RJ_ERR_PARSE,
                 "t.rj:2:19: argument 'dim' given twice", 19);
    expect_error(c, "input x : f32[3]\ny = sum(x, dim=0.5)\n", RJ_ERR_PARSE,
                 "t.rj:2:12: sum: dim must be an integer", 12);
    expect_error(c, "input x : f32[3]\ny = x\n", RJ_ERR_PARSE,
                 "t.rj:3:1: the program has no outputs (add: output <name>)", 1);
    expect_error(c, "input x : f32[3]\noutput y\n", RJ_ERR_PARSE, "t.rj:2:8: undefined name 'y'", 8);
    expect_error(c, "input x : f32[3]\ninput x : f32[3]\n", RJ_ERR_PARSE,
                 "t.rj:2:7: the name 'x' is already used by an input (inputs, outputs, values and "
                 "sizes share one namespace)", 7);
    expect_error(c, "ragged j1 : B\nsame j1 j9\n", RJ_ERR_PARSE, "t.rj:2:9: undefined ragged symbol 'j9'", 9);
    expect_error(c, "input x : f32[3]\ny = x 2\n", RJ_ERR_PARSE, "t.rj:2:7: expected end of line, found '2'", 7);
    expect_error(c, "input x : f32[3]\ny = 12abc\n", RJ_ERR_PARSE, "t.rj:2:5: malformed number '12a'", 5);
    expect_error(c, "input x : f32[3]\n= x\n", RJ_ERR_PARSE,
                 "t.rj:2:1: expected a statement (ragged, same, input, output or an assignment), found '='", 1);
    expect_error(c, "input x : f32[3]\ny = cast(x, dtype=\"f8\")\n", RJ_ERR_PARSE,
                 "t.rj:2:13: cast: dtype must be one of \"f32\", \"f64\", \"f16\", \"bf16\", \"i32\", \"i64\", \"bool\"", 13);
    expect_error(c, "input x : f32[3]\ny = 99999999999999999999\n", RJ_ERR_PARSE,
                 "t.rj:2:5: integer 99999999999999999999 is too large (the limit is 2^63 - 1)", 5);
}

static void test_builder_errors_located(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    expect_error(c,
                 "ragged j1 : B\nragged j2 : B\ninput x : f32[B, j1, 64]\ninput y : f32[B, j2, 64]\n"
                 "h = relu(x)\nz = h * 2 + y\noutput z\n",
                 RJ_ERR_SHAPE,
                 "t.rj:6:11: add: f32[B, j1, 64] and f32[B, j2, 64] differ in dim 1 (ragged j1 vs j2); if their items have equal lengths, declare `same j1 j2`", 11);
    expect_error(c, "input b : bool[3]\ny = -b\noutput y\n", RJ_ERR_DTYPE,
                 "t.rj:2:5: neg: bool[3]: not supported for bool (use logical_not)", 5);
    expect_error(c, "ragged j : B\ninput x : f32[B, j, 4]\ny = sum(x, dim=0)\noutput y\n", RJ_ERR_SHAPE,
                 "t.rj:3:5: sum: cannot reduce over the batch dim 0 of the jagged tensor f32[B, j, 4]", 5);
    expect_error(c, "ragged j : B\ninput x : f32[B, j, 4]\ny = layer_norm(x, 8)\noutput y\n", RJ_ERR_SHAPE,
                 "t.rj:3:19: normalized_shape does not match the input's last 1 dims", 19);
    expect_error(c, "ragged j : B\nragged k : C\nsame j k\n", RJ_ERR_SHAPE,
                 "t.rj:3:6: same: j and k have different parents (B vs C)", 6);
    expect_error(c, "input x : f32[j, B]\nragged j : B\n", RJ_ERR_ARG,
                 "t.rj:2:8: rj_graph_ragged: 'j' is already declared as a dense size", 8);
}

/* PyTorch's functions built of other ops (clamp, logsumexp, normalize, leaky_relu): their
 * arguments' errors name the function; their values are checked against PyTorch in
 * python/tests and by tests/difftest. */
static void test_composite_errors(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j : B\ninput x : f32[B, j, 4]\ninput i : i32[B, j, 4]\n";
    static const struct {
        const char *stmt, *msg;
        rj_status st;
        int col;
    } cases[] = {
        {"y = x.clamp()", "t.rj:4:7: clamp: at least one of min and max must be given", RJ_ERR_ARG, 7},
        {"y = torch.clamp(x, None, None)", "t.rj:4:11: clamp: at least one of min and max must be given", RJ_ERR_ARG, 11},
        {"y = clamp_min(x)", "t.rj:4:5: clamp_min: missing argument 'min'", RJ_ERR_PARSE, 5},
        {"y = logsumexp(x, 3)", "t.rj:4:18: logsumexp: dim 3 is out of range for a tensor of 3 dims", RJ_ERR_SHAPE, 18},
        {"y = logsumexp(x, (1, -2))", "t.rj:4:18: logsumexp: dim 1 appears multiple times in the list of dims",
         RJ_ERR_SHAPE, 18},
        {"y = logsumexp(x, dim=0)", "t.rj:4:5: logsumexp: cannot reduce over the batch dim 0 of the jagged tensor f32[B, j, 4]",
         RJ_ERR_SHAPE, 5},
        {"y = F.normalize(i)", "t.rj:4:7: normalize: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 7},
        {"y = normalize(x, p=0)", "t.rj:4:18: normalize: p must be positive (or inf)", RJ_ERR_ARG, 18},
        {"y = normalize(x, p=-inf)", "t.rj:4:18: normalize: p must be positive (or inf)", RJ_ERR_ARG, 18},
        {"y = leaky_relu(i, 0.1)", "t.rj:4:5: leaky_relu: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 5},
        {"y = leaky_relu(x, x)", "t.rj:4:19: expected a number", RJ_ERR_PARSE, 19},
        {"y = F.hardswish(i)", "t.rj:4:7: hardswish: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 7},
        {"y = F.hardtanh(x, min_val=x)", "t.rj:4:19: expected a number", RJ_ERR_PARSE, 19},
        {"y = F.elu(i)", "t.rj:4:7: elu: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 7},
        {"y = F.softplus(x, beta=x)", "t.rj:4:19: expected a number", RJ_ERR_PARSE, 19},
        {"y = F.celu(x, alpha=0.0)", "t.rj:4:15: celu: alpha must not be 0", RJ_ERR_ARG, 15},
        {"y = x.var(1, True, correction=1)", "t.rj:4:20: var: give unbiased or correction, not both", RJ_ERR_ARG, 20},
        {"y = i.std(1)", "t.rj:4:7: std: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 7},
        {"y = x.var(dim=4)", "t.rj:4:11: var: dim 4 is out of range for a tensor of 3 dims", RJ_ERR_SHAPE, 11},
        {"y = x.var(0)", "t.rj:4:7: var: cannot reduce over the batch dim 0 of the jagged tensor f32[B, j, 4]",
         RJ_ERR_SHAPE, 7},
        {"y = (x > 0).argmax(1)", "t.rj:4:13: argmax: the input is bool, which PyTorch's argmax refuses too (cast it "
         "first: x.int())", RJ_ERR_DTYPE, 13},
        {"y = x.argmax()", "t.rj:4:7: argmax: dim=None would index the flattened tensor, which a jagged tensor has no "
         "index into; give a dim", RJ_ERR_SHAPE, 7},
        {"y = x.argmin(3)", "t.rj:4:14: argmin: dim 3 is out of range for a tensor of 3 dims", RJ_ERR_SHAPE, 14},
        {"y = x.argmax(0)", "t.rj:4:7: argmax: cannot reduce over the batch dim 0 of the jagged tensor f32[B, j, 4]",
         RJ_ERR_SHAPE, 7},
        {"y = x.argmax(dim=(1, 2))", "t.rj:4:14: argmax: dim must be an integer", RJ_ERR_PARSE, 14},
        {"y = x // 2", "t.rj:4:7: '//' of tensors (PyTorch's floor_divide) is not supported in this version; of two "
         "numbers it is Python's (x.shape[-1] // 2)", RJ_ERR_UNSUPPORTED, 7},
        {"y = x % x", "t.rj:4:7: '%' of tensors (PyTorch's remainder) is not supported in this version; of two numbers "
         "it is Python's (x.shape[-1] // 2)", RJ_ERR_UNSUPPORTED, 7},
        {"y = x * (1 // 0)", "t.rj:4:12: division by zero (of two numbers, as Python evaluates them)", RJ_ERR_ARG, 12},
        {"y = x * (2 ** 70)", "t.rj:4:12: this integer arithmetic overflows 64 bits", RJ_ERR_OVERFLOW, 12},
        {"y = x * (0 ** -1)", "t.rj:4:12: division by zero (of two numbers, as Python evaluates them)", RJ_ERR_ARG, 12},
        {"y = arange(3, 1)", "t.rj:4:15: arange: end lies on the wrong side of start for the step's sign", RJ_ERR_ARG, 15},
        {"y = arange(0, 3, 0)", "t.rj:4:18: arange: step must not be zero", RJ_ERR_ARG, 18},
        {"y = torch.linalg.norm(x)", "t.rj:4:18: torch.linalg.norm is not supported; torch.linalg.vector_norm and "
         "torch.norm are", RJ_ERR_UNSUPPORTED, 18},
        {"y = x.norm(p='nuc')", "t.rj:4:12: norm: of the string norms only \"fro\" is supported", RJ_ERR_UNSUPPORTED, 12},
        {"y = i.norm()", "t.rj:4:7: norm: the input must be a float tensor (it is i32)", RJ_ERR_DTYPE, 7},
        {"y = x.flip(0)", "t.rj:4:7: flip: dim 0 has a size known only at run time (the batch dim, a ragged dim or a size "
         "name); flip takes a dense dim of constant size or the ragged dim of a jagged tensor", RJ_ERR_UNSUPPORTED, 7},
        {"y = x.unbind(1)", "t.rj:4:14: unbind: dim 1 has a size known only at run time (the batch dim, a ragged dim or a "
         "size name); unbind takes a dense dim of constant size", RJ_ERR_UNSUPPORTED, 14},
        {"y = x.new_full([2], x)", "t.rj:4:21: new_full: fill_value must be a number or True/False", RJ_ERR_PARSE, 21},
        {"y = F.glu(x, 1)", "t.rj:4:7: glu: dim 1 must be a dense dim of constant, even size", RJ_ERR_SHAPE, 7},
        {"y = x.expand(-1, -1, 8)", "t.rj:4:14: expand: dim 2 has a size other than 1, which expand cannot change "
         "(PyTorch's repeat copies)", RJ_ERR_SHAPE, 14},
        {"y = x.repeat(1, 2, 1)", "t.rj:4:7: repeat: dim 1 has a size known only at run time (the batch dim, a ragged "
         "dim or a size name); repeat takes a dense dim of constant size", RJ_ERR_UNSUPPORTED, 7},
        {"y = x.repeat(1, 1, 0)", "t.rj:4:14: repeat: count 2 must be an integer from 1 to 64", RJ_ERR_ARG, 14},
        {"y = torch.tril(x.sum((1, 2)))", "t.rj:4:11: tril: the input must have at least 2 dims (it has 1)",
         RJ_ERR_SHAPE, 11},
        {"y = F.softshrink(x, -1.0)", "t.rj:4:21: softshrink: lambd must not be negative (it is -1)", RJ_ERR_ARG, 21},
        {"y = F.softmin(x)", "t.rj:4:7: softmin: give dim (PyTorch's implicit choice is deprecated)", RJ_ERR_PARSE, 7},
        {"y = F.dropout(x, 0.1, True)", "t.rj:4:23: dropout: training=True drops at random; ragjit runs inference, "
         "where dropout is the identity (training=False, or leave it out)", RJ_ERR_UNSUPPORTED, 23},
        {"y = F.dropout(x, p=-0.5)", "t.rj:4:18: dropout: p must lie between 0 and 1 (it is -0.5)", RJ_ERR_ARG, 18},
        {"y = x.max(1)[:, 0]", "t.rj:4:13: max and min with a dim give (values, indices), as PyTorch's: take [0] or [1] "
         "(or .values, .indices) before indexing further, or call amax / amin for the values alone", RJ_ERR_PARSE, 13},
        {"y = torch.max(x, i, keepdim=True)", "t.rj:4:21: max of two tensors (the elementwise maximum) takes no keepdim",
         RJ_ERR_PARSE, 21},
        {"y = F.pad(x, (0, 1))", "t.rj:4:14: pad: ragjit's pad(input, value=0.0, len=None) pads the ragged dim to a "
         "length; PyTorch's F.pad(input, (left, right, ...)) of dense dims is not supported: cat the tensor with a "
         "full(...) of the padding", RJ_ERR_UNSUPPORTED, 14},
    };
    char src[256];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(src, sizeof src, "%s%s\noutput y\n", head, cases[k].stmt);
        expect_error(c, src, cases[k].st, cases[k].msg, cases[k].col);
    }
}

/* PyTorch's spellings of casts and of the values around them parse to the graphs of ragjit's
 * own: x.float(), x.to(torch.float16), x.type(torch.float64), x.type_as(y), cast(x, torch.int64),
 * dtype=torch.bool, float("-inf"), float(2), x.contiguous(), x.clone(), x.detach(). */
static void test_pytorch_casts(void **state) {
    fixture *f = *state;
    static const char head[] = "ragged j : B\ninput x : f32[B, j, 4]\ninput i : i32[B, j, 4]\ninput m : bool[B, j, 4]\n";
    static const char *const pairs[][2] = {
        {"y = x.half()\noutput y\n", "y = cast(x, \"f16\")\noutput y\n"},
        {"y = x.to(torch.float16)\noutput y\n", "y = cast(x, \"f16\")\noutput y\n"},
        {"y = x.to(dtype=torch.bfloat16)\noutput y\n", "y = x.bfloat16()\noutput y\n"},
        {"y = x.type(torch.float64)\noutput y\n", "y = x.double()\noutput y\n"},
        {"y = i.type_as(x)\noutput y\n", "y = cast(i, \"f32\")\noutput y\n"},
        {"y = x.to(i)\noutput y\n", "y = x.int()\noutput y\n"},
        {"y = cast(x, torch.int64)\noutput y\n", "y = x.long()\noutput y\n"},
        {"y = cast(x, torch.long) + x.bool()\noutput y\n", "y = cast(x, \"i64\") + cast(x, \"bool\")\noutput y\n"},
        {"y = zeros(4, dtype=torch.bool)\noutput y\n", "y = zeros(4, dtype=\"bool\")\noutput y\n"},
        {"y = x.masked_fill(m, float('-inf'))\noutput y\n", "y = x.masked_fill(m, -inf)\noutput y\n"},
        {"y = x * float(2)\noutput y\n", "y = x * 2.0\noutput y\n"},
        {"y = x + float(\" 1e3 \")\noutput y\n", "y = x + 1000.0\noutput y\n"},
        {"y = x.transpose(1, 2).contiguous().clone().detach() @ x\noutput y\n", "y = x.transpose(1, 2) @ x\noutput y\n"},
        {"y = x / math.sqrt(4)\noutput y\n", "y = x / 2.0\noutput y\n"},
        {"y = x + math.pi\noutput y\n", "y = x + 3.141592653589793\noutput y\n"},
        {"y = x * math.floor(2.5)\noutput y\n", "y = x * 2\noutput y\n"},
        {"y = x + math.inf\noutput y\n", "y = x + inf\noutput y\n"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        char *g = same_graph(f->ctx, head, pairs[k][0], pairs[k][1]);
        rj_string_free(f->ctx, g);
    }
    /* PyTorch's max and min: (values, indices) with a dim, the elementwise ones of two tensors;
     * reductions without a dim; dropout: the same graphs as amax, argmax, maximum, reductions over
     * every dim and the identity, but for the numbers of unnamed values */
    static const char *const maxes[][2] = {
        {"y = torch.min(x, dim=-1, keepdim=True)[1]\noutput y\n", "y = argmin(x, -1, keepdim=True)\noutput y\n"},
        {"y = x.max(2).values + x.max(2)[0]\noutput y\n", "y = amax(x, 2) + amax(x, 2)\noutput y\n"},
        {"y = torch.max(x, i)\noutput y\n", "y = maximum(x, i)\noutput y\n"},
        /* no dim: every dim, as PyTorch's dim=None */
        {"y = x.sum() + torch.mean(x)\noutput y\n", "y = x.sum((0, 1, 2)) + x.mean(dim=(0, 1, 2))\noutput y\n"},
        {"y = x.amax(keepdim=True)\noutput y\n", "y = x.amax((0, 1, 2), keepdim=True)\noutput y\n"},
        /* Python's arithmetic of numbers; zeros_like, new_zeros; arange(start, end, step) */
        {"y = x[..., : x.shape[-1] // 2] * (7 % 3 + 2 ** 3 - 10 // 4)\noutput y\n", "y = x[..., 0:2] * 7\noutput y\n"},
        {"y = x * (3 / 2) + x.new_zeros(4)\noutput y\n", "y = x * 1.5 + zeros(4)\noutput y\n"},
        {"y = torch.arange(1, 10, 3)\noutput y\n", "y = arange(3) * 3 + 1\noutput y\n"},
        /* dropout: the identity at inference */
        {"y = F.dropout(x, 0.1, training=False) + nn.functional.dropout(x) + x.dropout(p=0.0)\noutput y\n",
         "y = x + x + x\noutput y\n"},
    };
    for (size_t k = 0; k < sizeof maxes / sizeof maxes[0]; k++) {
        char *d[2];
        for (int w = 0; w < 2; w++) {
            char src[512];
            snprintf(src, sizeof src, "%s%s", head, maxes[k][w]);
            rj_graph *g = rj_graph_parse(f->ctx, src, "t.rj");
            if (!g) fail_msg("%s: %s", maxes[k][w], rj_ctx_error(f->ctx));
            d[w] = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
            rj_graph_free(g);
            assert_non_null(d[w]);
            canonical_names(d[w]);
        }
        if (strcmp(d[0], d[1])) fail_msg("%s\n%s\nagainst\n%s", maxes[k][0], d[0], d[1]);
        rj_string_free(f->ctx, d[0]);
        rj_string_free(f->ctx, d[1]);
    }
    /* a dtype= of softmax and the reductions casts their input first (and a sum's result) */
    static const char *const lines[][3] = {
        {"y = F.softmax(h, dim=-1, dtype=torch.float32).to(h.dtype)\noutput y\n", " = cast(h, dtype=\"f32\")",
         "\ny = cast(v"},
        {"y = h.masked_fill(m, torch.finfo(h.dtype).min)\noutput y\n", "y = masked_fill(h, m, -3.3895313892515355e+38)",
         NULL},
        {"y = x.masked_fill(m, torch.finfo().eps) + torch.finfo(torch.float16).max\noutput y\n",
         "masked_fill(x, m, 1.1920928955078125e-07)", "65504.0)"},
        {"y = i.sum(1, dtype=torch.int32) + torch.iinfo(torch.int32).min\noutput y\n", " = sum(i, dim=1) ",
         " = cast(v"},
        {"y = torch.log_softmax(h, 1, \"f64\")\noutput y\n", " = cast(h, dtype=\"f64\")", "y = log_softmax(v"},
        {"input_dtype = h.dtype\nz = h.float() * 2\ny = z.to(input_dtype)\noutput y\n", "y = cast(z, dtype=\"bf16\")",
         NULL},
    };
    char src[512];
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
        snprintf(src, sizeof src, "%sinput h : bf16[B, j, 4]\n%s", head, lines[k][0]);
        rj_graph *g = rj_graph_parse(f->ctx, src, "d.rj");
        if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
        char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
        assert_non_null(text);
        for (int w = 1; w < 3; w++)
            if (lines[k][w] && !strstr(text, lines[k][w])) fail_msg("no '%s' in\n%s", lines[k][w], text);
        rj_string_free(f->ctx, text);
        rj_graph_free(g);
    }
    rj_ctx *c = f->ctx;
    expect_error(c, "input x : f32[4]\ny = x.amax(0, dtype=torch.float64)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:15: amax has no argument 'dtype' (PyTorch's amax and amin have none)", 15);
    expect_error(c, "input x : f32[4]\ny = x + torch.finfo(torch.int32).max\noutput y\n", RJ_ERR_DTYPE,
                 "t.rj:2:27: finfo: i32 is not a float dtype (use iinfo)", 27);
    expect_error(c, "input x : f32[4]\ny = x + torch.finfo(x.dtype).big\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:30: finfo has no attribute 'big' (ragjit has min, max, eps, tiny, smallest_normal and bits)", 30);
    expect_error(c, "input x : f32[4]\nd = x.dtype\noutput d\n", RJ_ERR_PARSE, "t.rj:3:8: 'd' is a dtype, not a tensor", 8);
    expect_error(c, "input x : f32[4]\ny = x / math.sqrt(-1)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:14: math.sqrt: math domain error", 14);
    expect_error(c, "input x : f32[4]\ny = math.sqrt(x)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:15: math.sqrt takes numbers (for a tensor, write the function itself: sqrt(x), exp(x))", 15);
    expect_error(c, "input x : f32[4]\ny = x * math.golden\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:14: math.golden is not a constant ragjit knows (pi, e, tau, inf, nan)", 14);
    expect_error(c, "input x : f32[4]\ny = x.to('cuda')\noutput y\n", RJ_ERR_ARG,
                 "t.rj:2:10: to: expected a dtype (torch.float16, \"f16\") or a tensor whose dtype to take (a "
                 "program names no device)", 10);
    expect_error(c, "input x : f32[4]\ny = x * float('abc')\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:15: float: could not convert string to float: 'abc'", 15);
    expect_error(c, "input x : f32[4]\ny = x.to(torch.float8)\noutput y\n", RJ_ERR_PARSE,
                 "t.rj:2:16: 'float8' is a function: call it (float8(...)); the dtypes are torch.float32, float64, "
                 "float16, bfloat16, int32, int64 and bool", 16);
}

/* print(parse(src)) parses again, and printing that gives the same text. */
static void test_print_roundtrip(void **state) {
    fixture *f = *state;
    static const char *const progs[] = {
        design_example,
        "ragged j : B\ninput x : f32[B, j, 8]\ninput m : bool[B, j, 8]\n"
        "y = softmax(masked_fill(x, m, -1e9), dim=1)\nz = gelu(x, approximate=\"tanh\")\n"
        "n = layer_norm(x, 8, eps=0.001)\nc = cast(x > 0, dtype=\"i32\")\n"
        "s = sum(pad(x, value=-2.5, len=L), dim=1, keepdim=True)\noutput y, z, n, c, s\n",
        "ragged j1 : B\nragged j2 : B\nsame j1 j2\ninput x : f32[B, j1, 4]\ninput y : f32[B, j2, 4]\n"
        "out = x + y\nalias = x\noutput out, alias\n",
        "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput d : f64[3, 2]\n"
        "c = cat([x, relu(x), x], dim=-1)\ns = stack((x, x), 3)\ne = torch.cat([d, d], 0) ** 2\n"
        "p = -x ** 2 ** 0.5\noutput c, s, e, p\n",
        "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput w : f32[D]\na = x + arange(4) * full([4], 0.5, dtype=\"f64\")\n"
        "b = zeros(3, D) + ones([D], dtype=\"i32\") + full((3, 1), True)\nc = torch.arange(D, dtype=\"f32\") * w\n"
        "output a, b, c\n",
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, progs[i], "a.rj");
        if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
        rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
        char *t1 = rj_program_dump(p, "graph");
        rj_graph *g2 = rj_graph_parse(f->ctx, t1, "b.rj");
        if (!g2) fail_msg("printed program does not parse: %s\n%s", rj_ctx_error(f->ctx), t1);
        rj_program *p2 = rj_program_new(g2, RJ_TARGET_REFERENCE);
        char *t2 = rj_program_dump(p2, "graph");
        if (strcmp(t1, t2)) fail_msg("not a fixed point:\n%s\n---\n%s", t1, t2);
        rj_string_free(f->ctx, t1);
        rj_string_free(f->ctx, t2);
        rj_program_free(p);
        rj_program_free(p2);
        rj_graph_free(g);
        rj_graph_free(g2);
    }
}

/* The names printed for unnamed values never collide with the program's own: "v1 = relu(v1)"
 * for an input named v1 parsed back as a different program. */
static void test_print_fresh_names(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, "ragged v3 : B\ninput v1 : f32[B, v3]\n"
                                 "y = relu(v1) + v1 * 2\noutput y\n", "v.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    assert_non_null(text);
    if (!strstr(text, "\nv1_ = relu(v1)") || !strstr(text, "\nv3_ = mul(v1, 2)") ||
        !strstr(text, "\ny = add(v1_, v3_)"))
        fail_msg("%s", text);
    rj_graph *g2 = rj_graph_parse(f->ctx, text, "printed.rj");
    if (!g2) fail_msg("%s\n%s", rj_ctx_error(f->ctx), text);
    char *again = rj_graph_dump(g2, RJ_TARGET_REFERENCE, "graph");
    assert_string_equal(text, again);
    rj_string_free(f->ctx, text);
    rj_string_free(f->ctx, again);
    rj_graph_free(g);
    rj_graph_free(g2);
}

/* A name bound again keeps printing as itself while its earlier binding is no longer read
 * (x = f(x), a statement repeated), so the printed program parses to the same labels and
 * lowers to the same loops, temporaries' names included; an earlier binding still read after
 * the new one leaves the new one a fresh name. (fuzz_parse: a merged pair of statements
 * printed its second `logp` as v13, and the loops named their temporary differently.) */
static void test_print_rebound_names(void **state) {
    fixture *f = *state;
    static const struct {
        const char *src, *const want[4];
    } cases[] = {
        {"ragged j : B\ninput x : f32[B, j, 8]\nh = relu(x)\nh = h * 2.0\ng = h + 1.0\n"
         "h = h.exp()\ny = h + g\noutput y\n",
         {"\nh = relu(x) ", "\nh = mul(h, 2.0) ", "\ng = add(h, 1.0) ", "\nh = exp(h) "}},
        {"ragged j : B\ninput x : f32[B, j, 4]\na = relu(x)\nc = a\na = exp(x)\nb = c * a\noutput b\n",
         {"\na = relu(x) ", "\nv2 = exp(x) ", "\nb = mul(a, v2) "}},
        {"ragged j1 : B\ninput logits : f32[B, j1, V]\ninput target : i64[B, j1]\n"
         "logp = logits.log_softmax(dim=-1)\n"
         "picked = logp.take_along_dim(target.unsqueeze(-1), dim=-1).squeeze(-1)\nloss = -picked\n"
         "logp = logits.log_softmax(dim=-1)\n"
         "picked = logp.take_along_dim(target.unsqueeze(-1), dim=-1).squeeze(-1)\n"
         "loss = -picked.mean(dim=1)\noutput picked\noutput loss\n",
         {"\nlogp = log_softmax(logits, dim=2) ", "\nv7 = take_along_dim(logp, v5, dim=2) ",
          "\nlogp = log_softmax(logits, dim=2) ", "\nloss = neg(v20) "}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, cases[i].src, "r.rj");
        if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
        char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
        assert_non_null(text);
        for (int k = 0; k < 4 && cases[i].want[k]; k++)
            if (!strstr(text, cases[i].want[k])) fail_msg("no '%s' in\n%s", cases[i].want[k], text);
        rj_graph *g2 = rj_graph_parse(f->ctx, text, "printed.rj");
        if (!g2) fail_msg("%s\n%s", rj_ctx_error(f->ctx), text);
        char *again = rj_graph_dump(g2, RJ_TARGET_REFERENCE, "graph");
        assert_string_equal(text, again);
        char *l1 = rj_graph_dump(g, RJ_TARGET_CPU, "loops"), *l2 = rj_graph_dump(g2, RJ_TARGET_CPU, "loops");
        assert_non_null(l1);
        assert_non_null(l2);
        assert_string_equal(l1, l2);
        rj_string_free(f->ctx, l1);
        rj_string_free(f->ctx, l2);
        rj_string_free(f->ctx, text);
        rj_string_free(f->ctx, again);
        rj_graph_free(g);
        rj_graph_free(g2);
    }
}

/* Mutated programs (bytes replaced, deleted, truncated) never crash or leak. */
static void test_mutations(void **state) {
    fixture *f = *state;
    uint64_t seed = 12345;
    size_t n = strlen(design_example);
    char *buf = malloc(n + 1);
    static const char alphabet[] = "()[],:=+-*/<>!#\"'\n \\0123456789.eEjxBinputoragedsm_";
    int parsed = 0, failed = 0;
    for (int trial = 0; trial < 3000; trial++) {
        memcpy(buf, design_example, n + 1);
        int edits = 1 + (int)rng_int(&seed, 0, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)rng_int(&seed, 0, (int64_t)n - 1);
            switch (rng_int(&seed, 0, 2)) {
            case 0: buf[at] = alphabet[rng_int(&seed, 0, (int64_t)sizeof alphabet - 2)]; break;
            case 1: memmove(buf + at, buf + at + 1, n - at); break;
            default: buf[at] = 0; break;
            }
        }
        rj_graph *g = rj_graph_parse(f->ctx, buf, "m.rj");
        if (g) {
            parsed++;
            rj_graph_free(g);
        } else {
            failed++;
            assert_true(rj_ctx_status(f->ctx) != RJ_OK);
            assert_non_null(strstr(rj_ctx_error(f->ctx), "m.rj:"));
        }
    }
    free(buf);
    assert_true(parsed > 0 && failed > 0);
}

/* Integer arguments are integer literals in range, named with their value when they are not;
 * negative numbers never stand for symbols; literals are read whole; None is not "None". */
static void test_argument_values(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j : B\ninput x : f32[B, j, D]\n";
    static const struct {
        const char *stmt, *msg;
        int col;
    } bad[] = {
        {"y = sum(x, dim=4294967297)", "sum: dim=4294967297 is out of range", 12},
        {"y = softmax(x, -9223372036854775807)", "softmax: dim=-9223372036854775807 is out of range", 16},
        {"y = sum(x, dim=-4)", "sum: dim -4 is out of range for f32[B, j, D] (rank 3)", 5},
        {"y = sum(x, dim=2.0)", "sum: dim must be an integer", 12},
        {"y = sum(x, dim=True)", "sum: dim must be an integer", 12},
        {"y = sum(x, dim=x)", "sum: dim must be an integer", 12},
        {"y = mean(x, 2, 1)", "mean: keepdim must be True or False", 16},
        {"y = pad(x, len=-1)", "pad: len=-1 is negative", 12},
        {"y = pad(x, 0.0, -2)", "pad: len=-2 is negative", 17},
        {"y = pad(x, len=4.0)", "pad: len must be an integer", 12},
        {"y = layer_norm(x, -2)", "layer_norm: normalized_shape=-2 is negative", 19},
        {"y = rms_norm(x, 2.5)", "normalized_shape must be a size or a list of sizes", 17},
        {"y = layer_norm(x, D, weight=\"None\")", "a string is not a tensor", 22},
        {"y = layer_norm(x, D, weight=None, bias=x, eps=None + 1)", "None is not a tensor", 47},
        {"y = cast(x, \"f32                                                                    \")",
         "cast: dtype must be one of", 13},
        {"y = x * 1e5e5", "malformed number '1e5e'", 9},
    };
    char src[512], want[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(src, sizeof src, "%s%s\noutput y\n", head, bad[i].stmt);
        snprintf(want, sizeof want, "t.rj:3:%d: %s", bad[i].col, bad[i].msg);
        rj_graph *g = rj_graph_parse(c, src, "t.rj");
        if (g) fail_msg("accepted: %s", bad[i].stmt);
        if (strncmp(rj_ctx_error(c), want, strlen(want)))
            fail_msg("%s:\ngot %s\nwant %s", bad[i].stmt, rj_ctx_error(c), want);
    }
    /* what is accepted means what it says: negative dims count from the end; long literals
     * keep every digit */
    static const char good[] =
        "ragged j : B\ninput x : f32[B, j, 4]\n"
        "a = sum(x, dim=-1, keepdim=True)\n"
        "b = softmax(x, dim=00000000000000000000000000000000000000000000000000000000000000000001)\n"
        "p = pad(x, value=1.0000000000000000000000000000000000000000000000000000000000000000000001e5, len=7)\n"
        "n = layer_norm(x, 4, eps=1e-999) + x * 1e999\n"
        "output a, b, p, n\n";
    rj_graph *g = rj_graph_parse(c, good, "good.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    assert_type(c, g, "a", "f32[B, j, 1]");
    char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    assert_non_null(text);
    if (!strstr(text, "a = sum(x, dim=2, keepdim=True)") || !strstr(text, "b = softmax(x, dim=1)") ||
        !strstr(text, "pad(x, value=1e+05, len=7)") || !strstr(text, "layer_norm(x, 4, eps=0.0)") ||
        !strstr(text, "mul(x, inf)"))
        fail_msg("%s", text);
    rj_string_free(c, text);
    rj_graph_free(g);
}

/* Inputs, outputs, values, ragged symbols and dense sizes share one namespace (the files of
 * `ragjit run` share one directory): a clash is an error at the statement that makes it. */
static void test_namespace(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char tail[] = " (inputs, outputs, values and sizes share one namespace)";
    static const struct {
        const char *src, *msg;
        int line, col;
    } bad[] = {
        {"ragged j1 : B\ninput j1 : f32[B]\n", "the name 'j1' is already used by a ragged symbol", 2, 7},
        {"ragged j1 : B\ninput x : f32[B, j1]\nj1 = x * 2\noutput j1\n",
         "the name 'j1' is already used by a ragged symbol", 3, 1},
        {"input x : f32[3]\nragged x : B\n", "the name 'x' is already used by an input", 2, 8},
        {"input x : f32[3]\nragged j : x\n", "the name 'x' is already used by an input", 2, 12},
        {"input x : f32[3]\ny = x * 2\ninput z : f32[y]\n", "the name 'y' is already used by a value", 3, 15},
        {"input x : f32[3]\ny = x * 2\nz = layer_norm(x, [y])\n",
         "the name 'y' is already used by a value", 3, 20},
        {"input x : f32[D]\nD = x\n", "the name 'D' is already used by a dense size", 2, 1},
        {"input x : f32[D]\ninput D : f32[3]\n", "the name 'D' is already used by a dense size", 2, 7},
        {"input x : f32[3]\nx = x * 2\noutput x\n", "output: the name 'x' is already used by an input", 3, 8},
        {"ragged j : B\ninput x : f32[B, j]\nsame j x\n", "'x' is an input, not a ragged symbol", 3, 8},
        {"input inf : f32[3]\n", "'inf' is a reserved name", 1, 7},
        {"input x : f32[3]\nnan = x\n", "'nan' is a reserved name", 2, 1},
        {"ragged None : B\n", "'None' is a reserved name", 1, 8},
        {"input x : f32[True]\n", "'True' is a reserved name", 1, 15},
    };
    char want[300];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* the parser's own messages add why; the builder's (output:) are RJ_ERR_ARG */
        bool parser = !strncmp(bad[i].msg, "the name", 8), builder = !strncmp(bad[i].msg, "output:", 7);
        snprintf(want, sizeof want, "t.rj:%d:%d: %s%s", bad[i].line, bad[i].col, bad[i].msg,
                 parser ? tail : "");
        expect_error(c, bad[i].src, builder ? RJ_ERR_ARG : RJ_ERR_PARSE, want, bad[i].col);
    }
    /* what stays allowed: reassigning, an input output under its own name or another */
    static const char good[] = "ragged j : B\ninput x : f32[B, j, 2]\ny = x * 2\ny = y + x\n"
                               "x = x - 1\nz = x\noutput y, z\n";
    rj_graph *g = rj_graph_parse(c, good, "good.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    rj_graph_free(g);
    g = rj_graph_parse(c, "input x : f32[3]\noutput x\n", "good.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    rj_graph_free(g);
}

/* A program of `levels` nested openers around x: "((x))", "relu(relu(x))", "--x". */
static char *nested(const char *open, const char *close, int levels) {
    size_t no = strlen(open), nc = strlen(close);
    char *src = malloc(64 + (no + nc) * (size_t)levels);
    assert_non_null(src);
    char *p = src + sprintf(src, "input x : f32[3]\ny = ");
    for (int i = 0; i < levels; i++) p += sprintf(p, "%s", open);
    *p++ = 'x';
    for (int i = 0; i < levels; i++) p += sprintf(p, "%s", close);
    sprintf(p, "\noutput y\n");
    return src;
}

/* Nesting is bounded: 256 levels of parentheses, calls or unary minus parse; one more is an
 * error at the opener of level 257; thousands (which used to overflow the stack) too. */
static void test_nesting_limit(void **state) {
    fixture *f = *state;
    static const struct {
        const char *open, *close;
        int width; /* characters per level */
    } forms[] = {{"(", ")", 1}, {"relu(", ")", 5}, {"-", "", 1}, {"softmax(dim=0, input=", ")", 21},
                 {"(1 + ", ")", 5}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *src = nested(forms[i].open, forms[i].close, 256);
        rj_graph *g = rj_graph_parse(f->ctx, src, "t.rj");
        if (!g) fail_msg("%s: %s", forms[i].open, rj_ctx_error(f->ctx));
        rj_graph_free(g);
        free(src);
        static const int too_many[] = {257, 3000, 100000};
        for (int k = 0; k < 3; k++) {
            src = nested(forms[i].open, forms[i].close, too_many[k]);
            char want[160];
            snprintf(want, sizeof want, "t.rj:2:%d: expression nested too deeply (more than 256 "
                     "levels of parentheses, calls and unary minus)", 5 + 256 * forms[i].width);
            expect_error(f->ctx, src, RJ_ERR_PARSE, want, 5 + 256 * forms[i].width);
            free(src);
        }
    }
}

/* On a long line the caret stays under the column it names: the line is shown from a little
 * before it, marked with "...". */
static void test_long_line_caret(void **state) {
    fixture *f = *state;
    char src[1400];
    char *p = src + sprintf(src, "input x : f32[3]\ny = x");
    for (int i = 0; i < 300; i++) p += sprintf(p, " + x");
    sprintf(p, " + z\noutput y\n");
    expect_error(f->ctx, src, RJ_ERR_PARSE, "t.rj:2:1209: undefined name 'z'", 1209);
    const char *l2 = strchr(rj_ctx_error(f->ctx), '\n') + 1;
    assert_true(!strncmp(l2, "  ...x + x", 10));
}

static void test_null_args(void **state) {
    fixture *f = *state;
    assert_null(rj_graph_parse(NULL, "x", NULL));
    assert_null(rj_graph_parse(f->ctx, NULL, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_null(rj_graph_parse(f->ctx, "", NULL));
    assert_error_contains(f->ctx, "<input>:1:1: the program has no outputs");
}

/* A statement after head that fails with status s and a message starting with msg (after
 * "t.rj:L:C: "). */
typedef struct stmt_error {
    const char *stmt, *msg;
    rj_status s;
} stmt_error;

static void expect_stmt_errors(rj_ctx *c, const char *head, const stmt_error *bad, size_t n) {
    char src[1024];
    for (size_t i = 0; i < n; i++) {
        snprintf(src, sizeof src, "%s%s\noutput y\n", head, bad[i].stmt);
        rj_graph *e = rj_graph_parse(c, src, "t.rj");
        if (e) {
            rj_graph_free(e);
            fail_msg("no error for %s", bad[i].stmt);
        }
        const char *msg = strstr(rj_ctx_error(c), ": ");
        if (rj_ctx_status(c) != bad[i].s || !msg || strncmp(msg + 2, bad[i].msg, strlen(bad[i].msg)))
            fail_msg("%s: got %s: %s\nexpected %s: %s", bad[i].stmt, rj_status_str(rj_ctx_status(c)),
                     rj_ctx_error(c), rj_status_str(bad[i].s), bad[i].msg);
    }
}

/* head + body parses, and each name has its type (want: name, type pairs). */
static void expect_types(rj_ctx *c, const char *head, const char *body, const char *const (*want)[2], size_t n) {
    char src[1024];
    snprintf(src, sizeof src, "%s%s", head, body);
    rj_graph *g = rj_graph_parse(c, src, "types.rj");
    if (!g) fail_msg("%s", rj_ctx_error(c));
    for (size_t i = 0; i < n; i++) assert_type(c, g, want[i][0], want[i][1]);
    rj_graph_free(g);
}

/* The method form of where is PyTorch's: x.where(cond, y) is where(cond, x, y), not
 * where(x, cond, y) as the generic x.f(...) = f(x, ...) would read it. */
static void test_where_method(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 8]\ninput m : bool[B, j1, 8]\n";
    char *dump = same_graph(c, head, "y = x.where(m, 0.5)\noutput y\n", "y = where(m, x, 0.5)\noutput y\n");
    rj_string_free(c, dump);
    expect_error_start(c, "ragged j1 : B\ninput x : f32[B, j1, 8]\ninput m : bool[B, j1, 8]\ny = m.where(x, 0.5)\n"
                       "output y\n", "where", RJ_ERR_DTYPE, "t.rj:4:7: where: the condition must be bool, got f32[B, j1, 8]");
}

/* cat and stack (lists of tensors), and Python's ** with its precedence. */
static void test_cat_stack_pow(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] =
        "ragged j1 : B\nragged j2 : B\ninput x : f32[B, j1, 32]\ninput h : f64[B, j1, 64]\n"
        "input z : f32[B, j2, 32]\ninput d : f32[4, 32]\ninput e : i32[4, 8]\ninput n : f32[4, D]\n";
    static const char *const types[][2] = {{"a", "f64[B, j1, 128]"}, {"b", "f32[4, 40]"}, {"c", "f32[8, 32]"},
                                           {"s", "f32[B, j1, 32, 2]"}, {"t", "f32[3, 4, 32]"}, {"u", "f32[B, j1, 32]"}};
    expect_types(c, head, "a = cat([x, h, x], dim=-1)\nb = torch.cat((d, e), 1)\nc = cat([d, d])\n"
                 "s = stack([x, x], dim=-1)\nt = torch.stack([d, d, d])\nu = cat(tensors=[x], dim=2)\n"
                 "p = -x ** 2\nq = x ** -1\nr = -2 ** 2 + x\noutput a, b, c, s, t, u, p, q, r\n", types,
                 sizeof types / sizeof types[0]);
    /* -x ** 2 is -(x ** 2); x ** y ** z is x ** (y ** z), 8 here (numbers fold as Python's: not
     * (x ** 2) ** 3); -2 ** 2 is -(2 ** 2), -4 (not 4) */
    char *dump = same_graph(c, head, "y = -x ** 2 ** 3\noutput y\n", "y = neg(pow(x, 8))\noutput y\n");
    rj_string_free(c, dump);
    dump = same_graph(c, head, "y = x * -2 ** 2\noutput y\n", "y = x * -4\noutput y\n");
    rj_string_free(c, dump);
    dump = same_graph(c, head, "y = (x + 1) ** x.abs()\noutput y\n", "y = pow(add(x, 1), abs(x))\noutput y\n");
    rj_string_free(c, dump);
    static const stmt_error bad[] = {
        {"y = cat([x, z], dim=2)", "cat: operand 2 has ragged j2 in dim 1 where operand 1 has ragged j1", RJ_ERR_SHAPE},
        {"y = cat([d, x], dim=1)", "cat: operand 2 f32[B, j1, 32] is jagged where operand 1 f32[4, 32] is dense",
         RJ_ERR_SHAPE},
        {"y = cat([d, e, torch.cat([d, d])], dim=1)", "cat: operand 3 has 8 in dim 0 where operand 1 has 4",
         RJ_ERR_SHAPE},
        {"y = cat([x, x.unsqueeze(-1)], dim=2)", "cat: operand 2 has 4 dims where operand 1 has 3", RJ_ERR_SHAPE},
        {"y = cat([x, x], dim=1)", "cat: dim 1 of f32[B, j1, 32] is its ragged dim", RJ_ERR_UNSUPPORTED},
        {"y = cat([x, x], dim=0)", "cat: dim 0 of f32[B, j1, 32] is its batch dim", RJ_ERR_UNSUPPORTED},
        {"y = cat([x, x], dim=3)", "cat: dim 3 is out of range for f32[B, j1, 32] (rank 3)", RJ_ERR_SHAPE},
        {"y = cat([d, n], dim=1)", "cat: operand 2 has the run-time size D in the cat dim 1", RJ_ERR_UNSUPPORTED},
        {"y = cat([d, 2.0])", "cat: operand 2 is a literal", RJ_ERR_SHAPE},
        {"y = cat([])", "cat: expected a non-empty list of tensors", RJ_ERR_ARG},
        {"y = cat(x, dim=2)", "cat: tensors must be a list of tensors", RJ_ERR_PARSE},
        {"y = cat([x, x, x, x, x, x, x, x, x], dim=2)", "at most 8 tensors in one list", RJ_ERR_PARSE},
        {"y = stack([x, x], dim=1)", "stack: dim 1: a jagged tensor stacks along a new dim after its ragged dim 1",
         RJ_ERR_UNSUPPORTED},
        {"y = stack([d, d], dim=3)", "stack: dim 3 is out of range for 2-dim tensors", RJ_ERR_SHAPE},
        {"y = cat([d, d], dim=1.0)", "cat: dim must be an integer", RJ_ERR_PARSE},
        {"y = x ** ", "expected an expression", RJ_ERR_PARSE},
    };
    expect_stmt_errors(c, head, bad, sizeof bad / sizeof bad[0]);
}

/* permute, flatten, unflatten: views over dense dims (a jagged tensor's batch and ragged dims
 * stay in place). */
static void test_permute_flatten(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] =
        "ragged j1 : B\ninput x : f32[B, j1, 384]\ninput q : f32[B, j1, 4, 8]\ninput d : f32[2, 3, 4]\n"
        "input n : f32[B, j1, H, D]\n";
    static const char *const types[][2] = {
        {"a", "f32[B, j1, 12, 32]"}, {"b", "f32[B, j1, 384]"}, {"c", "f32[B, j1, 8, 4]"}, {"e", "f32[4, 2, 3]"},
        {"g", "f32[4, 2, 3]"}, {"h", "f32[24]"}, {"i", "f32[B, j1, 3, 32, 4]"}, {"k", "f32[B, j1, 8, 4]"},
        {"l", "f32[2, 12]"}, {"m", "f32[B, j1, D, H]"}, {"o", "f32[B, j1, H, D]"}};
    expect_types(c, head, "a = x.unflatten(2, (12, 32))\nb = a.flatten(2)\nc = q.permute(0, 1, 3, 2)\n"
                 "e = torch.permute(d, (2, 0, 1))\ng = d.permute([-1, -3, -2])\nh = d.flatten()\n"
                 "i = unflatten(x, -1, [3, -1, 4])\nk = q.transpose(2, 3)\nl = flatten(d, 1)\n"
                 "m = n.permute(0, 1, 3, 2)\no = n.flatten(2, 2)\noutput a, b, c, e, g, h, i, k, l, m, o\n", types,
                 sizeof types / sizeof types[0]);
    char *dump = same_graph(c, head, "y = q.permute(0, 1, 3, 2)\noutput y\n", "y = transpose(q, 2, 3)\noutput y\n");
    rj_string_free(c, dump);
    static const stmt_error bad[] = {
        {"y = q.permute(0, 2, 3, 1).sum(1)", "sum: f32[B, 8, j1]: a ragged dim at position 2", RJ_ERR_UNSUPPORTED},
        {"y = q.permute(1, 0, 2, 3)", "permute: dim 0 of the jagged tensor must stay in place", RJ_ERR_UNSUPPORTED},
        {"y = q.permute(0, 1, 2)", "permute: 3 dims given for a tensor of 4 dims", RJ_ERR_SHAPE},
        {"y = q.permute(0, 1, 2, 2)", "permute: dim 2 appears twice", RJ_ERR_SHAPE},
        {"y = q.permute(0, 1, 2, 4)", "permute: dim 4 is out of range", RJ_ERR_SHAPE},
        {"y = q.permute(0, 1, 2.0, 3)", "permute: dims must be integers", RJ_ERR_PARSE},
        {"y = q.transpose(0, 2)", "transpose: dims 0 and 2 of f32[B, j1, 4, 8]: a jagged tensor transposes only",
         RJ_ERR_UNSUPPORTED},
        {"y = q.flatten(1)", "flatten: dims 1..3 include the ragged dim 1: a jagged tensor keeps its batch and ragged "
         "dims in place (flatten(2) joins the dims after them)", RJ_ERR_UNSUPPORTED},
        {"y = q.flatten()", "flatten: dims 0..3 include the batch dim 0", RJ_ERR_UNSUPPORTED},
        {"y = q.flatten(3, 2)", "flatten: dims 3..2 are out of range", RJ_ERR_SHAPE},
        {"y = n.flatten(2)", "flatten: dims 2..3 hold a size bound at run time beside other sizes", RJ_ERR_UNSUPPORTED},
        {"y = x.unflatten(2, (12, 30))", "reshape: f32[B, j1, 384] to f32[B, j1, 12, 30]: the element counts differ",
         RJ_ERR_SHAPE},
        {"y = x.unflatten(2, 12)", "unflatten: sizes must be a list or tuple of sizes", RJ_ERR_PARSE},
        {"y = x.unflatten(2, (12, -2))", "unflatten: a size must not be negative", RJ_ERR_PARSE},
        {"y = x.unflatten(3, (12, 32))", "unflatten: dim 3 is out of range for a tensor of 3 dims", RJ_ERR_SHAPE},
    };
    expect_stmt_errors(c, head, bad, sizeof bad / sizeof bad[0]);
}

/* arange, full, zeros, ones: dense constants with PyTorch's default dtypes. */
static void test_constants(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const char head[] = "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput d : f64[3, D]\n";
    static const char *const types[][2] = {
        {"a", "i64[4]"}, {"b", "f64[4]"}, {"e", "f32[3, D]"}, {"g", "f32[D]"}, {"h", "i64[2, 2]"},
        {"i", "bool[1]"}, {"k", "f32[2]"}, {"l", "i32[2, 3]"}, {"m", "f32[B, j1, 4]"}, {"n", "f64[3, D]"},
        {"o", "f32[]"}};
    expect_types(c, head, "a = arange(4)\nb = torch.arange(end=4, dtype=\"f64\")\ne = zeros(3, D)\n"
                 "g = ones([D])\nh = full((2, 2), 7)\ni = full([1], False)\nk = full([2], 1.5)\n"
                 "l = torch.zeros((2, 3), dtype=\"i32\")\nm = x + arange(4)\nn = d * ones(D)\no = zeros([])\n"
                 "output a, b, e, g, h, i, k, l, m, n, o\n", types, sizeof types / sizeof types[0]);
    static const stmt_error bad[] = {
        {"y = full([B, j1], 0.0)", "full: dim 1 is the ragged symbol j1: constants have dense shapes", RJ_ERR_SHAPE},
        {"y = arange(j1)", "arange: dim 0 is the ragged symbol j1", RJ_ERR_SHAPE},
        {"y = arange(-1)", "arange: the size must be a list of sizes, or a size", RJ_ERR_PARSE},
        {"y = arange(2.5)", "arange: the size must be a list of sizes, or a size", RJ_ERR_PARSE},
        {"y = arange([2, 3])", "arange: end must be one size", RJ_ERR_PARSE},
        {"y = zeros(2, dtype=\"f8\")", "zeros: dtype must be one of", RJ_ERR_PARSE},
        {"y = zeros([2, -1])", "zeros: a size must not be negative", RJ_ERR_PARSE},
        {"y = full([2], x)", "full: fill_value must be a number or True/False", RJ_ERR_PARSE},
        {"y = ones(2, 3.0)", "ones: size must be integers", RJ_ERR_PARSE},
        {"y = x + arange(3)", "add: f32[B, j1, 4] and i64[3] differ in dim 2", RJ_ERR_SHAPE},
    };
    expect_stmt_errors(c, head, bad, sizeof bad / sizeof bad[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_design_example), FX(test_expressions),    FX(test_syntax_errors), FX(test_porting_syntax), FX(test_from_pytorch), FX(test_index_syntax), FX(test_slice_syntax), FX(test_heads_syntax), FX(test_def_syntax), FX(test_matmul_errors), FX(test_warnings),
        FX(test_builder_errors_located), FX(test_print_roundtrip), FX(test_mutations),
        FX(test_null_args), FX(test_nesting_limit), FX(test_long_line_caret),
        FX(test_argument_values), FX(test_namespace), FX(test_print_fresh_names), FX(test_print_rebound_names), FX(test_composite_errors), FX(test_pytorch_casts),
        FX(test_cat_stack_pow), FX(test_where_method), FX(test_permute_flatten), FX(test_constants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
