/* Atari's INTER_LINEAR resize (``use_inter_area_resize=False``): max-pool, OpenCV's bilinear
 * resize of an 8-bit frame, stack push, bit for bit (see _frames.linear_reference, the readable
 * definition, and _frames.linear_matches_opencv, which checks it against the installed OpenCV
 * before the engine takes such a resize: where they differ, AtariEnv keeps cv2.resize).
 *
 * OpenCV's arithmetic: per axis, a source index and two weights in 11-bit fixed point
 * (_frames.linear_taps); each source row summed horizontally in integers
 * (``p[x] * w0 + p[x + 1] * w1``), then two rows vertically as its vector code does:
 * ``((((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16) + 2) >> 2``, saturated to uint8.
 */
#ifndef ENVHIVE_LINEAR_H
#define ENVHIVE_LINEAR_H

#include <stdint.h>
#include <string.h>

static inline void linear_row(const uint8_t *src, int64_t width, const int64_t *xi, const int32_t *xa, int64_t w,
                              int32_t *out)
{
    for (int64_t d = 0; d < w; d++) {
        const int64_t x0 = xi[d], x1 = x0 + 1 < width ? x0 + 1 : width - 1;
        out[d] = (int32_t)src[x0] * xa[2 * d] + (int32_t)src[x1] * xa[2 * d + 1];
    }
}

/* Shift ``stack`` (depth x h x w) down one frame and write the resize of ``a`` (height x width),
 * max-pooled with ``b`` when ``pool`` (the maximum is left in ``a``), as its last frame.
 * ``r0``/``r1``: two rows of ``w`` ints of scratch. */
static void linear_push(uint8_t *a, const uint8_t *b, int pool, uint8_t *stack, int64_t depth, int64_t h,
                        int64_t w, int64_t height, int64_t width, const int64_t *xi, const int32_t *xa,
                        const int64_t *yi, const int32_t *yb, int32_t *r0, int32_t *r1)
{
    if (pool)
        for (int64_t p = 0; p < height * width; p++)
            a[p] = b[p] > a[p] ? b[p] : a[p];
    memmove(stack, stack + h * w, (size_t)((depth - 1) * h * w));
    uint8_t *out = stack + (depth - 1) * h * w;
    for (int64_t y = 0; y < h; y++) {
        const int64_t y0 = yi[y], y1 = y0 + 1 < height ? y0 + 1 : height - 1;
        linear_row(a + y0 * width, width, xi, xa, w, r0);
        linear_row(a + y1 * width, width, xi, xa, w, r1);
        const int32_t b0 = yb[2 * y], b1 = yb[2 * y + 1];
        for (int64_t d = 0; d < w; d++) {
            // OpenCV packs (r >> 4) into int16 (the sums fit) and keeps the high half of the
            // 32-bit products.
            const int32_t v = ((((r0[d] >> 4) * b0) >> 16) + (((r1[d] >> 4) * b1) >> 16) + 2) >> 2;
            out[y * w + d] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

#endif /* ENVHIVE_LINEAR_H */
