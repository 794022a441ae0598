/*
 * kcache.h -- caches of compiled kernel images (kcache.c): one on disk shared by every process of the
 * user, and a small in-memory map that a context owns.
 *
 * Plain C, no CUDA: the images are opaque bytes, and the key is whatever bytes the caller builds (for
 * an operator compiled at run time: the generated source, the compile options, the dtype, the
 * architecture and the NVRTC version). Nothing here prints; a problem with the cache directory is kept
 * as one warning for the binding to show (gr_kcache_take_warning).
 */
#ifndef GR_KCACHE_H
#define GR_KCACHE_H

#include "gr.h"

#include <stdint.h>

/* ---- the disk cache -------------------------------------------------------------------------------- */

/* The directory, settled on first use: GPUREDUCE_CACHE if set ("off" or empty: no disk cache), else
 * $XDG_CACHE_HOME/gpureduce (an absolute XDG_CACHE_HOME only), else $HOME/.cache/gpureduce. Missing
 * folders are made with mode 0700. One that cannot be made or read, a symbolic link, one that others
 * may write, or one of another user (unless GPUREDUCE_CACHE_SHARED=1) turns the disk cache off for the
 * process; one that can be read but not written, or another user's taken with GPUREDUCE_CACHE_SHARED=1,
 * is used for loads only. Each but the last with a warning. kcache.c's opening comment says why. */
typedef enum gr_kcache_disk {
    GR_KCACHE_OFF,          /* no disk cache: every load misses, every store is skipped */
    GR_KCACHE_READ_ONLY,    /* loads only */
    GR_KCACHE_READ_WRITE
} gr_kcache_disk;

/* The largest file a load reads (header, key and image): a larger one is damaged, and not stored. */
#define GR_KCACHE_MAX_FILE ((uint64_t)64 << 20)

/* The image stored under key, in *payload (malloc'd; the caller frees it) with its length in *len.
 * A miss is not a failure: GR_OK with *payload NULL and *len 0. A file that is damaged (short, long,
 * wrong checksum), holds another key, or is not to be trusted (not a regular file of the directory's
 * owner that only the owner may write: a link, a FIFO, another user's) counts as a miss and is never
 * loaded; the caller builds the image and stores it, which replaces the file. GR_ENOMEM when the image
 * does not fit in memory, GR_EINVAL for a NULL pointer or an empty key. */
gr_status gr_kcache_load(const void *key, size_t keylen, void **payload, size_t *len);

/* Saves payload under key, replacing any file there: written whole to a temporary file in the cache
 * directory, then renamed over the final name, so a reader sees the old file or the new one, never a
 * part. A failed write is not the caller's failure: GR_OK, the cache stops storing for the process and
 * keeps a warning. GR_EINVAL for a NULL pointer or an empty key. */
gr_status gr_kcache_store(const void *key, size_t keylen, const void *payload, size_t len);

/* The directory in use (absolute), or NULL when the disk cache is off. */
const char *gr_kcache_dir(void);

/* The first problem with the directory, worded for a user, once: later calls return NULL. The text
 * stays valid for the life of the process. */
const char *gr_kcache_take_warning(void);

/* Counts since the process started, over every thread. corrupt and collisions are misses too. */
typedef struct gr_kcache_stats {
    size_t hits;
    size_t misses;
    size_t corrupt;         /* files rejected as damaged: size, header or checksum */
    size_t collisions;      /* intact files that held another key under the same name */
    size_t untrusted;       /* files refused unread: a link, not a regular file, another user's, or
                             * writable by others */
    size_t stores;          /* files written */
    size_t store_failures;  /* stores that could not be written (the first turns storing off) */
    gr_kcache_disk disk;    /* what the disk cache does now */
} gr_kcache_stats;
void gr_kcache_stats_get(gr_kcache_stats *out);

/* ---- the in-memory map ----------------------------------------------------------------------------- */

/* Key bytes -> a value the map owns, destroyed by the callback given at creation (which may be NULL).
 * No lock: it belongs to one context, used as the context is. */
typedef struct gr_kcache_mem gr_kcache_mem;

gr_status gr_kcache_mem_create(void (*destroy)(void *value), gr_kcache_mem **out);
/* Destroys every value, then the map. NULL is a no-op. */
void gr_kcache_mem_destroy(gr_kcache_mem *m);
/* The value under key, or NULL. */
void *gr_kcache_mem_find(const gr_kcache_mem *m, const void *key, size_t keylen);
/* Keeps value under key (the key is copied); a value already there is destroyed and replaced. On
 * failure (GR_ENOMEM) the map is unchanged and the caller still owns value. */
gr_status gr_kcache_mem_insert(gr_kcache_mem *m, const void *key, size_t keylen, void *value);
size_t gr_kcache_mem_count(const gr_kcache_mem *m);

#endif
