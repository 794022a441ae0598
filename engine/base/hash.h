/*
 * hash.h -- the engine's one hash (hash.c): a 128-bit digest of bytes, for the kernel cache's file
 * names, checksums and in-memory keys, and for the key of the embedded device headers.
 *
 * Not for generated data: the per-element generators hash a seed and an index with gr_hash64
 * (ops/gen_element.h), which the device shares.
 */
#ifndef GR_HASH_H
#define GR_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Two 64-bit lanes; lane a alone serves as a 64-bit hash or checksum. */
typedef struct { uint64_t a, b; } gr_digest;

/* The digest of len bytes at data. Each step can be undone, so two inputs of one length that differ
 * inside a single 8-byte word always differ in both lanes; chaining (the previous lane a as the seed)
 * digests several pieces. The same on every host (words are read little-endian). */
gr_digest gr_digest_of(const void *data, size_t len, uint64_t seed);
/* Spreads every bit of x over the whole word; invertible. */
uint64_t gr_hash_mix(uint64_t x);

/* 64-bit words as the digest reads them: little-endian whatever the host (the cache's file format too). */
static inline uint64_t gr_le64_get(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}
static inline void gr_le64_put(unsigned char *p, uint64_t w) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(w >> (8 * i));
}

#endif
