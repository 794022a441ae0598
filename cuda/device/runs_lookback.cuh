/*
 * runs_lookback.cuh -- the head counts of the tiles before a tile of the pass over runs (runs.cuh): a
 * single-pass chained scan (decoupled look-back, as CUB's scans do) over integers only, so that the
 * count is exact whatever the order tiles publish in.
 *
 * Each tile publishes one 64-bit word: its own count as an aggregate as soon as it has one, or its
 * inclusive count as a prefix once it knows what came before. A tile's first warp reads the words
 * before it, nearest first, and adds the counts down to the nearest prefix. Tiles are taken in the order
 * blocks start, so the words it reads belong to tiles already running.
 *
 * Why the window is wide and the wait narrow: the tiles behind the newest prefix can only finish a round
 * of reads apart, so a window of w words lets tiles finish at w per round trip to L2. With 32 words a
 * round (one a lane) that capped the first pass at about 2^15 tiles in 0.59 ms on an H100 (a round of
 * 0.5 us); a window of 256 words that waited for all 256 to be published measured slower (0.77 ms).
 * Here each lane reads kLookWords neighbouring words (kLookWords * 32 a round, one contiguous read), and
 * the warp waits only for the words nearer than the nearest prefix: the words beyond it are not used.
 */
#pragma once

#include "warp_block.cuh"

namespace gr {

/* A look-back word: the status in the top two bits, the head count below. */
constexpr u64 kRunAggregate = 1ull << 62, kRunPrefix = 2ull << 62, kRunCount = (1ull << 62) - 1;
constexpr int kLookWords = 4;

/* Tile t publishes `count` heads: as its prefix for tile 0 (nothing before it), as an aggregate else. */
GR_DEV void publish_count(u64 *status, u64 t, u64 count) {
    volatile u64 *word = status + 1;
    word[t] = (t == 0 ? kRunPrefix : kRunAggregate) | count;
}

/* The head count of the tiles before tile t (t > 0, its aggregate published), by one whole warp; then
 * tile t's prefix published. Returned to every lane. */
GR_DEV u64 look_back(u64 *status, u64 t, u64 count, unsigned lane) {
    volatile u64 *word = status + 1;
    u64 before = 0;
    for (long long top = (long long)t - 1;; top -= 32 * kLookWords) {
        /* lane l's words, nearest first: top - l * kLookWords - i; before tile 0, a prefix of none */
        const long long first = top - (long long)lane * kLookWords;
        u64 s[kLookWords];
#pragma unroll
        for (int i = 0; i < kLookWords; i++) s[i] = first - i >= 0 ? u64(word[first - i]) : kRunPrefix;
        unsigned stop;
        for (;;) {
            /* a lane's nearest prefix, and whether a word nearer than it is still unpublished */
            int near = kLookWords;
            bool waiting = false;
#pragma unroll
            for (int i = kLookWords - 1; i >= 0; i--)
                if (s[i] & kRunPrefix) near = i;
#pragma unroll
            for (int i = 0; i < kLookWords; i++) waiting |= i <= near && s[i] == 0;
            const unsigned prefixes = __ballot_sync(kFullMask, near < kLookWords);
            stop = prefixes ? unsigned(__ffs(int(prefixes)) - 1) : 31u;
            if (!__any_sync(kFullMask, waiting && lane <= stop)) break;
#pragma unroll
            for (int i = 0; i < kLookWords; i++)
                if (s[i] == 0 && lane <= stop) s[i] = word[first - i];
        }
        u64 c = 0;
        bool found = false;
#pragma unroll
        for (int i = 0; i < kLookWords; i++) {
            if (lane <= stop && !found) c += s[i] & kRunCount;
            found |= (s[i] & kRunPrefix) != 0;
        }
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) c += __shfl_xor_sync(kFullMask, c, d);
        before += c;
        if (__any_sync(kFullMask, found)) break;
    }
    if (lane == 0) word[t] = kRunPrefix | (before + count);
    return before;
}

}  // namespace gr
