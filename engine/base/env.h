/*
 * env.h -- the GPUREDUCE_* environment variables the engine reads, each parsed here and nowhere else
 * (env.c): a value the variable does not accept is an error that names the variable and what it
 * accepts, never a silent default. gr_context_create checks every one first (gr_env_check_all), so a
 * later reader may take a value that is not accepted as unset.
 *
 * Plain C and the C library only: kcache.c, whose test links it alone, reads its variables here too.
 * GPUREDUCE_NVRTC and GPUREDUCE_NCCL, paths of libraries, are library.h's.
 */
#ifndef GR_ENV_H
#define GR_ENV_H

#include <stddef.h>
#include <stdint.h>

typedef enum gr_env_var {
    GR_ENV_BACKEND,             /* a word: auto, cpu */
    GR_ENV_DEVICE,              /* a CUDA ordinal */
    GR_ENV_CPU_THREADS,         /* threads of the host reductions */
    GR_ENV_MEMORY_LIMIT,        /* bytes; 0: no limit */
    GR_ENV_FAULT,               /* kind:k (faults.c) */
    GR_ENV_EXACT_ROUND,         /* elements per round of a gpu_to_gpu segment (testing) */
    GR_ENV_CACHE,               /* off, or the kernel cache's directory */
    GR_ENV_CACHE_SHARED,        /* 0 or 1: a cache directory of another user may be read */
    GR_ENV_COMPILE_TIMEOUT,     /* seconds an NVRTC compile may take; 0: no limit */
    GR_ENV_BY_KEY_RUNS,         /* 0 or 1: reductions by key as one pass over runs where they can (by_key.c) */
    GR_ENV_RUNS_ITEMS,          /* 8 or 16: elements a thread of the pass over runs (comparisons, by_key.c) */
    GR_ENV_BUFFER_POOL,         /* 0 or 1: device buffers from the caching pool (memory.c, runtime.cu) */
    GR_ENV_POISON,              /* 0 or 1: unset new buffers filled with 0xA5 bytes (testing, buffer.c) */
    GR_ENV_COMM_ONESHOT,        /* 0 or 1: one-value c:reduce through the ranks' mailboxes (comm_oneshot.c) */
    GR_ENV_VAR_COUNT
} gr_env_var;

typedef struct gr_env_value {
    uint64_t n;         /* a number; GR_ENV_FAULT: k */
    int word;           /* a word's place in the variable's list; GR_ENV_FAULT: the kind (alloc, launch,
                         * copy); GR_ENV_CACHE: 0 off, 1 a directory */
    const char *text;   /* GR_ENV_CACHE: the directory (the environment's own string) */
} gr_env_value;

typedef enum { GR_ENV_UNSET, GR_ENV_SET, GR_ENV_BAD } gr_env_state;

/* The variable's value: GR_ENV_UNSET when it is absent or empty (its default applies; an empty
 * GPUREDUCE_CACHE is "off", GR_ENV_SET), GR_ENV_SET with *out, GR_ENV_BAD with a sentence to put after
 * the variable's name in why (may be NULL): "'abc' is not accepted (expected a whole number of threads
 * from 1 to 64)". */
gr_env_state gr_env_get(gr_env_var v, gr_env_value *out, char *why, size_t whylen);
/* The number a variable holds, or fallback when it is unset or not accepted. */
uint64_t gr_env_number_or(gr_env_var v, uint64_t fallback);
/* The first variable set to a value it does not accept, its sentence in why (as gr_env_get's);
 * GR_ENV_VAR_COUNT when every one is accepted. */
gr_env_var gr_env_check_all(char *why, size_t whylen);
const char *gr_env_name(gr_env_var v);
/* The words a variable accepts, NULL-terminated (GR_ENV_FAULT: the fault kinds); NULL for the others. */
const char *const *gr_env_words(gr_env_var v);

#endif
