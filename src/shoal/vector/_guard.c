/* shoal.vector._guard: a vector env takes one call at a time, whichever threads call it.
 *
 * CallGuard(refuse) is a context manager that a vector env's calls enter (`with self._guard:`). Entered while no
 * thread holds it, or by the thread that does (a call's own nested calls: step's send and recv), it passes and counts
 * the entry; entered by another thread while one holds it, it calls refuse(owner), owner being the holding thread's
 * ident, and raises what that raises (a ConcurrentCallError naming the thread), holding nothing. Leaving it undoes
 * one entry.
 *
 * Why in C: the test and the taking are one step that no other thread can split (the GIL is held throughout, and a
 * critical section stands in for it on a free-threaded build), and an interrupt (Ctrl-C) cannot leave it held.
 * CPython runs no bytecode, and so raises no KeyboardInterrupt, between a C __enter__'s return and the start of the
 * with block's protection, and it calls __exit__ on the way out however the block ends. A lock taken in Python
 * (acquire, then try/finally) can be interrupted between the two, and then stays held for good.
 *
 * A forked child's copy may be held by a thread that did not follow it there: forget() clears it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "pythread.h"

#if defined(Py_GIL_DISABLED)
#define GUARDED_BEGIN(op) Py_BEGIN_CRITICAL_SECTION(op)
#define GUARDED_END() Py_END_CRITICAL_SECTION()
#else
#define GUARDED_BEGIN(op) {
#define GUARDED_END() }
#endif

typedef struct {
    PyObject_HEAD unsigned long owner; /* the holding thread's ident, while depth > 0 */
    Py_ssize_t depth;                  /* its entries not yet left */
    PyObject *refuse;
} CallGuard;

static int CallGuard_init(CallGuard *self, PyObject *args, PyObject *kwargs) {
    PyObject *refuse;
    if (!PyArg_ParseTuple(args, "O:CallGuard", &refuse)) {
        return -1;
    }
    if (!PyCallable_Check(refuse)) {
        PyErr_SetString(PyExc_TypeError, "CallGuard(refuse): refuse must be callable");
        return -1;
    }
    Py_INCREF(refuse);
    Py_XSETREF(self->refuse, refuse);
    self->depth = 0;
    return 0;
}

static void CallGuard_dealloc(CallGuard *self) {
    Py_XDECREF(self->refuse);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *CallGuard_enter(CallGuard *self, PyObject *unused) {
    unsigned long me = PyThread_get_thread_ident(), owner = 0;
    int taken = 0;
    GUARDED_BEGIN(self)
    if (self->depth == 0 || self->owner == me) {
        self->owner = me;
        self->depth++;
        taken = 1;
    } else {
        owner = self->owner;
    }
    GUARDED_END()
    if (taken) {
        Py_INCREF(self);
        return (PyObject *)self;
    }
    PyObject *result = PyObject_CallFunction(self->refuse, "k", owner);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_RuntimeError, "CallGuard: refuse() returned instead of raising");
    }
    return NULL;
}

static PyObject *CallGuard_exit(CallGuard *self, PyObject *const *args, Py_ssize_t nargs) {
    GUARDED_BEGIN(self)
    if (self->depth > 0) {
        self->depth--;
    }
    GUARDED_END()
    Py_RETURN_FALSE;
}

static PyObject *CallGuard_forget(CallGuard *self, PyObject *unused) {
    GUARDED_BEGIN(self)
    self->depth = 0;
    GUARDED_END()
    Py_RETURN_NONE;
}

static PyObject *CallGuard_get_owner(CallGuard *self, void *closure) {
    unsigned long owner = 0;
    Py_ssize_t depth;
    GUARDED_BEGIN(self)
    owner = self->owner;
    depth = self->depth;
    GUARDED_END()
    if (depth == 0) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLong(owner);
}

static PyMethodDef CallGuard_methods[] = {
    {"__enter__", (PyCFunction)CallGuard_enter, METH_NOARGS, "take the guard, or raise what refuse(owner) raises"},
    {"__exit__", (PyCFunction)(void (*)(void))CallGuard_exit, METH_FASTCALL, "undo one entry"},
    {"forget", (PyCFunction)CallGuard_forget, METH_NOARGS, "forget every entry (a forked child's copy)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CallGuard_getset[] = {
    {"owner", (getter)CallGuard_get_owner, NULL, "the ident of the thread that holds the guard, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CallGuardType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shoal.vector._guard.CallGuard",
    .tp_basicsize = sizeof(CallGuard),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CallGuard(refuse): one thread at a time in the with blocks of a guard (re-entrant); another thread's "
              "entry calls refuse(owner) and raises what it raises.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CallGuard_init,
    .tp_dealloc = (destructor)CallGuard_dealloc,
    .tp_methods = CallGuard_methods,
    .tp_getset = CallGuard_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_guard", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__guard(void) {
    if (PyType_Ready(&CallGuardType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&CallGuardType);
    if (PyModule_AddObject(m, "CallGuard", (PyObject *)&CallGuardType) < 0) {
        Py_DECREF(&CallGuardType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
