/* Atari's area resize: max-pool, OpenCV's INTER_AREA shrink, stack push (see _frames.py).
 *
 * Shared by _cframes.c (``push``, called from Python per env) and _ale_game.h (the threaded
 * engine, which runs it in its own threads). Both are compiled with -ffp-contract=off: no
 * fused multiply-add, so the float32 sums round as OpenCV's do. Py_ssize_t comes from
 * Python.h, which the including file has included first.
 */
#ifndef ENVHIVE_AREA_H
#define ENVHIVE_AREA_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#define AREA_RESTRICT __restrict
#else
#define AREA_RESTRICT restrict
#endif

/* The arithmetic, on raw arrays (checked by push below). On x86-64 it is compiled twice, for
 * the baseline and for AVX2, and the loader picks by CPU (the horizontal pass gathers, which
 * AVX2 does in one instruction); no FMA either way. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CLONES
#define CLONES
#endif

CLONES static void
area_push(uint8_t *AREA_RESTRICT A, const uint8_t *AREA_RESTRICT B, int pool, uint8_t *AREA_RESTRICT S,
          Py_ssize_t depth, Py_ssize_t h, Py_ssize_t w, Py_ssize_t height, Py_ssize_t width,
          const int64_t *AREA_RESTRICT XI, const float *AREA_RESTRICT XW, Py_ssize_t xtaps,
          const int64_t *AREA_RESTRICT YI, const float *AREA_RESTRICT YW, Py_ssize_t ytaps,
          float *AREA_RESTRICT R, float *AREA_RESTRICT L)
{
    Py_ssize_t y, x, d, t;
    for (y = 0; y < height; y++) {
        uint8_t *AREA_RESTRICT ar = A + y * width;
        const uint8_t *AREA_RESTRICT br = B + y * width;
        float *AREA_RESTRICT hr = R + y * w;
        if (pool) {
            for (x = 0; x < width; x++) {
                uint8_t m = ar[x] > br[x] ? ar[x] : br[x];
                ar[x] = m;
                L[x] = (float)m;
            }
        } else {
            for (x = 0; x < width; x++)
                L[x] = (float)ar[x];
        }
        if (xtaps == 3) { /* Atari's shrinks: three taps, written out */
            const int64_t *AREA_RESTRICT i1 = XI + w, *AREA_RESTRICT i2 = XI + 2 * w;
            const float *AREA_RESTRICT w1 = XW + w, *AREA_RESTRICT w2 = XW + 2 * w;
            for (d = 0; d < w; d++) {
                float s = L[XI[d]] * XW[d];
                s += L[i1[d]] * w1[d];
                s += L[i2[d]] * w2[d];
                hr[d] = s;
            }
        } else {
            for (d = 0; d < w; d++) {
                float s = L[XI[d]] * XW[d];
                for (t = 1; t < xtaps; t++)
                    s += L[XI[t * w + d]] * XW[t * w + d];
                hr[d] = s;
            }
        }
    }
    memmove(S, S + h * w, (size_t)((depth - 1) * h * w));
    {
        uint8_t *AREA_RESTRICT out = S + (depth - 1) * h * w;
        const float big = 12582912.0f;
        for (y = 0; y < h; y++) {
            const float *AREA_RESTRICT r0 = R + YI[y] * w;
            float c0 = YW[y];
            for (d = 0; d < w; d++)
                L[d] = c0 * r0[d];
            for (t = 1; t < ytaps; t++) {
                const float *AREA_RESTRICT rt = R + YI[t * h + y] * w;
                float ct = YW[t * h + y];
                for (d = 0; d < w; d++)
                    L[d] += ct * rt[d];
            }
            for (d = 0; d < w; d++) {
                /* Round half to even, as cvRound: adding and removing 1.5 * 2^23 leaves the
                 * float rounded to an integer in the current (nearest-even) mode; exact for
                 * the sums here (0 <= v < 2^22), and no libm call per pixel. */
                float r = (L[d] + big) - big;
                out[y * w + d] = (uint8_t)(r > 255.0f ? 255.0f : r);
            }
        }
    }
}

#endif /* ENVHIVE_AREA_H */
