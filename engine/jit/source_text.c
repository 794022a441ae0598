/*
 * source_text.c -- text of a generated CUDA source, with its lines counted (source_text.h).
 */
#include "jit/source_text.h"
#include "base/error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr_text_raw(gr_text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1) cap *= 2;
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
    for (size_t k = 0; k < n; k++) t->line += s[k] == '\n';
}

void gr_text_put(gr_text *t, const char *fmt, ...) {
    char buf[1024], *big = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= sizeof buf && (big = malloc((size_t)n + 1))) {   /* a long name, say */
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (n < 0 || ((size_t)n >= sizeof buf && !big)) t->failed = 1;
    else gr_text_raw(t, big ? big : buf, (size_t)n);
    free(big);
}

void gr_text_field(gr_text *t, const char *field, const char *user) {
    gr_text_put(t, "#line 1 \"%s\"\n", field);
    size_t n = strlen(user);
    gr_text_raw(t, user, n);
    if (n == 0 || user[n - 1] != '\n') gr_text_raw(t, "\n", 1);
    gr_text_put(t, "#line %d \"generated\"\n", t->line + 1);
}

void gr_text_nvrtc_names(gr_text *t) {
    gr_text_put(t, "// NVRTC has no standard library: the fixed-width names and two constants, for the fields.\n");
    static const char *const widths[] = {"signed char int8_t", "unsigned char uint8_t", "short int16_t",
                                         "unsigned short uint16_t", "int int32_t", "unsigned uint32_t",
                                         "long long int64_t", "unsigned long long uint64_t"};
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) gr_text_put(t, "typedef %s;\n", widths[k]);
    gr_text_put(t, "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
                   "#ifndef NAN\n#define NAN __int_as_float(0x7fffffff)\n#endif\n\n");
}

/* A small float dtype's element type in generated sources (cuda/device/small_float.cuh), by lists.h's
 * format column; NULL for the dtypes of format C. */
#define GR_SMALL_DEVICE_TYPE_C NULL
#define GR_SMALL_DEVICE_TYPE_f16 "::gr::f16"
#define GR_SMALL_DEVICE_TYPE_bf16 "::gr::bf16"
#define GR_SMALL_DEVICE_TYPE_e4m3 "::gr::e4m3"
#define GR_SMALL_DEVICE_TYPE_e5m2 "::gr::e5m2"
static const char *gr_small_float_device_type(gr_dtype t) {
#define SMALL_TYPE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    if (t == GR_##E) return GR_SMALL_DEVICE_TYPE_##format;
    GR_DTYPE_LIST(SMALL_TYPE)
#undef SMALL_TYPE
    return NULL;
}

const char *gr_device_type(gr_dtype t) {
    size_t bytes = gr_dtype_size(t);
    int is_signed = gr_dtype_is_signed(t);
    if (gr_dtype_is_float(t)) {
        if (bytes == 4) return "float";
        if (bytes == 8) return "double";
        return gr_small_float_device_type(t);
    }
    switch (bytes) {
    case 1: return is_signed ? "signed char" : "unsigned char";
    case 2: return is_signed ? "short" : "unsigned short";
    case 4: return is_signed ? "int" : "unsigned";
    case 8: return is_signed ? "long long" : "unsigned long long";
    default: return NULL;
    }
}

/* ---- words and tokens ------------------------------------------------------------------------------ */

static int is_ident_start(int c) { return c == '_' || isalpha((unsigned char)c); }
int gr_is_ident_char(int c) { return c == '_' || isalnum((unsigned char)c); }

int gr_is_identifier(const char *s) {
    if (!s || !is_ident_start(*s)) return 0;
    while (gr_is_ident_char(*s)) s++;
    return *s == '\0';
}

int gr_source_has_token(const char *s, const char *word, int free_only) {
    size_t wlen = strlen(word);
    int member = 0;     /* the previous token was '.', "->" or "::" */
    while (*s) {
        unsigned char c = (unsigned char)*s;
        if (isspace(c)) {
            s++;
        } else if (c == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
        } else if (c == '/' && s[1] == '*') {
            const char *end = strstr(s + 2, "*/");
            s = end ? end + 2 : s + strlen(s);
        } else if (c == '"' || c == '\'') {
            for (s++; *s && *s != (char)c && *s != '\n'; s++)
                if (*s == '\\' && s[1]) s++;
            if (*s == (char)c) s++;
            member = 0;
        } else if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[1]))) {
            /* a preprocessing number: 1e-3, 0x1p+4, 1'000, 2.5f */
            for (s++; *s; s++) {
                if ((*s == '+' || *s == '-') && strchr("eEpP", s[-1])) continue;
                if (*s == '\'' && gr_is_ident_char(s[1])) continue;
                if (!gr_is_ident_char(*s) && *s != '.') break;
            }
            member = 0;
        } else if (is_ident_start(c)) {
            const char *start = s;
            while (gr_is_ident_char(*s)) s++;
            if ((size_t)(s - start) == wlen && memcmp(start, word, wlen) == 0 && !(free_only && member)) return 1;
            member = 0;
        } else {
            member = (c == '.' && !isdigit((unsigned char)s[1])) || (c == '-' && s[1] == '>') ||
                     (c == ':' && s[1] == ':');
            s += (c == '-' && s[1] == '>') || (c == ':' && s[1] == ':') ? 2 : 1;
        }
    }
    return 0;
}


gr_status gr_check_name(gr_context *ctx, const char *name) {
    if (!name || !*name)
        return gr_fail_arg(ctx, GR_EINVAL, "name", "is %s (expected a word: letters, digits and '_')",
                           name ? "empty" : "required");
    if (!gr_is_identifier(name) || strlen(name) > 64)
        return gr_fail_arg(ctx, GR_EINVAL, "name", "'%.80s' is not a word of at most 64 letters, digits and '_' "
                           "that starts with a letter or '_'", name);
    return GR_OK;
}
