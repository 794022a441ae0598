/*
 * compile_log.c -- NVRTC's log in the user's terms (compile_log.h).
 */
#include "jit/compile_log.h"
#include "base/error.h"
#include "jit/nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The files a generated source names its users' texts by: an operator's fields, a user kernel's source
 * and the call of its entry point (kernel_source.c). */
static const char *const fields[] = {"map", "reduce", "post", "identity", "preamble", "acc", "source", "entry", NULL};

/* The field whose text ends just before generated line `line` (where its #line directive resumes the
 * generated numbering): an error there is an unfinished expression, "{" say. NULL for any other line. */
static const char *field_ending_at(const char *source, long line) {
    char resume[48];
    snprintf(resume, sizeof resume, "\n#line %ld \"generated\"\n", line);
    const char *at = strstr(source, resume);
    if (!at) return NULL;
    const char *start = NULL;
    for (const char *p = source; (p = strstr(p, "\n#line 1 \"")) != NULL && p < at; p++) start = p + 10;
    for (int k = 0; start && fields[k]; k++)
        if (strncmp(start, fields[k], strlen(fields[k])) == 0 && start[strlen(fields[k])] == '"') return fields[k];
    return NULL;
}

/* The first line "<file>(<line>): <severity>: <message>" with a severity that says error, followed by
 * NVRTC's echo of the line and a caret under the column (the message has no column without a caret). */
int gr_compile_error(gr_context *ctx, const char *what, const char *source, const char *log) {
    for (const char *line = log; line && *line;) {
        const char *eol = strchr(line, '\n'), *end = eol ? eol : line + strlen(line);
        const char *open = memchr(line, '(', (size_t)(end - line));
        char *after;
        long lineno = open ? strtol(open + 1, &after, 10) : 0;
        const char *sev = open && after > open + 1 && strncmp(after, "): ", 3) == 0 ? after + 3 : NULL;
        const char *colon = sev ? strstr(sev, ": ") : NULL;
        if (!colon || colon > end || !memmem(sev, (size_t)(colon - sev), "error", 5)) {
            line = eol ? eol + 1 : NULL;
            continue;
        }
        const char *msg = colon + 2;
        int msglen = (int)(end - msg), filelen = (int)(open - line);
        /* the column: NVRTC echoes the line indented by two spaces, then a caret under the spot */
        long column = 0;
        const char *echo = eol ? eol + 1 : NULL, *caret = echo ? strchr(echo, '\n') : NULL;
        if (caret && strncmp(echo, "  ", 2) == 0 && strncmp(caret + 1, "  ", 2) == 0) {
            const char *c = caret + 3;
            while (*c == ' ' || *c == '\t') c++;
            if (*c == '^') column = (long)(c - (caret + 3)) + 1;
        }
        const char *field = NULL;
        for (int k = 0; fields[k] && !field; k++)
            if ((int)strlen(fields[k]) == filelen && strncmp(line, fields[k], (size_t)filelen) == 0) field = fields[k];
        char where[48];
        if (column) snprintf(where, sizeof where, "%ld:%ld", lineno, column);
        else snprintf(where, sizeof where, "%ld", lineno);
        if (!field && filelen == 9 && strncmp(line, "generated", 9) == 0 && (field = field_ending_at(source, lineno)))
            snprintf(where, sizeof where, "at its end");
        if (field)
            gr_fail_arg(ctx, GR_EINVAL, field, "%s: %.*s (%s)", where, msglen, msg, what);
        else
            gr_fail(ctx, GR_EINVAL, "%s does not compile: %.*s: %s: %.*s", what, filelen, line, where, msglen, msg);
        return 1;
    }
    return 0;
}


/* The file an entry's first line names ("map" of "map(3): error: ..."), by its length; 0 when the line
 * does not start an entry. */
static size_t entry_file(const char *line, const char *end) {
    const char *open = memchr(line, '(', (size_t)(end - line));
    if (!open || open == line) return 0;
    const char *d = open + 1;
    while (d < end && *d >= '0' && *d <= '9') d++;
    return d > open + 1 && d + 2 < end && d[0] == ')' && d[1] == ':' && d[2] == ' ' ? (size_t)(open - line) : 0;
}

static int is_own_file(const char *name, size_t len) {
    if (len == 9 && strncmp(name, "generated", 9) == 0) return 1;
    for (int k = 0; fields[k]; k++)
        if (strlen(fields[k]) == len && strncmp(name, fields[k], len) == 0) return 1;
    for (int k = 0; k < gr_nvrtc_header_count; k++)
        if (strlen(gr_nvrtc_header_names[k]) == len && strncmp(name, gr_nvrtc_header_names[k], len) == 0) return 1;
    return 0;
}

char *gr_compile_log_own(char *log) {
    if (!log) return NULL;
    size_t size = strlen(log);
    char *kept = malloc(size + 64);
    if (!kept) {                /* no room for the note: the log goes whole rather than not at all */
        kept = log;
        log = NULL;
    }
    char *out = kept;
    int keep = 1;
    size_t dropped = 0;
    for (const char *line = log ? log : kept; *line;) {
        const char *eol = strchr(line, '\n'), *end = eol ? eol : line + strlen(line);
        size_t file = entry_file(line, end), n = (size_t)(end - line) + (eol ? 1 : 0);
        if (file) keep = is_own_file(line, file);
        if (keep) memmove(out, line, n);
        out += keep ? n : 0;
        dropped += !keep;
        line += n;
    }
    *out = '\0';
    if (dropped && log) snprintf(out, 64, "(%zu lines about other files left out)\n", dropped);
    free(log);
    return kept;
}
