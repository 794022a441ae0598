/*
 * user_text.c -- the checks of what users write into generated sources (user_text.h says which and why).
 *
 * Two passes. The first looks at characters alone, for what changes the text before the compiler
 * splits it into tokens: control characters (a lone carriage return may end a line for the compiler
 * and not for us), trigraphs, and a backslash at the end of a line (a splice, which can glue '%' and
 * ':' into a directive or end a comment early). With those gone, the second pass reads tokens as the
 * compiler will -- comments, string and character literals, numbers, names, punctuation -- and judges
 * each. Raw string literals are refused rather than read: their end is where a delimiter says, and a
 * reader that missed it could take code for a string.
 */
#include "jit/user_text.h"
#include "base/error.h"
#include "jit/source_text.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { MAX_DEPTH = 256 };

typedef struct scan {
    gr_context *ctx;
    const char *field, *text;
    gr_user_text kind;
    const char *line_start;     /* where the current line begins */
    int line;
} scan;

/* The failure at p, "<field>: <line>:<column>: <what>". */
static gr_status refuse_at(scan *sc, const char *p, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static gr_status refuse_at(scan *sc, const char *p, const char *fmt, ...) {
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gr_fail_arg(sc->ctx, GR_EINVAL, sc->field, "%d:%d: %s", sc->line, (int)(p - sc->line_start) + 1, what);
}

/* What each kind holds, for the messages. */
static const char *holds(gr_user_text kind) {
    switch (kind) {
    case GR_TEXT_EXPRESSION: return "an expression field holds one C expression";
    case GR_TEXT_PREAMBLE: return "a preamble holds C++ declarations only";
    case GR_TEXT_KERNEL: return "of the directives a kernel source may use #pragma unroll and #pragma nounroll only";
    }
    return "";
}

/* ---- the first pass: characters ------------------------------------------------------------------ */

static gr_status check_characters(scan *sc) {
    for (const char *p = sc->text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '\n') {
            sc->line++;
            sc->line_start = p + 1;
        } else if (c == '\r' && p[1] != '\n') {
            return refuse_at(sc, p, "a carriage return not followed by a line feed is not accepted");
        } else if ((c < 0x20 && !strchr("\t\v\f\r", c)) || c == 0x7f) {
            return refuse_at(sc, p, "a control character (byte 0x%02x) is not accepted", c);
        } else if (c == '?' && p[1] == '?' && p[2] && strchr("=/'()!<>-", p[2])) {
            return refuse_at(sc, p, "the trigraph '??%c' is not accepted", p[2]);
        } else if (c == '\\') {
            const char *q = p + 1;
            while (*q == ' ' || *q == '\t' || *q == '\r') q++;
            if (*q == '\n' || !*q)
                return refuse_at(sc, p, "a '\\' at the end of a line (a line continuation) is not accepted");
        }
    }
    sc->line = 1;
    sc->line_start = sc->text;
    return GR_OK;
}

/* ---- the second pass: tokens --------------------------------------------------------------------- */

/* Whether the line after a '#' at p is "#pragma unroll [count]" or "#pragma nounroll", the count digits
 * or a name, with spaces and an ending // comment allowed. */
static int is_unroll_pragma(const char *p) {
    const char *s = p + 1;
    while (*s == ' ' || *s == '\t') s++;
    if (strncmp(s, "pragma", 6) != 0 || (s[6] != ' ' && s[6] != '\t')) return 0;
    for (s += 6; *s == ' ' || *s == '\t'; s++) {}
    int no = strncmp(s, "nounroll", 8) == 0;
    if (!no && strncmp(s, "unroll", 6) != 0) return 0;
    s += no ? 8 : 6;
    if (gr_is_ident_char(*s)) return 0;
    while (*s == ' ' || *s == '\t') s++;
    if (!no && gr_is_ident_char(*s)) {
        const char *word = s;
        while (gr_is_ident_char(*s)) s++;
        if (strncmp(word, "gr_", 3) == 0) return 0;
        while (*s == ' ' || *s == '\t') s++;
    }
    if (s[0] == '/' && s[1] == '/') return 1;
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    return *s == '\n' || *s == '\0';
}

static const char *const refused_words[] = {"asm", "__asm", "__asm__", "_Pragma", "__pragma", NULL};

/* A name: reserved for the generated code (gr_), or a word that is not accepted. */
static gr_status check_name_token(scan *sc, const char *start, size_t len) {
    if (len >= 3 && strncmp(start, "gr_", 3) == 0)
        return refuse_at(sc, start, "the name %.*s is reserved: names that begin with gr_ are the generated code's",
                         (int)(len > 80 ? 80 : len), start);
    for (int k = 0; refused_words[k]; k++)
        if (strlen(refused_words[k]) == len && strncmp(start, refused_words[k], len) == 0)
            return refuse_at(sc, start, "%s is not accepted (%s)", refused_words[k],
                             k < 3 ? "inline assembly could change what the host reads of the image"
                                   : "it is a preprocessor directive in another spelling");
    /* R"delim(...)delim" and its prefixed forms: refused, not read (the opening comment says why) */
    static const char *const raw[] = {"R", "u8R", "uR", "UR", "LR", NULL};
    if (start[len] == '"')
        for (int k = 0; raw[k]; k++)
            if (strlen(raw[k]) == len && strncmp(start, raw[k], len) == 0)
                return refuse_at(sc, start, "raw string literals (%s\"...\") are not accepted", raw[k]);
    return GR_OK;
}

/* The digraph at p ("<%" ...), or NULL. "<::" is '<' then "::" as C++11 reads it, unless ':' or '>'
 * follows. */
static const char *digraph_at(const char *p) {
    static const char *const digraphs[][2] = {{"%:", "#"}, {"<%", "{"}, {"%>", "}"}, {"<:", "["}, {":>", "]"}};
    for (size_t k = 0; k < sizeof digraphs / sizeof digraphs[0]; k++) {
        if (strncmp(p, digraphs[k][0], 2) != 0) continue;
        if (k == 3 && p[2] == ':' && p[3] != ':' && p[3] != '>') return NULL;
        return digraphs[k][1];
    }
    return NULL;
}

static gr_status check_tokens(scan *sc) {
    struct { char c; int line, column; } open[MAX_DEPTH];
    int depth = 0, line_empty = 1;      /* nothing but spaces and comments before, on this line */
    const char *s = sc->text;
    while (*s) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') {
            sc->line++;
            sc->line_start = ++s;
            line_empty = 1;
            continue;
        }
        if (isspace(c)) {
            s++;
            continue;
        }
        if (c == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
            continue;
        }
        if (c == '/' && s[1] == '*') {
            const char *at = s;
            int line = sc->line;
            const char *line_start = sc->line_start;
            for (s += 2; *s && !(s[0] == '*' && s[1] == '/'); s++)
                if (*s == '\n') {
                    sc->line++;
                    sc->line_start = s + 1;
                }
            if (!*s) {
                sc->line = line;
                sc->line_start = line_start;
                return refuse_at(sc, at, "the comment opened here is never closed");
            }
            s += 2;
            continue;
        }
        const char *tok = s;
        int first_on_line = line_empty;
        line_empty = 0;
        if (c == '"' || c == '\'') {
            for (s++; *s && *s != (char)c && *s != '\n'; s++)
                if (*s == '\\' && s[1] && s[1] != '\n') s++;
            if (*s != (char)c)
                return refuse_at(sc, tok, "the %s literal opened here is not closed on its line",
                                 c == '"' ? "string" : "character");
            s++;
        } else if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[1]))) {
            /* a preprocessing number: 1e-3, 0x1p+4, 1'000, 2.5f */
            for (s++; *s; s++) {
                if ((*s == '+' || *s == '-') && strchr("eEpP", s[-1])) continue;
                if (*s == '\'' && gr_is_ident_char(s[1])) continue;
                if (!gr_is_ident_char(*s) && *s != '.') break;
            }
        } else if (c == '_' || isalpha(c)) {
            while (gr_is_ident_char(*s)) s++;
            gr_status st = check_name_token(sc, tok, (size_t)(s - tok));
            if (st != GR_OK) return st;
        } else if (c == '#' || digraph_at(s)) {
            const char *d = digraph_at(s);
            if (c == '#' && sc->kind == GR_TEXT_KERNEL && first_on_line && is_unroll_pragma(s)) {
                while (*s && *s != '\n') s++;
                continue;
            }
            if (c == '#' || d[0] == '#') {
                /* the directive's word, when there is one: "#include" */
                const char *w = s + (c == '#' ? 1 : 2), *end;
                while (*w == ' ' || *w == '\t') w++;
                for (end = w; gr_is_ident_char(*end) && end - w < 24;) end++;
                return refuse_at(sc, tok, "a preprocessor directive ('%.*s%.*s') is not accepted: %s",
                                 c == '#' ? 1 : 2, s, (int)(end - w), w, holds(sc->kind));
            }
            return refuse_at(sc, tok, "the digraph '%.2s' is not accepted (write '%s')", s, d);
        } else if (c == '\\') {
            return refuse_at(sc, tok, "a '\\' outside a string or character literal is not accepted");
        } else if (strchr("([{", (char)c)) {
            if (depth == MAX_DEPTH)
                return refuse_at(sc, tok, "brackets nested deeper than %d are not accepted", MAX_DEPTH);
            open[depth].c = (char)c;
            open[depth].line = sc->line;
            open[depth++].column = (int)(s - sc->line_start) + 1;
            s++;
        } else if (strchr(")]}", (char)c)) {
            char want = c == ')' ? '(' : c == ']' ? '[' : '{';
            if (depth == 0) return refuse_at(sc, tok, "'%c' closes nothing", c);
            if (open[depth - 1].c != want)
                return refuse_at(sc, tok, "'%c' does not close the '%c' opened at %d:%d", c, open[depth - 1].c,
                                 open[depth - 1].line, open[depth - 1].column);
            depth--;
            s++;
        } else if (c == ';' && sc->kind == GR_TEXT_EXPRESSION) {
            return refuse_at(sc, tok, "';' is not accepted: %s, not statements", holds(sc->kind));
        } else {
            s++;
        }
    }
    if (depth > 0)
        return gr_fail_arg(sc->ctx, GR_EINVAL, sc->field, "%d:%d: the '%c' opened here is never closed",
                           open[depth - 1].line, open[depth - 1].column, open[depth - 1].c);
    return GR_OK;
}

gr_status gr_user_text_check(gr_context *ctx, const char *field, const char *text, gr_user_text kind) {
    size_t most = kind == GR_TEXT_EXPRESSION ? GR_EXPRESSION_MAX : GR_DECLARATIONS_MAX, len = strlen(text);
    if (len > most)
        return gr_fail_arg(ctx, GR_EINVAL, field, "is %zu bytes, over the %zu %s may hold", len, most,
                           kind == GR_TEXT_EXPRESSION ? "an expression" : kind == GR_TEXT_PREAMBLE ? "a preamble"
                                                                                            : "a kernel source");
    scan sc = {ctx, field, text, kind, text, 1};
    gr_status st = check_characters(&sc);
    return st == GR_OK ? check_tokens(&sc) : st;
}

gr_status gr_user_name_check(gr_context *ctx, const char *field, const char *name, const char *what) {
    if (!gr_is_identifier(name) || strlen(name) > GR_NAME_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, field, "'%.80s%s' is not a C name of at most %d letters, digits and '_' "
                           "(%s)", name, strlen(name) > 80 ? "..." : "", GR_NAME_MAX, what);
    if (strncmp(name, "gr_", 3) == 0)
        return gr_fail_arg(ctx, GR_EINVAL, field, "the name %s is reserved: names that begin with gr_ are the "
                           "generated code's", name);
    return GR_OK;
}
