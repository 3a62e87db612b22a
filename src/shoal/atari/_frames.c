/* shoal.atari._frames: Atari frame preprocessing for a batch of envs in one call.
 *
 * For each env: max-pool its last two screens (in place into the first, as Gymnasium's AtariPreprocessing
 * does), shrink the result with area interpolation, and push it onto the env's frame stack in the observation
 * buffer (shift the stack by one frame, write the new frame last; or fill every slot, after a reset).
 *
 * The shrink reproduces OpenCV's cv::resize(..., INTER_AREA) for non-integer scales bit for bit: the same
 * weight tables (computed in Python, shoal/atari/frames.py), the same float32 operations in the same order
 * (a horizontal pass per source row into a float buffer, then a weighted sum of those rows), and the same
 * round-half-to-even at the end. Build with -ffp-contract=off so the compiler does not fuse a*b+c into one FMA,
 * which would round differently from OpenCV.
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

/* push(frames, obs, rows, screen_rows, maxpool, fill, stack, H, W, C, h, w, xidx, xw, yidx, yw, scratch)
 *
 *   frames  uint8 [M, 2, H, W, C]   screens: the last of a step (slot 0) and the one before (slot 1); slot 0 is
 *                                   overwritten with their max when maxpool
 *   obs     uint8 [N, stack, h, w, C]
 *   rows    int64 [K]               the obs row of each env to push
 *   screen_rows int64 [K]           the frames row of each env to push
 *   xidx    int32 [tx, w * C]       source element (column * C + channel) of tap t of destination element x,
 *                                   taps in OpenCV's order of terms
 *   xw      float32 [tx, w * C]     its weight (0 for padding taps: adding 0 * s leaves a float sum unchanged)
 *   yidx    int32 [ty, h], yw float32 [ty, h]   the same for rows
 *   scratch float32 [H + 1, w, C] + [W * C]   each source row shrunk horizontally, a row of sums, a source row
 * With tx == 0 the frame is copied without resizing (h == H and w == W).
 */
static PyObject *push(PyObject *self, PyObject *args) {
    PyObject *o_frames, *o_obs, *o_rows, *o_srows, *o_xidx, *o_xw, *o_yidx, *o_yw, *o_scratch;
    int maxpool, fill, stack, H, W, C, h, w;
    if (!PyArg_ParseTuple(args, "OOOOppiiiiiiOOOOO", &o_frames, &o_obs, &o_rows, &o_srows, &maxpool, &fill, &stack,
                          &H, &W, &C, &h, &w, &o_xidx, &o_xw, &o_yidx, &o_yw, &o_scratch)) {
        return NULL;
    }
    Buf frames = {0}, obs = {0}, rows = {0}, srows = {0}, xidx = {0}, xw = {0}, yidx = {0}, yw = {0}, scratch = {0};
    PyObject *result = NULL;
    const Py_ssize_t screen = (Py_ssize_t)H * W * C, frame = (Py_ssize_t)h * w * C, wc = (Py_ssize_t)w * C;
    if (stack < 1 || h < 1 || w < 1 || C < 1) {
        PyErr_SetString(PyExc_ValueError, "push: stack, h, w and C must be positive");
        return NULL;
    }
    if (get_buffer(o_rows, &rows, 0, 0, "rows") < 0) goto done;
    const Py_ssize_t K = rows.view.len / (Py_ssize_t)sizeof(int64_t);
    if (get_buffer(o_srows, &srows, 0, K * (Py_ssize_t)sizeof(int64_t), "screen_rows") < 0) goto done;
    if (get_buffer(o_frames, &frames, 1, 0, "frames") < 0) goto done;
    if (get_buffer(o_obs, &obs, 1, 0, "obs") < 0) goto done;
    if (get_buffer(o_xidx, &xidx, 0, 0, "xidx") < 0) goto done;
    const Py_ssize_t tx = xidx.view.len / ((Py_ssize_t)sizeof(int32_t) * wc);
    if (get_buffer(o_xw, &xw, 0, tx * wc * (Py_ssize_t)sizeof(float), "xw") < 0) goto done;
    if (get_buffer(o_yidx, &yidx, 0, 0, "yidx") < 0) goto done;
    const Py_ssize_t ty = yidx.view.len / ((Py_ssize_t)sizeof(int32_t) * h);
    if (get_buffer(o_yw, &yw, 0, ty * h * (Py_ssize_t)sizeof(float), "yw") < 0) goto done;
    if (get_buffer(o_scratch, &scratch, 1, tx ? ((Py_ssize_t)(H + 1) * wc + (Py_ssize_t)W * C) * sizeof(float) : 0, "scratch") < 0) goto done;
    if (tx ? ty < 1 : (h != H || w != W)) {
        PyErr_SetString(PyExc_ValueError, "push: a resize needs weight tables for both axes");
        goto done;
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
    const Py_ssize_t obs_rows = obs.view.len / (frame * stack), frame_rows = frames.view.len / (2 * screen);
    for (Py_ssize_t k = 0; k < K; k++) {
        if (row_of[k] < 0 || row_of[k] >= obs_rows || screen_of[k] < 0 || screen_of[k] >= frame_rows) {
            PyErr_Format(PyExc_IndexError, "push: row %lld / screen row %lld outside obs (%zd) / frames (%zd)",
                         (long long)row_of[k], (long long)screen_of[k], obs_rows, frame_rows);
            goto done;
        }
    }

    float *shrunk = (float *)scratch.view.buf, *sum = shrunk + (Py_ssize_t)H * wc, *rowf = sum + wc;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K; k++) {
        uint8_t *last = (uint8_t *)frames.view.buf + screen_of[k] * 2 * screen, *before = last + screen;
        if (maxpool) {
            for (Py_ssize_t i = 0; i < screen; i++) last[i] = last[i] > before[i] ? last[i] : before[i];
        }
        uint8_t *slots = (uint8_t *)obs.view.buf + row_of[k] * frame * stack;
        uint8_t *dst = slots + (Py_ssize_t)(stack - 1) * frame;
        if (!fill && stack > 1) memmove(slots, slots + frame, (size_t)(stack - 1) * frame);
        if (!tx) {
            memcpy(dst, last, (size_t)frame);
        } else {
            /* Horizontal pass, once per source row: each destination column sums its taps in OpenCV's order
               (OpenCV starts from a zeroed buffer; 0 + p == p for the first product). The loop over columns
               is innermost so that columns, which are independent, pipeline and vectorize. */
            for (int sy = 0; sy < H; sy++) {
                const uint8_t *src = last + (Py_ssize_t)sy * W * C;
                float *out = shrunk + (Py_ssize_t)sy * wc;
                for (Py_ssize_t i = 0; i < W * C; i++) rowf[i] = (float)src[i];
                for (Py_ssize_t x = 0; x < wc; x++) out[x] = rowf[xi[x]] * xa[x];
                for (Py_ssize_t t = 1; t < tx; t++) {
                    const int32_t *idx = xi + t * wc;
                    const float *a = xa + t * wc;
                    for (Py_ssize_t x = 0; x < wc; x++) out[x] = out[x] + rowf[idx[x]] * a[x];
                }
            }
            /* Vertical pass: the first tap is a product (OpenCV's sum = beta * buf), the others add to it. */
            for (int dy = 0; dy < h; dy++) {
                uint8_t *out = dst + (Py_ssize_t)dy * wc;
                const float *r0 = shrunk + (Py_ssize_t)yi[dy] * wc;
                const float b0 = ya[dy];
                for (Py_ssize_t x = 0; x < wc; x++) sum[x] = b0 * r0[x];
                for (Py_ssize_t t = 1; t < ty; t++) {
                    const float *r = shrunk + (Py_ssize_t)yi[t * h + dy] * wc;
                    const float b = ya[t * h + dy];
                    for (Py_ssize_t x = 0; x < wc; x++) sum[x] = sum[x] + b * r[x];
                }
                for (Py_ssize_t x = 0; x < wc; x++) out[x] = round_u8(sum[x]);
            }
        }
        if (fill) {
            for (int s = 0; s < stack - 1; s++) memcpy(slots + (Py_ssize_t)s * frame, dst, (size_t)frame);
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);

done:
    release(&frames);
    release(&obs);
    release(&rows);
    release(&srows);
    release(&xidx);
    release(&xw);
    release(&yidx);
    release(&yw);
    release(&scratch);
    return result;
}

static PyMethodDef methods[] = {
    {"push", push, METH_VARARGS, "Max-pool, area-resize and push a batch of screens onto their frame stacks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frames", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&module); }
