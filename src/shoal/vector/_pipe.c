/* shoal.vector._pipe: a write that keeps exact count of what it wrote, even when an interrupt comes right after, and
 * a read that appends straight to a bytearray.
 *
 * write_from(fd, data, progress) -> bytes written by this call. Writes data[progress[0]:] to the non-blocking
 * descriptor fd until it is all written or fd is full (EAGAIN: returns what it wrote, maybe 0), advancing
 * progress[0] (an int64 in a writable buffer, e.g. array('q', [0])) after each write. From Python,
 * `rest = rest[os.write(fd, rest):]` loses the count when Ctrl-C lands between the write and the assignment (CPython
 * checks for signals right after a call returns): the peer then has part of a message and the sender does not know
 * which part. Here the count is stored before control returns to Python, so shoal.vector.channel can always finish
 * a message an interrupt cut short, or know that none of it went.
 *
 * read_into(fd, inbox, size, least) -> bytes read by this call. Appends what the non-blocking descriptor fd holds to
 * the bytearray inbox until it holds size bytes or fd is empty (EAGAIN: returns what it read, maybe 0), each read
 * asking for max(size - len(inbox), least) bytes straight into the inbox's tail; EOFError when the other end is
 * closed before size bytes came (what came stays in the inbox). With `inbox += os.read(fd, n)`, Ctrl-C landing
 * between the read and the `+=` (CPython checks for signals right after a call returns) dropped what was read, and
 * the message never came whole; it also made a bytes object of n bytes for every read and copied it again. Here
 * every read is in the inbox before control returns.
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

static PyObject *read_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "read_into(fd, inbox, size, least) takes four arguments");
        return NULL;
    }
    int fd = PyObject_AsFileDescriptor(args[0]);
    if (fd < 0) {
        return NULL;
    }
    PyObject *inbox = args[1];
    if (!PyByteArray_CheckExact(inbox)) {
        PyErr_SetString(PyExc_TypeError, "read_into: inbox must be a bytearray");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[2]), least = PyLong_AsSsize_t(args[3]);
    if ((size == -1 || least == -1) && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t had = PyByteArray_GET_SIZE(inbox);
    if (had >= size) {
        return PyLong_FromLong(0);
    }
    Py_ssize_t room = size - had > least ? size - had : least;
    if (PyByteArray_Resize(inbox, had + room) < 0) { /* grown once; cut back to what came before returning */
        return NULL;
    }
    Py_buffer view; /* an export: nothing resizes the inbox while the reads run without the GIL */
    if (PyObject_GetBuffer(inbox, &view, PyBUF_WRITABLE) < 0) {
        PyByteArray_Resize(inbox, had);
        return NULL;
    }
    char *tail = (char *)view.buf + had;
    Py_ssize_t got = 0;
    ssize_t n = 0;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    while (had + got < size) {
        n = read(fd, tail + got, (size_t)(room - got));
        if (n > 0) {
            got += n;
        } else if (n < 0 && errno == EINTR) {
            continue; /* the signal's Python handler runs once this returns */
        } else {
            error = n < 0 ? errno : 0;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (PyByteArray_Resize(inbox, had + got) < 0) {
        return NULL;
    }
    if (had + got < size && n == 0) {
        PyErr_SetString(PyExc_EOFError, "the other end of the pipe is closed");
        return NULL;
    }
    if (error && error != EAGAIN && error != EWOULDBLOCK) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(got);
}

static PyMethodDef methods[] = {
    {"write_from", (PyCFunction)(void (*)(void))write_from, METH_FASTCALL,
     "write_from(fd, data, progress) -> bytes written; writes data[progress[0]:] until done or fd is full"},
    {"read_into", (PyCFunction)(void (*)(void))read_into, METH_FASTCALL,
     "read_into(fd, inbox, size, least) -> bytes read; appends to the bytearray inbox until it holds size or fd is "
     "empty"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pipe", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pipe(void) { return PyModule_Create(&module); }
