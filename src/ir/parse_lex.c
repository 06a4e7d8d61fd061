/*
 * parse_lex.c — the text format's tokens, and the errors and suggestions that point at them.
 *
 * Tokens are read one ahead (P->tok) straight from the source, which stays in memory, so an
 * error anywhere can quote its line. Statements end at a newline; inside parentheses and
 * brackets newlines are ignored, as in Python, and a backslash at the end of a line continues
 * it. Number literals are converted from the whole token, never a prefix: 1.5x is an error,
 * not 1.5 and a name, and a conversion that stops early is an error, not a shorter number.
 *
 * Every error has the form
 *
 *     prog.rj:3:9: add: f32[B, j1, 64] and f32[B, j2, 64] differ in dim 1 (ragged j1 vs j2)
 *       h = x + y
 *             ^
 *
 * and only the first is kept: the parser unwinds quietly after it. An unknown name is most
 * often a typo of a known one, so messages about names suggest the closest known name by edit
 * distance (insertions, deletions, substitutions, and swaps of neighbours count one each), if
 * it is close enough to be what was meant: one edit in a word of 3 to 5 letters, a third of a
 * longer word's length, none in a shorter one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* ---- errors ------------------------------------------------------------------------------- */

void fail_at(parser *P, const token *t, rj_status s, const char *fmt, ...) {
    if (P->failed) return;
    P->failed = true;
    /* the graph is failed too, so builder calls still on the stack stay quiet */
    if (P->g && P->g->status == RJ_OK) P->g->status = s;
    char msg[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->calls && P->in_def) { /* an error in a function's body: which call ran it */
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof msg - l, " (in %s, called at line %d)", P->in_def, P->in_def_line);
    }
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

void fail_builder(parser *P, const token *t) {
    if (P->failed) return;
    char msg[768];
    snprintf(msg, sizeof msg, "%s", ctx_last_error(P->ctx));
    fail_at(P, t, rj_graph_status(P->g) ? rj_graph_status(P->g) : ctx_last_status(P->ctx), "%s", msg);
}

/* ---- lexer -------------------------------------------------------------------------------- */

/* Past blanks, a comment, line continuations and (inside brackets) newlines. */
static const char *skip_space(parser *P, const char *p) {
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
        return p;
    }
}

/* number = digits [ "." digits ] [ ("e" | "E") [ "+" | "-" ] digits ], or from "." digits */
static void lex_number(parser *P, token *t, const char *p) {
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
}

/* string = '"' { any but '"' and newline } '"' | "'" { ... } "'" */
static void lex_string(parser *P, token *t, const char *p) {
    char quote = *p;
    const char *s = p++;
    while (*p && *p != quote && *p != '\n') p++;
    t->kind = T_STRING;
    if (*p != quote) {
        fail_at(P, t, RJ_ERR_PARSE, "unterminated string");
        P->p = p;
        return;
    }
    p++;
    t->len = (int)(p - s);
    P->p = p;
}

/* An operator or punctuation, the longest that matches; brackets count the depth. */
static void lex_punct(parser *P, token *t, const char *p) {
    static const struct {
        const char *s;
        tok_kind k;
    } ops[] = {{"**", T_POW}, {"//", T_FLOORDIV}, {"%", T_PERCENT}, {"<=", T_LE}, {">=", T_GE}, {"==", T_EQ}, {"!=", T_NE}, {"(", T_LPAREN},
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
    fail_at(P, t, RJ_ERR_PARSE, "unexpected character '%c'", *p);
}

void lex_next(parser *P) {
    const char *p = skip_space(P, P->p);
    token *t = &P->tok;
    *t = (token){.start = p, .line = P->line, .col = (int)(p - P->line_start) + 1, .len = 1};
    char c = *p;
    if (!c) {
        t->kind = T_EOF;
        t->len = 0;
        P->p = p;
    } else if (c == '\n') {
        t->kind = T_NEWLINE;
        p++;
        P->line++;
        P->line_start = p;
        P->p = p;
    } else if (is_ident_start(c)) {
        const char *s = p;
        while (is_ident_char(*p)) p++;
        t->kind = T_IDENT;
        t->len = (int)(p - s);
        P->p = p;
    } else if (is_digit(c) || (c == '.' && is_digit(p[1]))) {
        lex_number(P, t, p);
    } else if (c == '"' || c == '\'') {
        lex_string(P, t, p);
    } else {
        lex_punct(P, t, p);
    }
}

void tok_text(const token *t, char *out, size_t n) {
    if (t->kind == T_EOF) snprintf(out, n, "end of input");
    else if (t->kind == T_NEWLINE) snprintf(out, n, "end of line");
    else snprintf(out, n, "'%.*s'", t->len < 60 ? t->len : 60, t->start);
}

bool lex_expect(parser *P, tok_kind k, const char *what) {
    if (P->failed) return false;
    if (P->tok.kind == k) {
        lex_next(P);
        return !P->failed;
    }
    char got[80];
    tok_text(&P->tok, got, sizeof got);
    fail_at(P, &P->tok, RJ_ERR_PARSE, "expected %s, found %s", what, got);
    return false;
}

bool lex_ident(parser *P, char *out, size_t n, const char *what) {
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
    lex_next(P);
    return !P->failed;
}

/* ---- suggestions ----------------------------------------------------------------------------- */

int edit_distance(const char *a, const char *b) {
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

void suggest_try(suggest *s, const char *cand) {
    if (!cand || !strcmp(cand, s->word)) return;
    int len = (int)strlen(s->word), limit = len < 3 ? 0 : len < 6 ? 1 : len / 3; /* "z" is no typo of "x" */
    int d = edit_distance(s->word, cand);
    if (d <= limit && (!s->best || d < s->dist)) s->best = cand, s->dist = d;
}

void suggestion(const suggest *s, char *out, size_t n) {
    if (s->best) snprintf(out, n, " (did you mean '%s'?)", s->best);
    else if (n) out[0] = 0;
}
