/*
 * kcache_host.c -- the kernel cache (engine/jit/kcache.c) on its own, without a GPU or Lua.
 *
 *   kcache_host            the scenarios that need nothing but a directory, in a fresh one under /tmp
 *   kcache_host SCENARIO   one scenario, in the cache directory the environment names (GPUREDUCE_CACHE
 *                          and friends, set by spec/kcache_host_spec.lua)
 *   kcache_host forge FROM TO   stores entry file FROM's image under entry file TO's key (for
 *                          spec/user_text_spec.lua: what the host believes of an image)
 *
 * Each scenario damages files the way a crash, a full disk or a stray edit would and checks that the
 * cache misses rather than loads, counts what it saw, and heals on the next store. Prints
 * "kcache_host SCENARIO: ok" and exits 0 when every check held.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jit/kcache.h"

static int failures;

static void fail_at(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kcache_host:%d: ", line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}
#define CHECK(cond, ...) ((cond) ? (void)0 : fail_at(__LINE__, __VA_ARGS__))

/* n bytes that depend on seed and position: images that differ everywhere from each other's */
static unsigned char *bytes_of(size_t n, unsigned seed) {
    unsigned char *p = malloc(n ? n : 1);
    uint64_t x = 0x5851f42d4c957f2dull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(x >> 56);
    }
    return p;
}

/* A load that must hit with exactly want (or miss, when want is NULL). */
static void expect_load_at(int line, const void *key, size_t keylen, const void *want, size_t wantlen) {
    void *got;
    size_t len;
    gr_status st = gr_kcache_load(key, keylen, &got, &len);
    if (st != GR_OK) fail_at(line, "load: status %d", (int)st);
    else if (!want && got) fail_at(line, "load hit (%zu bytes) where a miss was due", len);
    else if (want && !got) fail_at(line, "load missed where %zu bytes were due", wantlen);
    else if (want && (len != wantlen || memcmp(got, want, len) != 0))
        fail_at(line, "load gave %zu bytes, not the %zu stored", len, wantlen);
    free(got);
}
#define EXPECT_LOAD(key, keylen, want, wantlen) expect_load_at(__LINE__, key, keylen, want, wantlen)
#define EXPECT_MISS(key, keylen) expect_load_at(__LINE__, key, keylen, NULL, 0)

static void store(const void *key, size_t keylen, const void *payload, size_t len) {
    gr_status st = gr_kcache_store(key, keylen, payload, len);
    CHECK(st == GR_OK, "store: status %d", (int)st);
}

/* The files of the cache directory: finished entries and temporary ones. The cache itself never scans;
 * this is the test looking. The last entry's path goes to last (when not NULL). */
static void count_files(size_t *entries, size_t *temps, char last[PATH_MAX]) {
    *entries = *temps = 0;
    DIR *d = opendir(gr_kcache_dir());
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dot = strchr(e->d_name, '.');
        if (!dot || dot == e->d_name) continue;
        if (strcmp(dot, ".kernel") == 0) {
            ++*entries;
            if (last) snprintf(last, PATH_MAX, "%s/%s", gr_kcache_dir(), e->d_name);
        } else if (strncmp(dot, ".tmp.", 5) == 0) {
            ++*temps;
        }
    }
    closedir(d);
}

/* The path of the one entry in the directory (the scenarios that damage files keep one at a time). */
static void only_entry(char path[PATH_MAX]) {
    size_t entries, temps;
    path[0] = '\0';
    count_files(&entries, &temps, path);
    CHECK(entries == 1 && temps == 0, "%zu entries and %zu temporary files, where one entry was due", entries,
          temps);
}

static off_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void flip_byte(const char *path, off_t at, unsigned char mask) {
    int fd = open(path, O_RDWR);
    unsigned char b;
    CHECK(fd >= 0 && pread(fd, &b, 1, at) == 1, "cannot read byte %lld of %s", (long long)at, path);
    b ^= mask;
    CHECK(fd >= 0 && pwrite(fd, &b, 1, at) == 1, "cannot write byte %lld of %s", (long long)at, path);
    if (fd >= 0) close(fd);
}

/* Stats since `before`, as the scenarios count them. */
static void expect_counts_at(int line, const gr_kcache_stats *before, size_t hits, size_t misses, size_t corrupt,
                             size_t collisions, size_t stores) {
    gr_kcache_stats now;
    gr_kcache_stats_get(&now);
    size_t got[5] = {now.hits - before->hits, now.misses - before->misses, now.corrupt - before->corrupt,
                     now.collisions - before->collisions, now.stores - before->stores};
    size_t want[5] = {hits, misses, corrupt, collisions, stores};
    const char *names[5] = {"hits", "misses", "corrupt", "collisions", "stores"};
    for (int i = 0; i < 5; i++)
        if (got[i] != want[i]) fail_at(line, "%s: %zu, expected %zu", names[i], got[i], want[i]);
}
#define EXPECT_COUNTS(before, ...) expect_counts_at(__LINE__, before, __VA_ARGS__)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- scenarios --------------------------------------------------------------------------------------- */

/* Images of the edge sizes under short and long keys come back byte for byte; a replaced image
 * replaces; keys one byte apart or a prefix apart miss; the calls refuse what they must. */
static void roundtrip(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    CHECK(before.disk == GR_KCACHE_READ_WRITE, "the disk cache is %d, not read-write", (int)before.disk);
    const size_t sizes[] = {0, 1, 7, 8, 9, 4096, (1u << 20) + 3};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    char keys[7][64];
    unsigned char *images[7];
    for (size_t i = 0; i < nsizes; i++) {
        snprintf(keys[i], sizeof keys[i], "roundtrip %zu", sizes[i]);
        images[i] = bytes_of(sizes[i], (unsigned)i);
        store(keys[i], strlen(keys[i]), images[i], sizes[i]);
    }
    for (size_t i = 0; i < nsizes; i++) EXPECT_LOAD(keys[i], strlen(keys[i]), images[i], sizes[i]);

    /* a key the size of a generated source file: 100 KB, told apart by its last byte */
    size_t biglen = 100000;
    unsigned char *bigkey = bytes_of(biglen, 99);
    store(bigkey, biglen, images[5], sizes[5]);
    EXPECT_LOAD(bigkey, biglen, images[5], sizes[5]);
    bigkey[biglen - 1] ^= 1;
    EXPECT_MISS(bigkey, biglen);
    EXPECT_MISS(bigkey, biglen - 1);
    bigkey[biglen - 1] ^= 1;

    /* the first load of a new process reads one file: time it for the 1 MiB image */
    double t0 = now_ms();
    EXPECT_LOAD(keys[6], strlen(keys[6]), images[6], sizes[6]);
    printf("kcache_host: a 1 MiB image loaded in %.3f ms\n", now_ms() - t0);

    store(keys[1], strlen(keys[1]), images[4], sizes[4]);
    EXPECT_LOAD(keys[1], strlen(keys[1]), images[4], sizes[4]);
    EXPECT_COUNTS(&before, nsizes + 3, 2, 0, 0, nsizes + 2);

    size_t entries, temps;
    count_files(&entries, &temps, NULL);
    CHECK(entries == nsizes + 1 && temps == 0, "%zu entries and %zu temporary files, expected %zu and 0", entries,
          temps, nsizes + 1);

    void *got = (void *)1;
    size_t len = 1;
    CHECK(gr_kcache_load(NULL, 3, &got, &len) == GR_EINVAL && got == NULL && len == 0, "load(NULL key)");
    CHECK(gr_kcache_load("k", 0, &got, &len) == GR_EINVAL, "load of an empty key");
    CHECK(gr_kcache_load("k", 1, NULL, &len) == GR_EINVAL, "load into NULL");
    CHECK(gr_kcache_store("k", 1, NULL, 5) == GR_EINVAL, "store of a NULL image of 5 bytes");
    CHECK(gr_kcache_store("k", 0, "x", 1) == GR_EINVAL, "store under an empty key");

    for (size_t i = 0; i < nsizes; i++) free(images[i]);
    free(bigkey);
}

static void miss(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    EXPECT_MISS("never stored", 12);
    EXPECT_COUNTS(&before, 0, 1, 0, 0, 0);
}

/* One entry alone in the directory, for the scenarios that damage its file: where its key and image
 * start in the file and where it ends, and the counts from before it was stored. */
typedef struct lone_entry {
    unsigned char *key, *image;
    size_t keylen, len;
    char path[PATH_MAX];
    off_t key_at, image_at, end;
    gr_kcache_stats before;
} lone_entry;

static void lone_store(lone_entry *e, size_t keylen, size_t len, unsigned seed) {
    *e = (lone_entry){bytes_of(keylen, seed), bytes_of(len, seed + 1), keylen, len, "", 40,
                      40 + (off_t)keylen, 40 + (off_t)(keylen + len), {0}};
    gr_kcache_stats_get(&e->before);
    store(e->key, keylen, e->image, len);
    only_entry(e->path);
}

/* The damaged file misses, and the next store makes it whole again. */
static void miss_then_repair_at(int line, lone_entry *e) {
    expect_load_at(line, e->key, e->keylen, NULL, 0);
    store(e->key, e->keylen, e->image, e->len);
    expect_load_at(line, e->key, e->keylen, e->image, e->len);
}
#define MISS_THEN_REPAIR(e) miss_then_repair_at(__LINE__, e)

static void lone_free(lone_entry *e) {
    free(e->key);
    free(e->image);
}

/* A file cut short anywhere -- in the header, the key, the image -- or one byte too long. */
static void truncated(void) {
    lone_entry e;
    lone_store(&e, 300, 5000, 1);
    const off_t k = e.key_at, p = e.image_at, full = e.end;
    CHECK(file_size(e.path) == full, "the file has %lld bytes, expected %lld", (long long)file_size(e.path),
          (long long)full);
    const off_t cuts[] = {0, 1, 8, 39, k, k + 1, p - 1, p, p + 1, full - 8, full - 1};
    const size_t ncuts = sizeof cuts / sizeof cuts[0];
    for (size_t i = 0; i < ncuts; i++) {
        CHECK(truncate(e.path, cuts[i]) == 0, "truncate to %lld: %s", (long long)cuts[i], strerror(errno));
        MISS_THEN_REPAIR(&e);
    }
    /* one byte more than the header says */
    int fd = open(e.path, O_WRONLY | O_APPEND);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1, "cannot append to %s", e.path);
    if (fd >= 0) close(fd);
    MISS_THEN_REPAIR(&e);
    EXPECT_COUNTS(&e.before, ncuts + 1, ncuts + 1, ncuts + 1, 0, ncuts + 2);
    lone_free(&e);
}

/* One flipped bit or byte anywhere -- magic, version, lengths, checksum, key, image -- misses; so does a
 * zeroed run of the image (a write that never reached the disk). */
static void damaged(void) {
    lone_entry e;
    lone_store(&e, 257, 70001, 3);
    const off_t k = e.key_at, p = e.image_at, end = e.end;
    const off_t at[] = {0, 7, 8, 11, 12, 16, 23, 24, 31, 32, 39, k, k + 128, p - 1, p, p + 4096, p + 35000, end - 1};
    const size_t nat = sizeof at / sizeof at[0];
    for (size_t i = 0; i < nat; i++) {
        for (int m = 0; m < 2; m++) {
            flip_byte(e.path, at[i], m ? 0xff : 0x10);
            MISS_THEN_REPAIR(&e);
        }
    }
    int fd = open(e.path, O_WRONLY);
    static const unsigned char zeros[4096];
    CHECK(fd >= 0 && pwrite(fd, zeros, sizeof zeros, p + 8192) == (ssize_t)sizeof zeros, "cannot zero a run");
    if (fd >= 0) close(fd);
    MISS_THEN_REPAIR(&e);
    EXPECT_COUNTS(&e.before, 2 * nat + 1, 2 * nat + 1, 2 * nat + 1, 0, 2 * nat + 2);
    lone_free(&e);
}

/* A whole, valid file of another key under this key's name (two keys with one digest) is not loaded. */
static void collision(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    unsigned char *a = bytes_of(1000, 5), *b = bytes_of(2000, 6);
    store("key a", 5, a, 1000);
    char path_a[PATH_MAX], path_b[PATH_MAX];
    only_entry(path_a);
    char aside[PATH_MAX + 8];
    snprintf(aside, sizeof aside, "%s.aside", path_a);
    CHECK(rename(path_a, aside) == 0, "cannot move %s aside", path_a);
    store("key b", 5, b, 2000);
    only_entry(path_b);
    CHECK(strcmp(path_a, path_b) != 0, "two keys gave one file name");
    CHECK(rename(path_b, path_a) == 0, "cannot move b's file to a's name");
    EXPECT_MISS("key a", 5);
    EXPECT_MISS("key b", 5);      /* its own name is empty now */
    store("key a", 5, a, 1000);
    EXPECT_LOAD("key a", 5, a, 1000);
    unlink(aside);
    EXPECT_COUNTS(&before, 1, 2, 0, 1, 3);
    free(a);
    free(b);
}

/* GPUREDUCE_CACHE under a regular file: the directory cannot be made, even by root. Nothing on disk,
 * one warning, and the calls go on working. */
static void unwritable(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    CHECK(before.disk == GR_KCACHE_OFF, "the disk cache is %d, not off", (int)before.disk);
    CHECK(gr_kcache_dir() == NULL, "a directory where none can be: %s", gr_kcache_dir());
    const char *w = gr_kcache_take_warning();
    CHECK(w != NULL, "no warning");
    if (w) printf("warning: %s\n", w);
    CHECK(gr_kcache_take_warning() == NULL, "a second warning");
    store("k", 1, "image", 5);
    EXPECT_MISS("k", 1);
    CHECK(gr_kcache_take_warning() == NULL, "a warning after the first was taken");
    EXPECT_COUNTS(&before, 0, 1, 0, 0, 0);
}

/* The image `seed` leaves and `readonly` expects. */
static const char SEED_KEY[] = "seeded key";
enum { SEED_LEN = 3333 };

static void seed(void) {
    unsigned char *image = bytes_of(SEED_LEN, 7);
    store(SEED_KEY, sizeof SEED_KEY, image, SEED_LEN);
    free(image);
}

/* A directory that can be read but not written (chmod 0500, not root): what is there is used, nothing
 * is written, one warning. */
static void readonly(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    CHECK(before.disk == GR_KCACHE_READ_ONLY, "the disk cache is %d, not read-only", (int)before.disk);
    const char *w = gr_kcache_take_warning();
    CHECK(w != NULL, "no warning");
    if (w) printf("warning: %s\n", w);
    unsigned char *image = bytes_of(SEED_LEN, 7);
    EXPECT_LOAD(SEED_KEY, sizeof SEED_KEY, image, SEED_LEN);
    store("new key", 7, image, SEED_LEN);
    EXPECT_MISS("new key", 7);
    CHECK(gr_kcache_take_warning() == NULL, "a second warning");
    EXPECT_COUNTS(&before, 1, 1, 0, 0, 0);
    free(image);
}

/* The directory is removed after the first use: the store that fails turns storing off with one
 * warning, returns GR_OK, and loads go on (missing: the directory the cache holds open is gone). */
static void vanish(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    store("kept", 4, "image", 5);
    EXPECT_LOAD("kept", 4, "image", 5);
    char dir[PATH_MAX], entry[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", gr_kcache_dir());
    only_entry(entry);
    CHECK(unlink(entry) == 0 && rmdir(dir) == 0, "cannot remove %s: %s", dir, strerror(errno));
    store("lost", 4, "image", 5);
    const char *w = gr_kcache_take_warning();
    CHECK(w != NULL, "no warning");
    if (w) printf("warning: %s\n", w);
    store("lost again", 10, "image", 5);
    CHECK(gr_kcache_take_warning() == NULL, "a second warning");
    EXPECT_MISS("kept", 4);
    EXPECT_MISS("lost", 4);
    gr_kcache_stats now;
    gr_kcache_stats_get(&now);
    CHECK(now.store_failures - before.store_failures == 1, "%zu failed stores, expected 1 (tried once)",
          now.store_failures - before.store_failures);
    CHECK(now.disk == GR_KCACHE_READ_ONLY, "the disk cache is %d, not read-only", (int)now.disk);
    EXPECT_COUNTS(&before, 1, 2, 0, 0, 1);
}

/* GPUREDUCE_CACHE=off (or empty): no directory, no warning, a working no-op. */
static void off(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    CHECK(before.disk == GR_KCACHE_OFF, "the disk cache is %d, not off", (int)before.disk);
    CHECK(gr_kcache_dir() == NULL, "a directory: %s", gr_kcache_dir());
    store("k", 1, "image", 5);
    EXPECT_MISS("k", 1);
    CHECK(gr_kcache_take_warning() == NULL, "a warning for a cache turned off on purpose");
    EXPECT_COUNTS(&before, 0, 1, 0, 0, 0);
}

/* The directory the environment leads to, for the spec to check. */
static void dir(void) {
    const char *d = gr_kcache_dir(), *w = gr_kcache_take_warning();
    printf("dir=%s\n", d ? d : "(none)");
    if (w) printf("warning: %s\n", w);
}

/* Two processes store one key 200 times each, with images of different lengths, while a third loads
 * it: every load is a miss or one of the two images whole; no temporary file is left. */
static void race(void) {
    enum { STORES = 200 };
    const char key[] = "raced key";
    const size_t lens[2] = {70001, 50003};
    unsigned char *images[2] = {bytes_of(lens[0], 11), bytes_of(lens[1], 12)};
    pid_t writers[2];
    for (int w = 0; w < 2; w++) {
        writers[w] = fork();
        if (writers[w] == 0) {
            for (int i = 0; i < STORES; i++) store(key, sizeof key, images[w], lens[w]);
            gr_kcache_stats s;
            gr_kcache_stats_get(&s);
            _exit(failures == 0 && s.stores == STORES ? 0 : 1);
        }
        CHECK(writers[w] > 0, "fork: %s", strerror(errno));
    }
    size_t loads = 0, hits = 0, torn = 0;
    for (int running = 2; running > 0;) {
        void *got;
        size_t len;
        CHECK(gr_kcache_load(key, sizeof key, &got, &len) == GR_OK, "load failed");
        loads++;
        if (got) {
            hits++;
            int whole = 0;
            for (int w = 0; w < 2; w++) whole |= len == lens[w] && memcmp(got, images[w], len) == 0;
            torn += !whole;
            free(got);
        }
        for (int w = 0; w < 2; w++) {
            int status;
            if (writers[w] > 0 && waitpid(writers[w], &status, WNOHANG) == writers[w]) {
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", w);
                writers[w] = 0;
                running--;
            }
        }
    }
    CHECK(torn == 0, "%zu of %zu hits were neither image", torn, hits);
    void *got;
    size_t len;
    gr_kcache_load(key, sizeof key, &got, &len);
    CHECK(got && (len == lens[0] || len == lens[1]), "the last load missed");
    free(got);
    gr_kcache_stats s;
    gr_kcache_stats_get(&s);
    CHECK(s.corrupt == 0 && s.collisions == 0, "%zu damaged and %zu foreign files seen", s.corrupt, s.collisions);
    size_t entries, temps;
    count_files(&entries, &temps, NULL);
    CHECK(entries == 1 && temps == 0, "%zu entries and %zu temporary files left", entries, temps);
    printf("kcache_host: %zu loads during %d stores, %zu hits\n", loads, 2 * STORES, hits);
    free(images[0]);
    free(images[1]);
}

/* ---- files that are not to be trusted ------------------------------------------------------------- */

/* The entry's file is refused unread, then the next store replaces it with a file of our own. The
 * count of refused files grows by one. */
static void refused_then_repaired_at(int line, lone_entry *e) {
    gr_kcache_stats before, after;
    gr_kcache_stats_get(&before);
    expect_load_at(line, e->key, e->keylen, NULL, 0);
    gr_kcache_stats_get(&after);
    if (after.untrusted - before.untrusted != 1)
        fail_at(line, "%zu files refused, expected 1", after.untrusted - before.untrusted);
    store(e->key, e->keylen, e->image, e->len);
    expect_load_at(line, e->key, e->keylen, e->image, e->len);
    struct stat st;
    if (lstat(e->path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        fail_at(line, "the repaired entry is not a regular file of ours with mode 0600 (mode %o)",
                (unsigned)st.st_mode);
}
#define REFUSED_THEN_REPAIRED(e) refused_then_repaired_at(__LINE__, e)

/* A valid entry -- the right key, a valid checksum -- that another user could write is never loaded:
 * group- or world-writable (chmod), another user's (chown, as root only: the spec runs that part
 * then), or another user's file with another image (the forged entry: anyone can compute the key and
 * the checksum). */
static void writable(void) {
    lone_entry e;
    lone_store(&e, 100, 3000, 21);
    const mode_t modes[] = {0620, 0602, 0666};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        CHECK(chmod(e.path, modes[m]) == 0, "chmod: %s", strerror(errno));
        REFUSED_THEN_REPAIRED(&e);
    }
    lone_free(&e);
}

enum { OTHER_UID = 65534 };     /* nobody */

static void foreign(void) {
    lone_entry e;
    lone_store(&e, 100, 3000, 22);
    CHECK(chown(e.path, OTHER_UID, OTHER_UID) == 0, "chown: %s (this scenario needs root)", strerror(errno));
    REFUSED_THEN_REPAIRED(&e);
    /* forged: another image under this key, well formed, written by "another user" */
    unsigned char *other = bytes_of(e.len, 99);
    store(e.key, e.keylen, other, e.len);
    CHECK(chown(e.path, OTHER_UID, OTHER_UID) == 0, "chown: %s", strerror(errno));
    REFUSED_THEN_REPAIRED(&e);
    free(other);
    lone_free(&e);
}

/* A symbolic link at the entry's name, to a valid entry outside the directory: refused, and the store
 * replaces the link, never writing through it. */
static void symlink_entry(void) {
    lone_entry e;
    lone_store(&e, 64, 2000, 23);
    char outside[PATH_MAX + 16];
    snprintf(outside, sizeof outside, "%s.outside", gr_kcache_dir());
    CHECK(rename(e.path, outside) == 0 && symlink(outside, e.path) == 0, "cannot make the link: %s", strerror(errno));
    off_t size = file_size(outside);
    REFUSED_THEN_REPAIRED(&e);
    CHECK(file_size(outside) == size, "the link's target changed");
    unlink(outside);
    lone_free(&e);
}

/* A FIFO at the entry's name: the load neither waits for a writer nor reads; the store replaces it. */
static void fifo(void) {
    lone_entry e;
    lone_store(&e, 64, 2000, 24);
    CHECK(unlink(e.path) == 0 && mkfifo(e.path, 0600) == 0, "mkfifo: %s", strerror(errno));
    alarm(20);      /* a load that waits for a writer would hang the test: end it instead */
    double t0 = now_ms();
    REFUSED_THEN_REPAIRED(&e);
    alarm(0);
    CHECK(now_ms() - t0 < 2000, "the FIFO took %.0f ms", now_ms() - t0);
    lone_free(&e);
}

/* A 3 GB sparse file whose header's lengths add up to its size: refused by its size before anything is
 * allocated or read (it was read whole: 3.1 GB of memory and 11 s). */
static void huge(void) {
    lone_entry e;
    lone_store(&e, 64, 2000, 25);
    const uint64_t size = (uint64_t)3 << 30;
    int fd = open(e.path, O_RDWR);
    unsigned char head[40];
    CHECK(fd >= 0 && pread(fd, head, 40, 0) == 40, "cannot read the header");
    uint64_t plen = size - 40 - e.keylen;
    for (int b = 0; b < 8; b++) head[24 + b] = (unsigned char)(plen >> (8 * b));
    CHECK(fd >= 0 && pwrite(fd, head, 40, 0) == 40 && ftruncate(fd, (off_t)size) == 0, "cannot grow the file: %s",
          strerror(errno));
    if (fd >= 0) close(fd);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long rss0 = ru.ru_maxrss;
    double t0 = now_ms();
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    MISS_THEN_REPAIR(&e);
    double ms = now_ms() - t0;
    getrusage(RUSAGE_SELF, &ru);
    EXPECT_COUNTS(&before, 1, 1, 1, 0, 1);
    CHECK(ms < 1000, "the refusal took %.0f ms", ms);
    CHECK(ru.ru_maxrss - rss0 < 64 * 1024, "the peak resident size grew by %ld KiB", ru.ru_maxrss - rss0);
    printf("kcache_host: a 3 GB entry refused in %.3f ms\n", ms);
    lone_free(&e);
}

/* What the directory the environment names turned into: disk=<mode> and the warning, for the spec. */
static void report(void) {
    gr_kcache_stats s;
    gr_kcache_stats_get(&s);
    const char *w = gr_kcache_take_warning();
    printf("disk=%d\n", (int)s.disk);
    if (w) printf("warning: %s\n", w);
}

/* The directory is another user's, taken with GPUREDUCE_CACHE_SHARED=1: the seeded entry (chowned to
 * that user by the spec) loads, nothing is stored, and an entry of ours in it is refused. */
static void shared(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    CHECK(before.disk == GR_KCACHE_READ_ONLY, "the disk cache is %d, not read-only", (int)before.disk);
    CHECK(gr_kcache_take_warning() == NULL, "a warning for a shared directory asked for");
    unsigned char *image = bytes_of(SEED_LEN, 7);
    EXPECT_LOAD(SEED_KEY, sizeof SEED_KEY, image, SEED_LEN);
    store("new key", 7, image, SEED_LEN);
    EXPECT_MISS("new key", 7);
    size_t entries, temps;
    count_files(&entries, &temps, NULL);
    CHECK(entries == 2 && temps == 0, "%zu entries and %zu temporary files: something was written", entries, temps);
    /* the spec left a second entry of the seed, owned by root, under "ours" */
    EXPECT_MISS("ours", 4);
    gr_kcache_stats after;
    gr_kcache_stats_get(&after);
    CHECK(after.untrusted - before.untrusted == 1, "%zu files refused, expected 1", after.untrusted - before.untrusted);
    free(image);
}

/* The entry "ours" that shared expects, stored next to the seed's. */
static void seed_ours(void) {
    unsigned char *image = bytes_of(SEED_LEN, 8);
    store("ours", 4, image, SEED_LEN);
    free(image);
}

/* Threads of one process, each with keys of its own and one key they all share. */
enum { THREADS = 8, KEYS_PER_THREAD = 50 };

static void *thread_work(void *arg) {
    int t = (int)(size_t)arg;
    unsigned char *shared = bytes_of(3000, 100);
    store("shared", 6, shared, 3000);
    for (int i = 0; i < KEYS_PER_THREAD; i++) {
        char key[32];
        snprintf(key, sizeof key, "thread %d key %d", t, i);
        unsigned char *image = bytes_of(100 + (size_t)i * 37, (unsigned)(t * 1000 + i));
        store(key, strlen(key), image, 100 + (size_t)i * 37);
        EXPECT_LOAD(key, strlen(key), image, 100 + (size_t)i * 37);
        EXPECT_LOAD("shared", 6, shared, 3000);
        free(image);
    }
    free(shared);
    return NULL;
}

static void threads(void) {
    gr_kcache_stats before;
    gr_kcache_stats_get(&before);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread_work, (void *)(size_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    EXPECT_COUNTS(&before, 2 * THREADS * KEYS_PER_THREAD, 0, 0, 0, THREADS * (KEYS_PER_THREAD + 1));
    size_t entries, temps;
    count_files(&entries, &temps, NULL);
    CHECK(temps == 0, "%zu temporary files left", temps);
}

/* The in-memory map: many keys (an empty one, prefixes of each other), finds, replacement, and every
 * value destroyed exactly once. */
static int destroyed[2001];

static void destroy_value(void *v) { ++*(int *)v; }

static void mem(void) {
    gr_kcache_mem *m;
    CHECK(gr_kcache_mem_create(destroy_value, &m) == GR_OK, "create");
    enum { N = 2000 };
    char key[N + 1];
    memset(key, 'k', sizeof key);
    /* key i is the first i bytes of "kkk...": each a prefix of the next, key 0 empty */
    for (int i = 0; i < N; i++) CHECK(gr_kcache_mem_insert(m, key, (size_t)i, &destroyed[i]) == GR_OK, "insert %d", i);
    CHECK(gr_kcache_mem_count(m) == N, "count %zu, expected %d", gr_kcache_mem_count(m), N);
    for (int i = 0; i < N; i++)
        CHECK(gr_kcache_mem_find(m, key, (size_t)i) == &destroyed[i], "key of %d bytes finds another value", i);
    CHECK(gr_kcache_mem_find(m, key, N) == NULL, "a key never inserted was found");
    key[5] = 'x';
    CHECK(gr_kcache_mem_find(m, key, 6) == NULL, "a key one byte off was found");
    key[5] = 'k';

    CHECK(gr_kcache_mem_insert(m, key, 10, &destroyed[N]) == GR_OK, "replace");
    CHECK(destroyed[10] == 1, "the replaced value was destroyed %d times", destroyed[10]);
    CHECK(gr_kcache_mem_find(m, key, 10) == &destroyed[N], "the replacement is not found");
    CHECK(gr_kcache_mem_insert(m, key, 10, &destroyed[N]) == GR_OK && destroyed[N] == 0,
          "inserting the value already there destroyed it");
    CHECK(gr_kcache_mem_count(m) == N, "count %zu after replacing, expected %d", gr_kcache_mem_count(m), N);

    gr_kcache_mem_destroy(m);
    for (int i = 0; i <= N; i++)
        CHECK(destroyed[i] == 1, "value %d destroyed %d times, expected once", i, destroyed[i]);
    gr_kcache_mem_destroy(NULL);
    CHECK(gr_kcache_mem_find(NULL, "k", 1) == NULL && gr_kcache_mem_count(NULL) == 0, "NULL map");

    /* no destructor: values are the caller's */
    CHECK(gr_kcache_mem_create(NULL, &m) == GR_OK, "create without a destructor");
    CHECK(gr_kcache_mem_insert(m, "a", 1, key) == GR_OK && gr_kcache_mem_insert(m, "a", 1, key + 1) == GR_OK,
          "insert without a destructor");
    CHECK(gr_kcache_mem_find(m, "a", 1) == key + 1, "replacement without a destructor");
    gr_kcache_mem_destroy(m);
}

/* The key and the image of an entry file, read as the format says (no checks: the test made it). */
static int read_file_parts(const char *path, unsigned char **key, size_t *keylen, unsigned char **image, size_t *len) {
    FILE *f = fopen(path, "rb");
    unsigned char head[40];
    if (!f || fread(head, 1, 40, f) != 40) {
        if (f) fclose(f);
        return 0;
    }
    uint64_t k = 0, p = 0;
    for (int b = 7; b >= 0; b--) k = k << 8 | head[16 + b], p = p << 8 | head[24 + b];
    *key = malloc(k ? k : 1);
    *image = malloc(p ? p : 1);
    int ok = *key && *image && fread(*key, 1, k, f) == k && fread(*image, 1, p, f) == p;
    fclose(f);
    *keylen = k;
    *len = p;
    return ok;
}

/* kcache_host forge FROM TO: stores the image of entry file FROM under the key of entry file TO, in the
 * cache directory the environment names: a well-formed forgery (the key and the checksum are anyone's
 * to compute) that only the owner checks could keep out, here made by the owner. */
static int forge(const char *from, const char *to) {
    unsigned char *k1, *i1, *k2, *i2;
    size_t kl1, l1, kl2, l2;
    if (!read_file_parts(from, &k1, &kl1, &i1, &l1) || !read_file_parts(to, &k2, &kl2, &i2, &l2)) {
        fprintf(stderr, "kcache_host: cannot read %s or %s\n", from, to);
        return 1;
    }
    store(k2, kl2, i1, l1);
    free(k1), free(i1), free(k2), free(i2);
    if (failures) return 1;
    printf("kcache_host forge: ok\n");
    return 0;
}

/* ---- the driver -------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*run)(void);
    int standalone;     /* runs in the default set (needs only a fresh writable directory) */
} scenarios[] = {
    {"roundtrip", roundtrip, 1}, {"miss", miss, 1},           {"truncated", truncated, 1},
    {"damaged", damaged, 1},     {"collision", collision, 1}, {"threads", threads, 1},
    {"mem", mem, 1},             {"unwritable", unwritable, 0}, {"seed", seed, 0},
    {"readonly", readonly, 0},   {"vanish", vanish, 0},       {"off", off, 0},
    {"dir", dir, 0},             {"race", race, 0},           {"writable", writable, 1},
    {"symlink", symlink_entry, 1}, {"fifo", fifo, 1},         {"huge", huge, 1},
    {"foreign", foreign, 0},     {"report", report, 0},       {"shared", shared, 0},
    {"seed_ours", seed_ours, 0},
};
enum { NSCENARIOS = sizeof scenarios / sizeof scenarios[0] };

/* Empties the cache directory between the default set's scenarios (which count files). */
static void clear_dir(void) {
    DIR *d = opendir(gr_kcache_dir());
    if (!d) return;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", gr_kcache_dir(), e->d_name);
        unlink(path);
    }
    closedir(d);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "forge") == 0) return forge(argv[2], argv[3]);
    if (argc > 1) {
        for (int i = 0; i < NSCENARIOS; i++) {
            if (strcmp(argv[1], scenarios[i].name) != 0) continue;
            scenarios[i].run();
            if (failures) return 1;
            printf("kcache_host %s: ok\n", argv[1]);
            return 0;
        }
        fprintf(stderr, "kcache_host: no scenario %s\n", argv[1]);
        return 2;
    }
    char tmp[] = "/tmp/kcache_host.XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("kcache_host: mkdtemp");
        return 1;
    }
    setenv("GPUREDUCE_CACHE", tmp, 1);
    for (int i = 0; i < NSCENARIOS; i++) {
        if (!scenarios[i].standalone) continue;
        scenarios[i].run();
        clear_dir();
    }
    rmdir(tmp);
    if (failures) return 1;
    printf("kcache_host: ok\n");
    return 0;
}
