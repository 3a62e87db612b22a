/* shoal.atari._frames: Atari frame preprocessing for a batch of envs in one call.
 *
 * For each env: max-pool its last two screens (in place into the first, as Gymnasium's AtariPreprocessing
 * does), shrink the result with area interpolation, and push it onto the env's frame stack in the observation
 * buffer (the env's previous stack shifted by one frame, from wherever it is, then the new frame last; or the new
 * frame in every slot, after a reset).
 *
 * The shrink reproduces OpenCV's cv::resize(..., INTER_AREA) for non-integer scales bit for bit, in two steps:
 *
 * 1. Exactly, in integers: each destination pixel's area-weighted sum S, with the weights as whole multiples of
 *    1/dst (a vertical pass over contiguous rows, then a short horizontal one), so the true average is S / den.
 *    OpenCV computes that average in float32 (error below 2e-4 for 8-bit pixels) and rounds it half to even, so
 *    wherever S / den is further than 1e-3 from a half, OpenCV's result is S / den rounded to nearest.
 * 2. At the pixels within 1e-3 of a half (for 84x84: only the exact ties), the result depends on OpenCV's float
 *    rounding, so it is recomputed with OpenCV's weight tables (computed in Python, shoal/atari/frames.py) and
 *    float32 operations in OpenCV's order: a horizontal pass per source row, then a weighted sum of rows.
 *
 * Build with -ffp-contract=off so the compiler does not fuse a*b+c into one FMA, which rounds differently.
 *
 * Only the buffer protocol is used (no numpy C API), so the extension builds against any numpy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int get_buffer(PyObject *obj, Buf *buf, int writable, Py_ssize_t min_bytes, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0) {
        return -1;
    }
    buf->held = 1;
    if (buf->view.len < min_bytes) {
        PyErr_Format(PyExc_ValueError, "%s: expected at least %zd bytes, got %zd", name, min_bytes, buf->view.len);
        return -1;
    }
    return 0;
}

static void release(Buf *buf) {
    if (buf->held) {
        PyBuffer_Release(&buf->view);
        buf->held = 0;
    }
}

static inline uint8_t round_u8(float v) {
    long r = lrintf(v); /* round half to even, like OpenCV's saturate_cast<uchar>(float) */
    return (uint8_t)(r < 0 ? 0 : (r > 255 ? 255 : r));
}

/* Small loops with restrict pointers, so the compiler knows the rows do not overlap and vectorizes them; kept out
 * of line because GCC drops what restrict tells it when it inlines them into the big loop. */
#if defined(__GNUC__)
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE
#endif

static OUT_OF_LINE void max_into(uint8_t *restrict a, const uint8_t *restrict b, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) a[i] = a[i] > b[i] ? a[i] : b[i];
}

/* Vertical sums fit 16 bits: the weights of a destination row sum to the 210 source rows, 210 * 255 < 65536. */
static OUT_OF_LINE void weigh_row(uint16_t *restrict sum, const uint8_t *restrict row, uint16_t weight, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) sum[i] = (uint16_t)(weight * row[i]);
}

static OUT_OF_LINE void add_weighed_row(uint16_t *restrict sum, const uint8_t *restrict row, uint16_t weight,
                                        Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) sum[i] = (uint16_t)(sum[i] + weight * row[i]);
}

/* Round each exact sum total / den to nearest into out; mark in near[] the elements within 1e-3 of a half, whose
 * rounding OpenCV's float arithmetic decides. Branch-free, so the loop pipelines. */
static OUT_OF_LINE int round_sums(uint8_t *restrict out, uint8_t *restrict near, const int32_t *restrict total,
                                  Py_ssize_t n, float inv_den) {
    int any = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const float value = (float)total[i] * inv_den;
        const int32_t whole = (int32_t)value;
        const float frac = value - (float)whole;
        const int32_t up = frac > 0.5f, close = (frac > 0.499f) & (frac < 0.501f);
        out[i] = (uint8_t)(whole + up);
        near[i] = (uint8_t)close;
        any |= close;
    }
    return any;
}

/* Horizontal exact sums of one row of vertical sums, for one channel and three taps (the usual case). */
static OUT_OF_LINE void shrink_row3(int32_t *restrict total, const uint16_t *restrict vsum,
                                    const int32_t *restrict first, const int32_t *restrict w0,
                                    const int32_t *restrict w1, const int32_t *restrict w2, int w) {
    for (int x = 0; x < w; x++) {
        const uint16_t *v = vsum + first[x];
        total[x] = w0[x] * v[0] + w1[x] * v[1] + w2[x] * v[2];
    }
}

/* ---- AVX-512 versions of the two hot loops (and of the palette lookup below), chosen at run time ------------------
 *
 * Same integer and float operations as the scalar loops, lane by lane, so the results are identical (the tests run
 * both). Used when the CPU has AVX-512 F, BW, VL and VBMI (Ice Lake, Zen 4 and later); use_vector() turns them off. */

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_AVX512_PATH 1
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* shrink_row3, 16 destinations at a time: their taps lie within 64 source columns, which two registers hold, and a
 * word permute picks each tap's column. */
AVX512 static void shrink_row3_avx512(int32_t *restrict total, const uint16_t *restrict vsum, Py_ssize_t n_src,
                                      const int32_t *restrict first, const int32_t *restrict w0,
                                      const int32_t *restrict w1, const int32_t *restrict w2, int w) {
    const int32_t *weights[3] = {w0, w1, w2};
    for (int x0 = 0; x0 < w; x0 += 16) {
        const int lanes = w - x0 < 16 ? w - x0 : 16;
        const int base = first[x0];
        if (first[x0 + lanes - 1] - base + 3 > 64) { /* a steep shrink: these taps do not fit two registers */
            shrink_row3(total + x0, vsum, first + x0, w0 + x0, w1 + x0, w2 + x0, lanes);
            continue;
        }
        const __mmask16 m = (__mmask16)((1u << lanes) - 1);
        const Py_ssize_t avail = n_src - base; /* source columns readable from base */
        const __mmask32 m_lo = avail >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << avail) - 1);
        const __mmask32 m_hi = avail >= 64 ? 0xFFFFFFFFu : (avail <= 32 ? 0 : (__mmask32)((1u << (avail - 32)) - 1));
        const __m512i lo = _mm512_maskz_loadu_epi16(m_lo, vsum + base);
        const __m512i hi = _mm512_maskz_loadu_epi16(m_hi, vsum + base + 32);
        const __m512i offsets = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, first + x0), _mm512_set1_epi32(base));
        __m512i acc = _mm512_setzero_si512();
        for (int t = 0; t < 3; t++) {
            const __m256i index = _mm512_cvtepi32_epi16(_mm512_add_epi32(offsets, _mm512_set1_epi32(t)));
            const __m512i words = _mm512_permutex2var_epi16(lo, _mm512_castsi256_si512(index), hi);
            const __m512i v = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(words));
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, _mm512_maskz_loadu_epi32(m, weights[t] + x0)));
        }
        _mm512_mask_storeu_epi32(total + x0, m, acc);
    }
}

AVX512 static int round_sums_avx512(uint8_t *restrict out, uint8_t *restrict near, const int32_t *restrict total,
                                    Py_ssize_t n, float inv_den) {
    const __m512 inv = _mm512_set1_ps(inv_den), half = _mm512_set1_ps(0.5f);
    const __m512 low = _mm512_set1_ps(0.499f), high = _mm512_set1_ps(0.501f);
    const __m512i one = _mm512_set1_epi32(1);
    __mmask16 any = 0;
    for (Py_ssize_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 value = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, total + i)), inv);
        const __m512i whole = _mm512_cvttps_epi32(value);
        const __m512 frac = _mm512_sub_ps(value, _mm512_cvtepi32_ps(whole));
        const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GT_OQ);
        const __mmask16 close =
            _mm512_cmp_ps_mask(frac, low, _CMP_GT_OQ) & _mm512_cmp_ps_mask(frac, high, _CMP_LT_OQ) & m;
        _mm512_mask_cvtepi32_storeu_epi8(out + i, m, _mm512_mask_add_epi32(whole, up, whole, one));
        _mm512_mask_cvtepi32_storeu_epi8(near + i, m, _mm512_maskz_mov_epi32(close, one));
        any |= close;
    }
    return any != 0;
}
#endif

static int vector_level = -1; /* 1: the AVX-512 paths run; 0: the scalar ones; -1: not decided yet */

static int cpu_has_avx512(void) {
#ifdef HAVE_AVX512_PATH
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi");
#else
    return 0;
#endif
}

static int vector_on(void) {
    if (vector_level < 0) vector_level = cpu_has_avx512();
    return vector_level;
}

/* push(frames, obs, rows, src_rows, screen_rows, maxpool, fill, stack, H, W, C, h, w, xidx, xw, yidx, yw, xfirst, xwi,
 *      yfirst, ywi, den, scratch)
 *
 *   frames  uint8 [M, 2, H, W, C]   screens: the last of a step (slot 0) and the one before (slot 1); slot 0 is
 *                                   overwritten with their max when maxpool
 *   obs     uint8 [N, stack, h, w, C]
 *   fill    FILL_NONE: the new frame goes after the previous stack shifted by one; FILL_REPEAT: in every slot;
 *           FILL_ZERO: in the last slot, the others zero (src_rows unused but with FILL_NONE)
 *   rows    int64 [K]               the obs row each env's new stack goes to
 *   src_rows int64 [K]              the obs row holding its previous stack (may be the same row)
 *   screen_rows int64 [K]           the frames row of each env to push
 *   xidx    int32 [tx, w * C]       source element (column * C + channel) of tap t of destination element x,
 *                                   taps in OpenCV's order of terms
 *   xw      float32 [tx, w * C]     its weight (0 for padding taps: adding 0 * s leaves a float sum unchanged)
 *   yidx    int32 [ty, h], yw float32 [ty, h]   the same for rows
 *   xfirst  int32 [w]               first source column of destination column x (its taps are consecutive)
 *   xwi     int32 [txi, w]          integer weight of tap t (overlap in units of 1 / w; padding taps are 0)
 *   yfirst  int32 [h], ywi int32 [tyi, h]       the same for rows (units of 1 / h)
 *   den     the integer weight of a whole destination pixel: H * W (a destination pixel averages S / den)
 *   scratch uint32 [W * C + 2 * w * C]   one row of vertical sums (16 bits), one of totals, one of flags
 * With tx == 0 the frame is copied without resizing (h == H and w == W).
 */
enum { FILL_NONE = 0, FILL_REPEAT = 1, FILL_ZERO = 2 }; /* frames.py's FILL_* */

static PyObject *push(PyObject *self, PyObject *args) {
    PyObject *o_frames, *o_obs, *o_rows, *o_src, *o_srows, *o_xidx, *o_xw, *o_yidx, *o_yw, *o_xfirst, *o_xwi, *o_yfirst,
        *o_ywi, *o_scratch;
    int maxpool, fill, stack, H, W, C, h, w, den;
    if (!PyArg_ParseTuple(args, "OOOOOpiiiiiiiOOOOOOOOiO", &o_frames, &o_obs, &o_rows, &o_src, &o_srows, &maxpool, &fill,
                          &stack, &H, &W, &C, &h, &w, &o_xidx, &o_xw, &o_yidx, &o_yw, &o_xfirst, &o_xwi, &o_yfirst,
                          &o_ywi, &den, &o_scratch)) {
        return NULL;
    }
    Buf frames = {0}, obs = {0}, rows = {0}, src = {0}, srows = {0}, xidx = {0}, xw = {0}, yidx = {0}, yw = {0}, xfirst = {0},
        xwi = {0}, yfirst = {0}, ywi = {0}, scratch = {0};
    PyObject *result = NULL;
    const Py_ssize_t screen = (Py_ssize_t)H * W * C, frame = (Py_ssize_t)h * w * C, wc = (Py_ssize_t)w * C;
    if (stack < 1 || h < 1 || w < 1 || C < 1) {
        PyErr_SetString(PyExc_ValueError, "push: stack, h, w and C must be positive");
        return NULL;
    }
    if (get_buffer(o_rows, &rows, 0, 0, "rows") < 0) goto done;
    const Py_ssize_t K = rows.view.len / (Py_ssize_t)sizeof(int64_t);
    if (get_buffer(o_src, &src, 0, K * (Py_ssize_t)sizeof(int64_t), "src_rows") < 0) goto done;
    if (get_buffer(o_srows, &srows, 0, K * (Py_ssize_t)sizeof(int64_t), "screen_rows") < 0) goto done;
    if (get_buffer(o_frames, &frames, 1, 0, "frames") < 0) goto done;
    if (get_buffer(o_obs, &obs, 1, 0, "obs") < 0) goto done;
    if (get_buffer(o_xidx, &xidx, 0, 0, "xidx") < 0) goto done;
    const Py_ssize_t tx = xidx.view.len / ((Py_ssize_t)sizeof(int32_t) * wc);
    if (get_buffer(o_xw, &xw, 0, tx * wc * (Py_ssize_t)sizeof(float), "xw") < 0) goto done;
    if (get_buffer(o_yidx, &yidx, 0, 0, "yidx") < 0) goto done;
    const Py_ssize_t ty = yidx.view.len / ((Py_ssize_t)sizeof(int32_t) * h);
    if (get_buffer(o_yw, &yw, 0, ty * h * (Py_ssize_t)sizeof(float), "yw") < 0) goto done;
    if (get_buffer(o_xfirst, &xfirst, 0, tx ? w * (Py_ssize_t)sizeof(int32_t) : 0, "xfirst") < 0) goto done;
    if (get_buffer(o_xwi, &xwi, 0, 0, "xwi") < 0) goto done;
    const Py_ssize_t txi = xwi.view.len / ((Py_ssize_t)sizeof(int32_t) * w);
    if (get_buffer(o_yfirst, &yfirst, 0, tx ? h * (Py_ssize_t)sizeof(int32_t) : 0, "yfirst") < 0) goto done;
    if (get_buffer(o_ywi, &ywi, 0, 0, "ywi") < 0) goto done;
    const Py_ssize_t tyi = ywi.view.len / ((Py_ssize_t)sizeof(int32_t) * h);
    if (get_buffer(o_scratch, &scratch, 1, tx ? ((Py_ssize_t)W * C + 2 * wc) * sizeof(uint32_t) : 0, "scratch") < 0) goto done;
    if (tx ? (ty < 1 || txi < 1 || tyi < 1 || den < 1) : (h != H || w != W)) {
        PyErr_SetString(PyExc_ValueError, "push: a resize needs weight tables for both axes");
        goto done;
    }
    const int32_t *xf = (const int32_t *)xfirst.view.buf, *xn = (const int32_t *)xwi.view.buf;
    const int32_t *yf = (const int32_t *)yfirst.view.buf, *yn = (const int32_t *)ywi.view.buf;
    for (int x = 0; tx && x < w; x++) {
        if (xf[x] < 0 || xf[x] + txi > W) {
            PyErr_SetString(PyExc_IndexError, "push: xfirst outside the screen");
            goto done;
        }
    }
    for (int y = 0; tx && y < h; y++) {
        if (yf[y] < 0 || yf[y] + tyi > H) {
            PyErr_SetString(PyExc_IndexError, "push: yfirst outside the screen");
            goto done;
        }
    }

    const int32_t *xi = (const int32_t *)xidx.view.buf, *yi = (const int32_t *)yidx.view.buf;
    const float *xa = (const float *)xw.view.buf, *ya = (const float *)yw.view.buf;
    for (Py_ssize_t t = 0; t < tx * wc; t++) {
        if (xi[t] < 0 || xi[t] >= W * C) {
            PyErr_SetString(PyExc_IndexError, "push: xidx outside the screen");
            goto done;
        }
    }
    for (Py_ssize_t t = 0; t < ty * h; t++) {
        if (yi[t] < 0 || yi[t] >= H) {
            PyErr_SetString(PyExc_IndexError, "push: yidx outside the screen");
            goto done;
        }
    }
    const int64_t *row_of = (const int64_t *)rows.view.buf, *screen_of = (const int64_t *)srows.view.buf;
    const int64_t *src_of = (const int64_t *)src.view.buf;
    const Py_ssize_t obs_rows = obs.view.len / (frame * stack), frame_rows = frames.view.len / (2 * screen);
    for (Py_ssize_t k = 0; k < K; k++) {
        if (row_of[k] < 0 || row_of[k] >= obs_rows || src_of[k] < 0 || src_of[k] >= obs_rows || screen_of[k] < 0 ||
            screen_of[k] >= frame_rows) {
            PyErr_Format(PyExc_IndexError, "push: row %lld / screen row %lld outside obs (%zd) / frames (%zd)",
                         (long long)row_of[k], (long long)screen_of[k], obs_rows, frame_rows);
            goto done;
        }
    }

    uint16_t *vsum = (uint16_t *)scratch.view.buf;
    int32_t *totals = (int32_t *)scratch.view.buf + (Py_ssize_t)W * C;
    uint8_t *near = (uint8_t *)(totals + wc);
    const float inv_den = 1.0f / (float)den;
    const Py_ssize_t WC = (Py_ssize_t)W * C;
    const int vec = vector_on();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        uint8_t *last = (uint8_t *)frames.view.buf + screen_of[k] * 2 * screen, *before = last + screen;
        if (maxpool) max_into(last, before, screen);
        uint8_t *slots = (uint8_t *)obs.view.buf + row_of[k] * frame * stack;
        const uint8_t *previous = (const uint8_t *)obs.view.buf + src_of[k] * frame * stack;
        uint8_t *dst = slots + (Py_ssize_t)(stack - 1) * frame;
        if (!fill && stack > 1) memmove(slots, previous + frame, (size_t)(stack - 1) * frame);
        if (!tx) {
            memcpy(dst, last, (size_t)frame);
        } else {
            for (int dy = 0; dy < h; dy++) {
                /* 1. exact sums: vertical over contiguous source rows (vectorizes), then horizontal */
                const uint8_t *r0 = last + (Py_ssize_t)yf[dy] * WC;
                weigh_row(vsum, r0, (uint16_t)yn[dy], WC);
                for (Py_ssize_t t = 1; t < tyi; t++) {
                    if (yn[t * h + dy]) add_weighed_row(vsum, r0 + t * WC, (uint16_t)yn[t * h + dy], WC);
                }
                uint8_t *out = dst + (Py_ssize_t)dy * wc;
                if (C == 1 && txi == 3) {
#ifdef HAVE_AVX512_PATH
                    if (vec) {
                        shrink_row3_avx512(totals, vsum, WC, xf, xn, xn + w, xn + 2 * w, w);
                    } else
#endif
                        shrink_row3(totals, vsum, xf, xn, xn + w, xn + 2 * w, w);
                } else {
                    for (int x = 0; x < w; x++) {
                        const uint16_t *v = vsum + (Py_ssize_t)xf[x] * C;
                        for (int c = 0; c < C; c++) {
                            int32_t total = 0;
                            for (Py_ssize_t t = 0; t < txi; t++) total += xn[t * w + x] * v[t * C + c];
                            totals[(Py_ssize_t)x * C + c] = total;
                        }
                    }
                }
#ifdef HAVE_AVX512_PATH
                const int close = vec ? round_sums_avx512(out, near, totals, wc, inv_den)
                                      : round_sums(out, near, totals, wc, inv_den);
#else
                const int close = round_sums(out, near, totals, wc, inv_den);
#endif
                if (!close) continue;
                for (Py_ssize_t e = 0; e < wc; e++) {
                    if (!near[e]) continue;
                    /* 2. near a half: OpenCV's own float arithmetic decides */
                    float sum = 0.0f;
                    for (Py_ssize_t j = 0; j < ty; j++) {
                        const uint8_t *src = last + (Py_ssize_t)yi[j * h + dy] * WC;
                        float acc = (float)src[xi[e]] * xa[e];
                        for (Py_ssize_t t = 1; t < tx; t++) acc = acc + (float)src[xi[t * wc + e]] * xa[t * wc + e];
                        sum = j == 0 ? ya[dy] * acc : sum + ya[j * h + dy] * acc;
                    }
                    out[e] = round_u8(sum);
                }
            }
        }
        if (fill == FILL_REPEAT) {
            for (int s = 0; s < stack - 1; s++) memcpy(slots + (Py_ssize_t)s * frame, dst, (size_t)frame);
        } else if (fill == FILL_ZERO) {
            memset(slots, 0, (size_t)(stack - 1) * frame);
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);

done:
    release(&frames);
    release(&obs);
    release(&rows);
    release(&src);
    release(&srows);
    release(&xidx);
    release(&xw);
    release(&yidx);
    release(&yw);
    release(&xfirst);
    release(&xwi);
    release(&yfirst);
    release(&ywi);
    release(&scratch);
    return result;
}

/* ---- grayscale screens from palette indices ------------------------------------------------------------------
 *
 * ALE's getScreenGrayscale looks every pixel's palette index up in the ROM's palette (~15 us a screen); its
 * getScreen copies the indices (~1 us). A table learned from ALE itself turns indices into the same gray values:
 * table[0][i] is the gray of index i, table[1][i] is 0xFF once that gray is known (learned from a screen ALE
 * converted). With AVX-512 VBMI a lookup takes two 128-entry byte permutes per 64 pixels, a twelfth of ALE's cost;
 * without it the engine keeps calling getScreenGrayscale (a scalar lookup would cost what ALE's does). */

static int lookup_scalar(const uint8_t *table, const uint8_t *raw, uint8_t *out, Py_ssize_t n) {
    int known = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = table[raw[i]];
        known &= table[256 + raw[i]] != 0;
    }
    return known;
}

#ifdef HAVE_AVX512_PATH
AVX512 static int lookup_avx512(const uint8_t *table, const uint8_t *raw, uint8_t *out, Py_ssize_t n) {
    /* permutex2var picks byte (idx & 127) of the 128-byte pair (a, b); bit 7 of idx chooses the pair. */
    const __m512i g0 = _mm512_loadu_si512(table), g1 = _mm512_loadu_si512(table + 64);
    const __m512i g2 = _mm512_loadu_si512(table + 128), g3 = _mm512_loadu_si512(table + 192);
    const __m512i k0 = _mm512_loadu_si512(table + 256), k1 = _mm512_loadu_si512(table + 320);
    const __m512i k2 = _mm512_loadu_si512(table + 384), k3 = _mm512_loadu_si512(table + 448);
    __m512i known = _mm512_set1_epi8(-1);
    Py_ssize_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i idx = _mm512_loadu_si512(raw + i);
        const __mmask64 high = _mm512_movepi8_mask(idx);
        const __m512i gray = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(g0, idx, g1),
                                                    _mm512_permutex2var_epi8(g2, idx, g3));
        _mm512_storeu_si512(out + i, gray);
        known = _mm512_and_si512(known, _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(k0, idx, k1),
                                                               _mm512_permutex2var_epi8(k2, idx, k3)));
    }
    const int all = _mm512_cmpneq_epi8_mask(known, _mm512_set1_epi8(-1)) == 0;
    return lookup_scalar(table, raw + i, out + i, n - i) & all;
}
#endif

/* lookup(table, raw, out) -> bool: out = table[0][raw] per pixel; whether every index of raw was known. */
static PyObject *lookup(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_raw, *o_out;
    if (!PyArg_ParseTuple(args, "OOO", &o_table, &o_raw, &o_out)) return NULL;
    Buf table = {0}, raw = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(o_table, &table, 0, 512, "table") < 0 || get_buffer(o_raw, &raw, 0, 0, "raw") < 0 ||
        get_buffer(o_out, &out, 1, raw.view.len, "out") < 0) {
        goto done;
    }
    int known;
#ifdef HAVE_AVX512_PATH
    if (vector_on()) {
        known = lookup_avx512(table.view.buf, raw.view.buf, out.view.buf, raw.view.len);
    } else
#endif
    {
        known = lookup_scalar(table.view.buf, raw.view.buf, out.view.buf, raw.view.len);
    }
    result = PyBool_FromLong(known);
done:
    release(&table);
    release(&raw);
    release(&out);
    return result;
}

/* learn(table, raw, gray): record that index raw[i] shows as gray[i], for every pixel of a screen ALE converted. */
static PyObject *learn(PyObject *self, PyObject *args) {
    PyObject *o_table, *o_raw, *o_gray;
    if (!PyArg_ParseTuple(args, "OOO", &o_table, &o_raw, &o_gray)) return NULL;
    Buf table = {0}, raw = {0}, gray = {0};
    PyObject *result = NULL;
    if (get_buffer(o_table, &table, 1, 512, "table") < 0 || get_buffer(o_raw, &raw, 0, 0, "raw") < 0 ||
        get_buffer(o_gray, &gray, 0, raw.view.len, "gray") < 0) {
        goto done;
    }
    uint8_t *t = table.view.buf;
    const uint8_t *r = raw.view.buf, *g = gray.view.buf;
    for (Py_ssize_t i = 0; i < raw.view.len; i++) {
        t[r[i]] = g[i];
        t[256 + r[i]] = 0xFF;
    }
    result = Py_NewRef(Py_None);
done:
    release(&table);
    release(&raw);
    release(&gray);
    return result;
}

/* use_vector(on) -> bool: run the AVX-512 paths (if the CPU has them) or the scalar ones; whether the AVX-512 ones
 * now run. For tests that compare the two. */
static PyObject *use_vector(PyObject *self, PyObject *arg) {
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    vector_level = on ? cpu_has_avx512() : 0;
    return PyBool_FromLong(vector_level);
}

static PyObject *vectorized(PyObject *self, PyObject *unused) { return PyBool_FromLong(vector_on()); }

static PyMethodDef methods[] = {
    {"push", push, METH_VARARGS, "Max-pool, area-resize and push a batch of screens onto their frame stacks."},
    {"lookup", lookup, METH_VARARGS,
     "lookup(table, raw, out) -> bool: gray values of palette indices; whether all were known."},
    {"learn", learn, METH_VARARGS, "learn(table, raw, gray): record the gray value of each palette index seen."},
    {"vectorized", vectorized, METH_NOARGS, "Whether the AVX-512 paths run (the CPU has them, use_vector left on)."},
    {"use_vector", use_vector, METH_O, "use_vector(on) -> bool: switch the AVX-512 paths on (if the CPU has them) or off."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frames", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&module); }
