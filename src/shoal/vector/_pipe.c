/* shoal.vector._pipe: a write that keeps exact count of what it wrote, even when an interrupt comes right after.
 *
 * write_from(fd, data, progress) -> bytes written by this call. Writes data[progress[0]:] to the non-blocking
 * descriptor fd until it is all written or fd is full (EAGAIN: returns what it wrote, maybe 0), advancing
 * progress[0] (an int64 in a writable buffer, e.g. array('q', [0])) after each write. From Python,
 * `rest = rest[os.write(fd, rest):]` loses the count when Ctrl-C lands between the write and the assignment (CPython
 * checks for signals right after a call returns): the peer then has part of a message and the sender does not know
 * which part. Here the count is stored before control returns to Python, so shoal.vector.channel can always finish
 * a message an interrupt cut short, or know that none of it went.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

static PyObject *write_from(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_from(fd, data, progress) takes three arguments");
        return NULL;
    }
    int fd = PyObject_AsFileDescriptor(args[0]);
    if (fd < 0) {
        return NULL;
    }
    Py_buffer data, progress;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &progress, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (progress.len < (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&progress);
        PyErr_SetString(PyExc_ValueError, "write_from: progress must hold an int64");
        return NULL;
    }
    int64_t *done = (int64_t *)progress.buf;
    if (*done < 0 || *done > data.len) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&progress);
        PyErr_SetString(PyExc_ValueError, "write_from: progress is outside the data");
        return NULL;
    }
    Py_ssize_t written = 0;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    while (*done < data.len) {
        ssize_t n = write(fd, (const char *)data.buf + *done, (size_t)(data.len - *done));
        if (n > 0) {
            *done += n;
            written += n;
        } else if (n < 0 && errno == EINTR) {
            continue; /* the signal's Python handler runs once this returns */
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            error = n < 0 ? errno : EIO;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&progress);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError); /* EPIPE: BrokenPipeError, as os.write raises */
    }
    return PyLong_FromSsize_t(written);
}

static PyMethodDef methods[] = {
    {"write_from", (PyCFunction)(void (*)(void))write_from, METH_FASTCALL,
     "write_from(fd, data, progress) -> bytes written; writes data[progress[0]:] until done or fd is full"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pipe", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pipe(void) { return PyModule_Create(&module); }
