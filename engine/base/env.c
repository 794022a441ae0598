/*
 * env.c -- the GPUREDUCE_* environment variables (env.h): one row per variable says what it accepts,
 * and one parser per shape of value (a whole number in a range, a word of a list, kind:k, a path)
 * reads them all.
 *
 * Numbers are decimal digits only: "1e9", "-5", "abc", " 4" and "4k" are refused rather than read as
 * 1, 2^64 - 5, 0 or 4 as strtoull would.
 */
#include "base/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { NUMBER, WORDS, FAULT, PATH } shape;

static const char *const backend_words[] = {"auto", "cpu", NULL};
/* in the order of handles.h's gr_fault_kind */
static const char *const fault_words[] = {"alloc", "launch", "copy", NULL};
static const char *const shared_words[] = {"0", "1", NULL};

/* Longest directory the kernel cache takes: its file names must still fit in PATH_MAX (kcache.c). */
#define CACHE_PATH_MAX 4000

static const struct row {
    const char *name;
    shape shape;
    uint64_t lo, hi, step;      /* NUMBER: lo <= n <= hi, n a multiple of step; PATH: hi bytes at most */
    const char *const *words;   /* WORDS, FAULT */
    const char *expected;       /* what the message says it accepts */
} rows[GR_ENV_VAR_COUNT] = {
    [GR_ENV_BACKEND] = {"GPUREDUCE_BACKEND", WORDS, 0, 0, 0, backend_words,
                        "auto or cpu; auto is a CUDA device when one works, else the cpu backend"},
    [GR_ENV_DEVICE] = {"GPUREDUCE_DEVICE", NUMBER, 0, 15, 1, NULL, "a CUDA device ordinal from 0 to 15"},
    [GR_ENV_CPU_THREADS] = {"GPUREDUCE_CPU_THREADS", NUMBER, 1, 64, 1, NULL,
                            "a whole number of threads from 1 to 64"},
    [GR_ENV_MEMORY_LIMIT] = {"GPUREDUCE_MEMORY_LIMIT", NUMBER, 0, UINT64_MAX, 1, NULL,
                             "a whole number of bytes in decimal digits, e.g. 1000000000; 0 is no limit"},
    [GR_ENV_FAULT] = {"GPUREDUCE_FAULT", FAULT, 0, INT32_MAX, 1, fault_words,
                      "kind:k, kind one of alloc, launch, copy and k a whole number, e.g. launch:3; k = 0 disarms"},
    [GR_ENV_EXACT_ROUND] = {"GPUREDUCE_EXACT_ROUND", NUMBER, 16, (uint64_t)1 << 30, 16, NULL,
                            "a multiple of 16 from 16 to 1073741824 (elements per round)"},
    [GR_ENV_CACHE] = {"GPUREDUCE_CACHE", PATH, 0, CACHE_PATH_MAX, 0, NULL,
                      "off, empty (no disk cache) or a directory of at most 4000 bytes"},
    [GR_ENV_CACHE_SHARED] = {"GPUREDUCE_CACHE_SHARED", WORDS, 0, 0, 0, shared_words,
                             "0 or 1; 1 uses a cache directory another user owns, for loads only"},
    [GR_ENV_COMPILE_TIMEOUT] = {"GPUREDUCE_COMPILE_TIMEOUT", NUMBER, 0, 86400, 1, NULL,
                                "a whole number of seconds from 0 to 86400; 0 is no limit"},
    [GR_ENV_BY_KEY_RUNS] = {"GPUREDUCE_BY_KEY_RUNS", NUMBER, 0, 1, 1, NULL,
                            "0 or 1; 0 reduces every key's group as a segment (the path before the pass over runs)"},
    [GR_ENV_RUNS_ITEMS] = {"GPUREDUCE_RUNS_ITEMS", NUMBER, 8, 16, 8, NULL,
                           "8 or 16: the elements a thread of the pass over runs of keys takes, for every value "
                           "dtype (default: 16 for values of up to 4 bytes, 8 for wider ones)"},
    [GR_ENV_BUFFER_POOL] = {"GPUREDUCE_BUFFER_POOL", NUMBER, 0, 1, 1, NULL,
                            "0 or 1; 0 allocates every device buffer with cudaMalloc and frees it with cudaFree"},
    [GR_ENV_POISON] = {"GPUREDUCE_POISON", NUMBER, 0, 1, 1, NULL,
                       "0 or 1; 1 fills the buffers a call writes whole (results) with 0xA5 bytes first, so "
                       "that a result the call misses shows (testing)"},
    [GR_ENV_COMM_ONESHOT] = {"GPUREDUCE_COMM_ONESHOT", NUMBER, 0, 1, 1, NULL,
                             "0 or 1; 0 combines c:reduce's one value with ncclAllReduce even where the ranks' "
                             "GPUs reach each other's memory (a rank that says 0 turns it off for all)"},
};

const char *gr_env_name(gr_env_var v) { return (unsigned)v < GR_ENV_VAR_COUNT ? rows[v].name : "?"; }

/* Decimal digits only, at most hi; 0 when s is anything else. */
static int read_number(const char *s, size_t len, uint64_t hi, uint64_t *out) {
    if (len == 0) return 0;
    uint64_t n = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') return 0;
        unsigned d = (unsigned)(s[k] - '0');
        if (d > hi || n > (hi - d) / 10) return 0;     /* n * 10 + d > hi, without overflow */
        n = n * 10 + d;
    }
    *out = n;
    return 1;
}

static int find_word(const char *const *words, const char *s, size_t len) {
    for (int k = 0; words[k]; k++)
        if (strlen(words[k]) == len && strncmp(words[k], s, len) == 0) return k;
    return -1;
}

static gr_env_state refuse(const struct row *r, const char *value, char *why, size_t whylen) {
    if (why && whylen)
        snprintf(why, whylen, "'%.80s%s' is not accepted (expected %s)", value, strlen(value) > 80 ? "..." : "",
                 r->expected);
    return GR_ENV_BAD;
}

gr_env_state gr_env_get(gr_env_var v, gr_env_value *out, char *why, size_t whylen) {
    *out = (gr_env_value){0, 0, NULL};
    if ((unsigned)v >= GR_ENV_VAR_COUNT) return GR_ENV_UNSET;
    const struct row *r = &rows[v];
    const char *value = getenv(r->name);
    if (!value || (!*value && r->shape != PATH)) return GR_ENV_UNSET;
    size_t len = strlen(value);
    switch (r->shape) {
    case NUMBER:
        if (!read_number(value, len, r->hi, &out->n) || out->n < r->lo || out->n % r->step != 0) break;
        return GR_ENV_SET;
    case WORDS:
        if ((out->word = find_word(r->words, value, len)) < 0) break;
        return GR_ENV_SET;
    case FAULT: {
        const char *colon = strchr(value, ':');
        if (!colon || (out->word = find_word(r->words, value, (size_t)(colon - value))) < 0 ||
            !read_number(colon + 1, strlen(colon + 1), r->hi, &out->n))
            break;
        return GR_ENV_SET;
    }
    case PATH:
        if (len > r->hi) break;
        out->word = *value && strcmp(value, "off") != 0;
        out->text = out->word ? value : NULL;
        return GR_ENV_SET;
    }
    return refuse(r, value, why, whylen);
}

uint64_t gr_env_number_or(gr_env_var v, uint64_t fallback) {
    gr_env_value got;
    return gr_env_get(v, &got, NULL, 0) == GR_ENV_SET ? got.n : fallback;
}

gr_env_var gr_env_check_all(char *why, size_t whylen) {
    for (int v = 0; v < GR_ENV_VAR_COUNT; v++) {
        gr_env_value got;
        if (gr_env_get((gr_env_var)v, &got, why, whylen) == GR_ENV_BAD) return (gr_env_var)v;
    }
    return GR_ENV_VAR_COUNT;
}

const char *const *gr_env_words(gr_env_var v) {
    return (unsigned)v < GR_ENV_VAR_COUNT ? rows[v].words : NULL;
}
