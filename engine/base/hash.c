/*
 * hash.c -- the engine's one hash: two 64-bit lanes over 8-byte words (hash.h).
 *
 * Each step (xor the word, multiply by an odd constant, rotate) can be undone, so two inputs of one
 * length that differ inside a single word always end in different states: a flipped bit or byte in a
 * file can never go unseen by a checksum of lane a. The second lane, with its own multiplier and
 * rotation, widens the kernel cache's file names to 128 bits.
 */
#include "base/hash.h"

enum { LANE_A_ROT = 29, LANE_B_ROT = 35 };
static const uint64_t LANE_A_MUL = 0x691696b3ba381bc5ull, LANE_B_MUL = 0x9c5664613dce30d7ull;
static const uint64_t LANE_A_SEED = 0x26b61a8932163b4dull, LANE_B_SEED = 0x0fb836dc21a857e3ull;

static uint64_t rotl64(uint64_t x, int r) { return x << r | x >> (64 - r); }

uint64_t gr_hash_mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0xcbda197bb73a0c3bull;
    x ^= x >> 29;
    x *= 0xbf34849fc2295c65ull;
    return x ^ x >> 32;
}

gr_digest gr_digest_of(const void *data, size_t len, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t a = seed ^ LANE_A_SEED, b = seed ^ LANE_B_SEED;
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++, p += 8) {
        uint64_t w = gr_le64_get(p);
        a = rotl64((a ^ w) * LANE_A_MUL, LANE_A_ROT);
        b = rotl64((b ^ w) * LANE_B_MUL, LANE_B_ROT);
    }
    /* the last 0..7 bytes as one zero-padded word, then the length, which tells the padding from data */
    unsigned char tail[8] = {0};
    if (len % 8) memcpy(tail, p, len % 8);
    uint64_t last[2] = {gr_le64_get(tail), (uint64_t)len};
    for (int i = 0; i < 2; i++) {
        a = rotl64((a ^ last[i]) * LANE_A_MUL, LANE_A_ROT);
        b = rotl64((b ^ last[i]) * LANE_B_MUL, LANE_B_ROT);
    }
    /* the mix is invertible too, so it keeps the guarantee above */
    return (gr_digest){gr_hash_mix(a), gr_hash_mix(b)};
}
