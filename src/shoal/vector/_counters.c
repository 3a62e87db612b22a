/* shoal.vector._counters: 64-bit counters in shared memory, read and written atomically; a bounded spin-wait, and
 * sleep/wake on a counter.
 *
 * The multiprocessing backend's parent and workers signal each other through these instead of a pipe (a pipe round
 * trip costs ~12 us on a small VM while both sides are awake; this about 1 us). Every operation is sequentially
 * consistent, so in the pairs "post, then check whether the other side sleeps" and "say I sleep, then check for
 * posts" (shoal/vector/link.py) at least one side sees the other's store: no wake-up is ever lost. A side that
 * sleeps does so on the counter it waits for (a futex on Linux: one system call on each side, where waking through
 * a pipe took a write, a poll and a read, and ~2x the time on this project's VM).
 *
 * Counters(buffer, count): `count` counters over a writable buffer (a multiprocessing.RawArray shared by the
 * processes), each on its own 64-byte line so that processes writing neighbouring counters do not contend for one
 * cache line. Counters.nbytes(count) is the size the buffer needs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if !defined(__GNUC__)
#error "shoal.vector._counters needs the GCC/Clang __atomic builtins"
#endif

#define STRIDE 8 /* int64s per counter: one 64-byte cache line */
#define SEQ_CST __ATOMIC_SEQ_CST

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int64_t *base;
    Py_ssize_t count;
} Counters;

static Py_ssize_t nbytes_for(Py_ssize_t count) { return count * STRIDE * (Py_ssize_t)sizeof(int64_t); }

static int Counters_init(Counters *self, PyObject *args, PyObject *kwds) {
    PyObject *buffer;
    Py_ssize_t count;
    static char *kwlist[] = {"buffer", "count", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On", kwlist, &buffer, &count)) {
        return -1;
    }
    if (self->base != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Counters is already initialized");
        return -1;
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count must be >= 0, got %zd", count);
        return -1;
    }
    if (PyObject_GetBuffer(buffer, &self->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (self->view.len < nbytes_for(count) || ((uintptr_t)self->view.buf) % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "Counters: %zd counters need %zd bytes aligned to 8, got %zd bytes", count,
                     nbytes_for(count), self->view.len);
        PyBuffer_Release(&self->view);
        return -1;
    }
    self->base = (int64_t *)self->view.buf;
    self->count = count;
    return 0;
}

static void Counters_dealloc(Counters *self) {
    if (self->base != NULL) {
        PyBuffer_Release(&self->view);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The address of counter i, or NULL with IndexError set. */
static int64_t *counter(Counters *self, Py_ssize_t i) {
    if (self->base == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Counters is not initialized");
        return NULL;
    }
    if (i < 0 || i >= self->count) {
        PyErr_Format(PyExc_IndexError, "counter %zd out of range [0, %zd)", i, self->count);
        return NULL;
    }
    return self->base + i * STRIDE;
}

/* The counter named by the integer `arg`; NULL with an exception set when there is none. */
static int64_t *counter_of(Counters *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return counter(self, i);
}

static PyObject *Counters_load(Counters *self, PyObject *arg) {
    int64_t *p = counter_of(self, arg);
    return p == NULL ? NULL : PyLong_FromLongLong(__atomic_load_n(p, SEQ_CST));
}

/* The counter named by args[0] and the integer args[1] of a call `usage` taking `expected` arguments; NULL with an
 * exception set when they do not fit. */
static int64_t *counter_and_value(Counters *self, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected,
                                  const char *usage, long long *value) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", usage, expected, nargs);
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[0]);
    *value = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    return counter(self, i);
}

static PyObject *Counters_store(Counters *self, PyObject *const *args, Py_ssize_t nargs) {
    long long value;
    int64_t *p = counter_and_value(self, args, nargs, 2, "store(index, value)", &value);
    if (p == NULL) {
        return NULL;
    }
    __atomic_store_n(p, (int64_t)value, SEQ_CST);
    Py_RETURN_NONE;
}

static PyObject *Counters_add(Counters *self, PyObject *const *args, Py_ssize_t nargs) {
    long long delta;
    int64_t *p = counter_and_value(self, args, nargs, 2, "add(index, delta)", &delta);
    return p == NULL ? NULL : PyLong_FromLongLong(__atomic_add_fetch(p, (int64_t)delta, SEQ_CST));
}

/* The arguments (index, old, seconds) of wait() and sleep(): the counter, `old` and `seconds`; NULL with an exception
 * set when they do not fit. */
static int64_t *counter_old_seconds(Counters *self, PyObject *const *args, Py_ssize_t nargs, const char *usage,
                                    long long *old, double *seconds) {
    int64_t *p = counter_and_value(self, args, nargs, 3, usage, old);
    if (p == NULL) {
        return NULL;
    }
    *seconds = PyFloat_AsDouble(args[2]);
    return *seconds == -1.0 && PyErr_Occurred() ? NULL : p;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* wait(index, old, seconds): spin (without the GIL) until counter `index` differs from `old`, for at most `seconds`;
 * returns its value then (still `old` if the time ran out). */
static PyObject *Counters_wait(Counters *self, PyObject *const *args, Py_ssize_t nargs) {
    long long old;
    double seconds;
    int64_t *p = counter_old_seconds(self, args, nargs, "wait(index, old, seconds)", &old, &seconds);
    if (p == NULL) {
        return NULL;
    }
    int64_t value = __atomic_load_n(p, SEQ_CST);
    if (value == old && seconds > 0) {
        Py_BEGIN_ALLOW_THREADS
        double deadline = now_s() + seconds;
        for (unsigned k = 1;; k++) {
            CPU_RELAX();
            value = __atomic_load_n(p, SEQ_CST);
            if (value != old || ((k & 63) == 0 && now_s() >= deadline)) {
                break;
            }
        }
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLongLong(value);
}

/* The 32-bit half of counter p that futex compares and sleeps on: its low half, which changes on every bump. */
static uint32_t *futex_word(int64_t *p) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (uint32_t *)p + 1;
#else
    return (uint32_t *)p;
#endif
}

#define FALLBACK_NAP_S 50e-6 /* without futex: how long one sleep() naps before its caller looks again */

/* sleep(index, old, seconds): block (without the GIL) while counter `index` equals `old`, until a wake(index), for
 * at most `seconds`. It may return early (a signal, another bump): the caller re-checks what it waits for. On Linux
 * the kernel compares the counter with `old` as it puts the caller to sleep (futex), so a bump and its wake() can
 * never fall between the check and the sleep; elsewhere it naps FALLBACK_NAP_S at most. */
static PyObject *Counters_sleep(Counters *self, PyObject *const *args, Py_ssize_t nargs) {
    long long old;
    double seconds;
    int64_t *p = counter_old_seconds(self, args, nargs, "sleep(index, old, seconds)", &old, &seconds);
    if (p == NULL) {
        return NULL;
    }
    if (seconds <= 0 || __atomic_load_n(p, SEQ_CST) != (int64_t)old) {
        Py_RETURN_NONE;
    }
#if defined(__linux__)
    struct timespec timeout = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    Py_BEGIN_ALLOW_THREADS
    syscall(SYS_futex, futex_word(p), FUTEX_WAIT, (uint32_t)old, &timeout, NULL, 0);
    Py_END_ALLOW_THREADS
#else
    double nap = seconds < FALLBACK_NAP_S ? seconds : FALLBACK_NAP_S;
    struct timespec timeout = {0, (long)(nap * 1e9)};
    Py_BEGIN_ALLOW_THREADS
    nanosleep(&timeout, NULL);
    Py_END_ALLOW_THREADS
#endif
    Py_RETURN_NONE;
}

/* wake(index): wake whoever sleep()s on counter `index` (call it after bumping the counter). */
static PyObject *Counters_wake(Counters *self, PyObject *arg) {
    int64_t *p = counter_of(self, arg);
    if (p == NULL) {
        return NULL;
    }
#if defined(__linux__)
    syscall(SYS_futex, futex_word(p), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
    Py_RETURN_NONE;
}

static PyObject *Counters_nbytes(PyObject *cls, PyObject *arg) {
    Py_ssize_t count = PyLong_AsSsize_t(arg);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromSsize_t(nbytes_for(count < 0 ? 0 : count));
}

static PyMethodDef Counters_methods[] = {
    {"load", (PyCFunction)Counters_load, METH_O, "load(index) -> the counter's value"},
    {"store", (PyCFunction)(void (*)(void))Counters_store, METH_FASTCALL, "store(index, value)"},
    {"add", (PyCFunction)(void (*)(void))Counters_add, METH_FASTCALL, "add(index, delta) -> the new value"},
    {"wait", (PyCFunction)(void (*)(void))Counters_wait, METH_FASTCALL,
     "wait(index, old, seconds) -> value: spin until the counter differs from old, at most seconds"},
    {"sleep", (PyCFunction)(void (*)(void))Counters_sleep, METH_FASTCALL,
     "sleep(index, old, seconds): block while the counter equals old, until wake(index), at most seconds"},
    {"wake", (PyCFunction)Counters_wake, METH_O, "wake(index): wake whoever sleeps on the counter"},
    {"nbytes", (PyCFunction)Counters_nbytes, METH_O | METH_CLASS, "nbytes(count) -> bytes needed for count counters"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CountersType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shoal.vector._counters.Counters",
    .tp_basicsize = sizeof(Counters),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Counters(buffer, count): atomic int64 counters over a shared writable buffer, one per cache line.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counters_init,
    .tp_dealloc = (destructor)Counters_dealloc,
    .tp_methods = Counters_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_counters", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__counters(void) {
    if (PyType_Ready(&CountersType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&CountersType);
    if (PyModule_AddObject(m, "Counters", (PyObject *)&CountersType) < 0) {
        Py_DECREF(&CountersType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
