/*
 * library.h -- how the engine finds a library it opens on first use (NVRTC in nvrtc.c, NCCL in
 * comm.c): the path in an environment variable alone when it is set -- a wrong path is reported, not
 * papered over by another library -- else each candidate in order until one opens.
 */
#ifndef GR_LIBRARY_H
#define GR_LIBRARY_H

#include <stdio.h>
#include <stdlib.h>

/* 1 when open() took a path. why begins the sentence a failure gives ("no NVRTC ..."); open() may add
 * to it what went wrong with each path it tried. */
static inline int gr_library_search(const char *what, const char *env_name, const char *hint,
                                    const char *const *candidates, size_t count, int (*open)(const char *path),
                                    char *why, size_t whylen) {
    const char *env = getenv(env_name);
    if (env && *env) {
        snprintf(why, whylen, "no %s at %s=%.300s (the only place tried while it is set)", what, env_name, env);
        return open(env);
    }
    snprintf(why, whylen, "no %s (%s)", what, hint);
    for (size_t i = 0; i < count; i++)
        if (open(candidates[i])) return 1;
    return 0;
}

#endif
