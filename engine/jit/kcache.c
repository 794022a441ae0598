/*
 * kcache.c -- compiled kernel images kept on disk across processes, and a key -> value map for one
 * context (kcache.h).
 *
 * A disk entry is one file, named by a 128-bit digest of its key, that holds the whole key next to the
 * image: a load compares the key, so two keys with the same digest can never swap images. A lookup is
 * an open and two reads, no directory scan: the budget of a new process that finds its kernel on disk
 * is 10 ms to its first result.
 *
 * The file, little-endian:
 *     0   8  magic "grkcache"
 *     8   4  format version
 *    12   4  zero
 *    16   8  key length
 *    24   8  image length
 *    32   8  checksum of bytes 0..31, the key and the image
 *    40      the key, then the image
 * The sizes must add up to the file's size exactly and the checksum must match, else the file counts
 * as damaged: a miss, and the caller's store replaces it.
 *
 * Whom it trusts. The digest, the checksum and the key (the generated source, the NVRTC version, the
 * architecture) are computable by anyone: a file that passes every check above may still hold another
 * kernel than the one its key promises -- planted by another user, it would run their code on the GPU
 * in this process, which reads and writes this process's memory. The checks above catch accidents;
 * what keeps out a forged file is who may write it. So the directory is opened once, without
 * following a symbolic link at its last step, and used only when it belongs to the user and no one
 * else may write it (a directory of another user, such as a site-wide cache, only with
 * GPUREDUCE_CACHE_SHARED=1, and then for loads only); the handle is kept, so that renaming folders
 * later cannot swap another directory in. Each file is opened in it without following a link and
 * without waiting (a FIFO planted at an entry's name must not hang the load), and read only when it is
 * a regular file of the directory's owner that no one else may write, and no larger than
 * GR_KCACHE_MAX_FILE, checked before anything is allocated. The folders above the directory are the
 * user's choice, not checked.
 *
 * Writers never touch a file others can see: each writes a temporary file of its own (a fresh name,
 * created exclusively) in the cache directory and renames it over the final name, which POSIX makes
 * atomic. A reader holding the old file keeps reading the old file. There is no fsync: after a power
 * loss a file may be short or zeroed, which the checks above reject.
 */
#include "jit/kcache.h"
#include "base/env.h"
#include "base/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the process-wide state ------------------------------------------------------------------------ */

#define HEAD_BYTES 40
#define FORMAT_VERSION 1u
static const char MAGIC[8] = {'g', 'r', 'k', 'c', 'a', 'c', 'h', 'e'};
/* what a file name needs: 32 hex digits + ".tmp." + 16 hex digits and the NUL */
#define NAME_ROOM 64

enum { WARN_NONE, WARN_WRITING, WARN_READY, WARN_TAKEN };

static struct {
    pthread_once_t once;
    char dir[PATH_MAX];
    int dirfd;                      /* the directory, opened and checked once; every file is opened in it */
    uid_t owner;                    /* its owner: the user, or another with GPUREDUCE_CACHE_SHARED=1 */
    atomic_int disk;                /* gr_kcache_disk; storing may be turned off later */
    atomic_int warn_state;
    char warning[PATH_MAX + 256];   /* written once, under WARN_WRITING, and never again */
    atomic_size_t hits, misses, corrupt, collisions, untrusted, stores, store_failures;
    atomic_uint_fast64_t names;     /* temporary files named so far */
} cache = {.once = PTHREAD_ONCE_INIT, .dirfd = -1};

/* Keeps the first warning only: the user hears about the cache directory once per process. */
static void warn(const char *fmt, ...) {
    int expected = WARN_NONE;
    if (!atomic_compare_exchange_strong(&cache.warn_state, &expected, WARN_WRITING)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cache.warning, sizeof cache.warning, fmt, ap);
    va_end(ap);
    atomic_store(&cache.warn_state, WARN_READY);
}

const char *gr_kcache_take_warning(void) {
    int expected = WARN_READY;
    return atomic_compare_exchange_strong(&cache.warn_state, &expected, WARN_TAKEN) ? cache.warning : NULL;
}

/* strerror is not thread-safe; strerror_r comes in a GNU form (returns the text) and a POSIX one. */
static const char *error_text(int e, char *buf, size_t size) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(e, buf, size);
#else
    return strerror_r(e, buf, size) == 0 ? buf : "unknown error";
#endif
}

/* mkdir -p, each folder it makes with mode 0700; 0 when path is a directory at the end. */
static int make_dirs(char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        errno = ENOTDIR;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0700), e = errno;
        *p = '/';
        /* EEXIST: already there, or made by another process a moment ago */
        if (rc != 0 && e != EEXIST) {
            errno = e;
            return -1;
        }
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    if (stat(path, &st) != 0) return -1;
    if (S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
}

/* The directory of kcache.h's rules into cache.dir (absolute); 0, or -1 with a warning given. env is
 * GPUREDUCE_CACHE's directory, or NULL. */
static int choose_dir(const char *env) {
    const char *base, *tail;
    if (env) {
        base = env;
        tail = "";
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/') {     /* the XDG rules: a relative value is to be ignored */
            base = xdg;
            tail = "/gpureduce";
        } else if (home && *home) {
            base = home;
            tail = "/.cache/gpureduce";
        } else {
            warn("gpureduce: no directory for the kernel cache (neither XDG_CACHE_HOME nor HOME is set): "
                 "compiled kernels are kept in memory only; set GPUREDUCE_CACHE to a directory, or to off");
            return -1;
        }
    }
    /* relative to the working directory of now, so that a later chdir does not move the cache */
    char cwd[PATH_MAX] = "";
    if (base[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    int n = snprintf(cache.dir, sizeof cache.dir - NAME_ROOM, "%s%s%s%s", cwd, *cwd ? "/" : "", base, tail);
    if (n < 0 || (size_t)n >= sizeof cache.dir - NAME_ROOM) {
        warn("gpureduce: the kernel cache directory's path is too long (%.300s%s): compiled kernels are kept "
             "in memory only", base, tail);
        return -1;
    }
    return 0;
}

/* Opens cache.dir and decides whether it may be trusted (the opening comment says when); the handle
 * in cache.dirfd and its owner in cache.owner, or -1 with a warning given. *shared: it is another
 * user's, taken because GPUREDUCE_CACHE_SHARED=1 says so. */
static int open_dir(int *shared) {
    char buf[128], why[256];
    gr_env_value v;
    gr_env_state opt = gr_env_get(GR_ENV_CACHE_SHARED, &v, why, sizeof why);
    if (opt == GR_ENV_BAD) {
        warn("gpureduce: GPUREDUCE_CACHE_SHARED: %s: compiled kernels are kept in memory only", why);
        return -1;
    }
    int fd = open(cache.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR)
            warn("gpureduce: the kernel cache directory %s is a symbolic link (or not a directory): it is not "
                 "used, compiled kernels are kept in memory only; point GPUREDUCE_CACHE at the directory itself",
                 cache.dir);
        else
            warn("gpureduce: the kernel cache directory %s cannot be read (%s): compiled kernels are kept in "
                 "memory only", cache.dir, error_text(errno, buf, sizeof buf));
        return -1;
    }
    struct stat st;
    uid_t me = geteuid();
    *shared = 0;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        warn("gpureduce: the kernel cache directory %s cannot be read (%s): compiled kernels are kept in "
             "memory only", cache.dir, error_text(errno, buf, sizeof buf));
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        warn("gpureduce: the kernel cache directory %s may be written by other users (mode %04o): it is not "
             "used, compiled kernels are kept in memory only; chmod go-w it, or set GPUREDUCE_CACHE to a "
             "directory of your own", cache.dir, (unsigned)(st.st_mode & 07777));
    } else if (st.st_uid != me && !(opt == GR_ENV_SET && v.word == 1)) {
        warn("gpureduce: the kernel cache directory %s belongs to another user (uid %u): it is not used, "
             "compiled kernels are kept in memory only; GPUREDUCE_CACHE_SHARED=1 reads such a directory "
             "(never writes it) when you trust its owner", cache.dir, (unsigned)st.st_uid);
    } else if (faccessat(fd, ".", R_OK | X_OK, AT_EACCESS) != 0) {
        warn("gpureduce: the kernel cache directory %s cannot be read (%s): compiled kernels are kept in "
             "memory only", cache.dir, error_text(errno, buf, sizeof buf));
    } else {
        cache.dirfd = fd;
        cache.owner = st.st_uid;
        *shared = st.st_uid != me;
        return 0;
    }
    close(fd);
    return -1;
}

static void settle(void) {
    gr_env_value v;
    char why[256], buf[128];
    gr_env_state env = gr_env_get(GR_ENV_CACHE, &v, why, sizeof why);
    if (env == GR_ENV_BAD) {
        warn("gpureduce: GPUREDUCE_CACHE: %s: compiled kernels are kept in memory only", why);
        return;
    }
    if (env == GR_ENV_SET && !v.word) return;     /* off, asked for: no warning */
    if (choose_dir(env == GR_ENV_SET ? v.text : NULL) != 0) return;
    if (make_dirs(cache.dir) != 0) {
        warn("gpureduce: the kernel cache directory %s cannot be made (%s): compiled kernels are kept in "
             "memory only; set GPUREDUCE_CACHE to a writable directory, or to off",
             cache.dir, error_text(errno, buf, sizeof buf));
        return;
    }
    int shared;
    if (open_dir(&shared) != 0) return;
    if (shared) {                   /* another user's: never written, even where we could */
        atomic_store(&cache.disk, GR_KCACHE_READ_ONLY);
        return;
    }
    if (faccessat(cache.dirfd, ".", W_OK, AT_EACCESS) != 0) {
        warn("gpureduce: the kernel cache directory %s cannot be written (%s): kernels found there are "
             "used, new ones are kept in memory only", cache.dir, error_text(errno, buf, sizeof buf));
        atomic_store(&cache.disk, GR_KCACHE_READ_ONLY);
        return;
    }
    atomic_store(&cache.disk, GR_KCACHE_READ_WRITE);
}

static gr_kcache_disk disk_mode(void) {
    pthread_once(&cache.once, settle);
    return (gr_kcache_disk)atomic_load(&cache.disk);
}

const char *gr_kcache_dir(void) { return disk_mode() == GR_KCACHE_OFF ? NULL : cache.dir; }

void gr_kcache_stats_get(gr_kcache_stats *out) {
    out->disk = disk_mode();
    out->hits = atomic_load(&cache.hits);
    out->misses = atomic_load(&cache.misses);
    out->corrupt = atomic_load(&cache.corrupt);
    out->collisions = atomic_load(&cache.collisions);
    out->untrusted = atomic_load(&cache.untrusted);
    out->stores = atomic_load(&cache.stores);
    out->store_failures = atomic_load(&cache.store_failures);
}

/* ---- files ----------------------------------------------------------------------------------------- */

/* The entry's file name in the directory ("<digest>.kernel"). */
static void entry_name(char out[NAME_ROOM], gr_digest d) {
    snprintf(out, NAME_ROOM, "%016llx%016llx.kernel", (unsigned long long)d.a, (unsigned long long)d.b);
}

/* Chained through the seed, so the three parts need not be in one piece of memory. */
static uint64_t checksum(const unsigned char *head, const void *key, size_t keylen, const void *payload,
                         size_t len) {
    uint64_t c = gr_digest_of(head, 32, 0).a;
    c = gr_digest_of(key, keylen, c).a;
    return gr_digest_of(payload, len, c).a;
}

static int read_all(int fd, void *buf, size_t n) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;    /* an error, or the file is shorter than it said */
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put == 0) errno = EIO;      /* no progress and no reason given */
        if (put <= 0) return -1;
        p += put;
        n -= (size_t)put;
    }
    return 0;
}

typedef enum { FILE_FOUND, FILE_DAMAGED, FILE_FOREIGN, FILE_UNTRUSTED, FILE_NO_MEMORY } file_check;

/* Whether the open file may be read: a regular file of the directory's owner that no one else may
 * write (the opening comment says why), within GR_KCACHE_MAX_FILE. */
static file_check check_file(int fd, struct stat *st) {
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != cache.owner ||
        (st->st_mode & (S_IWGRP | S_IWOTH)))
        return FILE_UNTRUSTED;
    if (st->st_size < HEAD_BYTES || (uint64_t)st->st_size > GR_KCACHE_MAX_FILE) return FILE_DAMAGED;
    return FILE_FOUND;
}

/* Reads and checks the open file; on FILE_FOUND the image is in *payload (malloc'd). */
static file_check read_entry(int fd, const void *key, size_t keylen, void **payload, size_t *len) {
    struct stat st;
    unsigned char head[HEAD_BYTES];
    file_check trusted = check_file(fd, &st);
    if (trusted != FILE_FOUND) return trusted;
    if (read_all(fd, head, HEAD_BYTES) != 0) return FILE_DAMAGED;
    uint64_t body = (uint64_t)st.st_size - HEAD_BYTES, klen = gr_le64_get(head + 16), plen = gr_le64_get(head + 24);
    unsigned char version_and_zero[8];
    gr_le64_put(version_and_zero, FORMAT_VERSION);
    if (memcmp(head, MAGIC, 8) != 0 || memcmp(head + 8, version_and_zero, 8) != 0 || klen > body ||
        plen != body - klen)
        return FILE_DAMAGED;
    /* the key is read even when its length differs from ours, to tell a damaged file from another key's */
    unsigned char *buf = malloc(body ? (size_t)body : 1);
    if (!buf) return FILE_NO_MEMORY;
    if (read_all(fd, buf, (size_t)body) != 0 ||
        checksum(head, buf, (size_t)klen, buf + klen, (size_t)plen) != gr_le64_get(head + 32)) {
        free(buf);
        return FILE_DAMAGED;
    }
    if (klen != keylen || memcmp(buf, key, keylen) != 0) {
        free(buf);
        return FILE_FOREIGN;
    }
    memmove(buf, buf + klen, (size_t)plen);
    /* give back the key's room: the caller may keep the image for a while */
    unsigned char *shrunk = plen ? realloc(buf, (size_t)plen) : NULL;
    *payload = shrunk ? shrunk : buf;
    *len = (size_t)plen;
    return FILE_FOUND;
}

gr_status gr_kcache_load(const void *key, size_t keylen, void **payload, size_t *len) {
    if (!payload || !len) return GR_EINVAL;
    *payload = NULL;
    *len = 0;
    if (!key || keylen == 0) return GR_EINVAL;
    int fd = -1, refused = 0;
    if (disk_mode() != GR_KCACHE_OFF) {
        char name[NAME_ROOM];
        entry_name(name, gr_digest_of(key, keylen, FORMAT_VERSION));
        /* no link followed, no wait for a writer of a FIFO */
        fd = openat(cache.dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        refused = fd < 0 && errno == ELOOP;
    }
    if (fd < 0) {
        if (refused) atomic_fetch_add(&cache.untrusted, 1);
        atomic_fetch_add(&cache.misses, 1);
        return GR_OK;
    }
    file_check found = read_entry(fd, key, keylen, payload, len);
    close(fd);
    switch (found) {
    case FILE_FOUND: atomic_fetch_add(&cache.hits, 1); return GR_OK;
    case FILE_DAMAGED: atomic_fetch_add(&cache.corrupt, 1); break;
    case FILE_FOREIGN: atomic_fetch_add(&cache.collisions, 1); break;
    case FILE_UNTRUSTED: atomic_fetch_add(&cache.untrusted, 1); break;
    case FILE_NO_MEMORY: break;
    }
    atomic_fetch_add(&cache.misses, 1);
    return found == FILE_NO_MEMORY ? GR_ENOMEM : GR_OK;
}

/* The first failed store turns storing off (loads go on) and warns; later stores are not tried. */
static gr_status store_failed(const char *what, int e) {
    char buf[128];
    atomic_fetch_add(&cache.store_failures, 1);
    atomic_store(&cache.disk, GR_KCACHE_READ_ONLY);
    warn("gpureduce: cannot %s in the kernel cache directory %s (%s): new compiled kernels are kept in "
         "memory only", what, cache.dir, error_text(e, buf, sizeof buf));
    return GR_OK;
}

/* A temporary file of this process's own, made in the directory: "<digest>.tmp.<16 hex digits>" with a
 * name no one used (O_EXCL), tried again on a clash. Its name in tmp; the descriptor, or -1. */
static int create_temporary(gr_digest d, char tmp[NAME_ROOM]) {
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        uint64_t n = atomic_fetch_add(&cache.names, 1);
        uint64_t r = gr_hash_mix(gr_hash_mix((uint64_t)getpid() << 32 ^ n) ^ (uint64_t)now.tv_nsec ^ (uint64_t)now.tv_sec << 30);
        snprintf(tmp, NAME_ROOM, "%016llx%016llx.tmp.%016llx", (unsigned long long)d.a, (unsigned long long)d.b,
                 (unsigned long long)r);
        int fd = openat(cache.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

gr_status gr_kcache_store(const void *key, size_t keylen, const void *payload, size_t len) {
    if (!key || keylen == 0 || (!payload && len > 0)) return GR_EINVAL;
    if (disk_mode() != GR_KCACHE_READ_WRITE) return GR_OK;
    /* a file a load would refuse is not written */
    if (keylen > GR_KCACHE_MAX_FILE - HEAD_BYTES || len > GR_KCACHE_MAX_FILE - HEAD_BYTES - keylen) return GR_OK;
    char name[NAME_ROOM], tmp[NAME_ROOM];
    gr_digest d = gr_digest_of(key, keylen, FORMAT_VERSION);
    entry_name(name, d);
    int fd = create_temporary(d, tmp);
    if (fd < 0) return store_failed("create a file", errno);

    unsigned char head[HEAD_BYTES] = {0};
    memcpy(head, MAGIC, 8);
    gr_le64_put(head + 8, FORMAT_VERSION);
    gr_le64_put(head + 16, keylen);
    gr_le64_put(head + 24, len);
    gr_le64_put(head + 32, checksum(head, key, keylen, payload, len));
    int ok = write_all(fd, head, HEAD_BYTES) == 0 && write_all(fd, key, keylen) == 0 &&
             write_all(fd, payload, len) == 0;
    int e = errno;
    /* close reports the late write errors of some file systems (NFS, a full disk) */
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    /* replaces whatever was at the name: a damaged file, or one that was refused */
    if (ok && renameat(cache.dirfd, tmp, cache.dirfd, name) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlinkat(cache.dirfd, tmp, 0);
        return store_failed("write a file", e);
    }
    atomic_fetch_add(&cache.stores, 1);
    return GR_OK;
}

/* ---- the in-memory map ----------------------------------------------------------------------------- */

/* Open addressing with linear probing, at most half full; entries are never removed one by one, so a
 * probe stops at the first empty slot. */
typedef struct mem_entry {
    uint64_t hash;
    void *key;              /* a copy; NULL marks an empty slot */
    size_t keylen;
    void *value;
} mem_entry;

struct gr_kcache_mem {
    mem_entry *slots;
    size_t cap;             /* a power of two */
    size_t count;
    void (*destroy)(void *value);
};

enum { MEM_FIRST_CAP = 16 };

gr_status gr_kcache_mem_create(void (*destroy)(void *value), gr_kcache_mem **out) {
    *out = NULL;
    gr_kcache_mem *m = calloc(1, sizeof *m);
    mem_entry *slots = calloc(MEM_FIRST_CAP, sizeof *slots);
    if (!m || !slots) {
        free(m);
        free(slots);
        return GR_ENOMEM;
    }
    *m = (gr_kcache_mem){slots, MEM_FIRST_CAP, 0, destroy};
    *out = m;
    return GR_OK;
}

void gr_kcache_mem_destroy(gr_kcache_mem *m) {
    if (!m) return;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        if (m->destroy) m->destroy(m->slots[i].value);
        free(m->slots[i].key);
    }
    free(m->slots);
    free(m);
}

/* The slot that holds key, or the empty slot where it would go. */
static mem_entry *mem_slot(mem_entry *slots, size_t cap, uint64_t hash, const void *key, size_t keylen) {
    for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
        mem_entry *e = &slots[i];
        if (!e->key) return e;
        if (e->hash == hash && e->keylen == keylen && (keylen == 0 || memcmp(e->key, key, keylen) == 0))
            return e;
    }
}

void *gr_kcache_mem_find(const gr_kcache_mem *m, const void *key, size_t keylen) {
    if (!m) return NULL;
    mem_entry *e = mem_slot(m->slots, m->cap, gr_digest_of(key, keylen, 0).a, key, keylen);
    return e->key ? e->value : NULL;
}

static int mem_grow(gr_kcache_mem *m) {
    size_t cap = m->cap * 2;
    mem_entry *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        mem_entry *e = &m->slots[i];
        if (e->key) *mem_slot(slots, cap, e->hash, e->key, e->keylen) = *e;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

gr_status gr_kcache_mem_insert(gr_kcache_mem *m, const void *key, size_t keylen, void *value) {
    if (!m || (!key && keylen > 0)) return GR_EINVAL;
    uint64_t hash = gr_digest_of(key, keylen, 0).a;
    mem_entry *e = mem_slot(m->slots, m->cap, hash, key, keylen);
    if (e->key) {
        if (e->value != value && m->destroy) m->destroy(e->value);
        e->value = value;
        return GR_OK;
    }
    if ((m->count + 1) * 2 > m->cap) {
        if (mem_grow(m) != 0) return GR_ENOMEM;
        e = mem_slot(m->slots, m->cap, hash, key, keylen);
    }
    void *copy = malloc(keylen ? keylen : 1);    /* never NULL: a key marks a used slot */
    if (!copy) return GR_ENOMEM;
    if (keylen) memcpy(copy, key, keylen);
    *e = (mem_entry){hash, copy, keylen, value};
    m->count++;
    return GR_OK;
}

size_t gr_kcache_mem_count(const gr_kcache_mem *m) { return m ? m->count : 0; }
