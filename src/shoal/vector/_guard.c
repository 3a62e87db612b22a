/* shoal.vector._guard: a vector env takes one call at a time, whichever threads call it.
 *
 * CallGuard(refuse).run(function, *args, **kwargs) calls function(*args, **kwargs) inside the guard, and a Guarded
 * method (below; state.guarded and state.whole make them) runs its body inside its instance's guard. Entered while no
 * thread holds it, or by the thread that does (a call's own nested calls: step's send and recv), it passes and counts
 * the entry; entered by another thread while one holds it, it calls refuse(owner), owner being the holding thread's
 * ident, and raises what that raises (a ConcurrentCallError naming the thread), holding nothing. However the function
 * ends, its entry is undone before run (or the method) returns.
 *
 * Why in C, and why a call rather than a context manager: the test and the taking are one step that no other thread
 * can split (the GIL is held throughout, and a critical section stands in for it on a free-threaded build), and no
 * interrupt (Ctrl-C) can leave it held: the taking, the call and the giving back are one C call, and CPython raises a
 * KeyboardInterrupt only in bytecode (in the function, whose error run passes on after giving the guard back, or
 * after run has returned). A `with` statement had that property up to Python 3.13 (its __enter__ was called inside
 * one bytecode, BEFORE_WITH), but Python 3.14 calls __enter__ with a CALL that checks for signals after it returns,
 * before the with block's protection begins (CPython issue 148874): there a Ctrl-C right after the taking skipped
 * __exit__, and left the guard held for good (in a scratch loop of `with guard:` on 3.14.10, after 90,723 of 160,857
 * interrupts). A lock taken in Python (acquire, then try/finally) has the same window on every version.
 *
 * A forked child's copy may be held by a thread that did not follow it there: forget() clears it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "pythread.h"
#include "structmember.h"

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

/* Take the guard for this thread (1), or raise what refuse(owner) raises (0). */
static int CallGuard_take(CallGuard *self) {
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
        return 1;
    }
    PyObject *result = PyObject_CallFunction(self->refuse, "k", owner);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_SetString(PyExc_RuntimeError, "CallGuard: refuse() returned instead of raising");
    }
    return 0;
}

static PyObject *CallGuard_run(CallGuard *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "CallGuard.run(function, *args, **kwargs): function missing");
        return NULL;
    }
    if (!CallGuard_take(self)) {
        return NULL;
    }
    /* (the keyword values follow the positional ones in args, for the function as for run) */
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, nargs - 1, kwnames);
    GUARDED_BEGIN(self)
    if (self->depth > 0) {
        self->depth--;
    }
    GUARDED_END()
    return result;
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
    {"run", (PyCFunction)(void (*)(void))CallGuard_run, METH_FASTCALL | METH_KEYWORDS,
     "run(function, *args, **kwargs): call it inside the guard (or raise what refuse(owner) raises)"},
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
    .tp_doc = "CallGuard(refuse): one thread at a time in the calls a guard runs (re-entrant); another thread's "
              "entry calls refuse(owner) and raises what it raises.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CallGuard_init,
    .tp_dealloc = (destructor)CallGuard_dealloc,
    .tp_methods = CallGuard_methods,
    .tp_getset = CallGuard_getset,
};

/* Guarded(function, note): a method that runs inside its instance's guard, as CallGuard.run would call it, without
 * a Python frame of its own. A call passes the instance (its first argument) and every argument on to function
 * inside instance._guard; with note (a method's name), an exception out of function goes to instance.<note>(exc)
 * first, inside the guard. A method descriptor, as a Python function is, so that `instance.method(...)` calls it with
 * no bound method made. (state.guarded and state.whole give it the method's name, doc and __wrapped__.) */
typedef struct {
    PyObject_HEAD PyObject *function;
    PyObject *note; /* NULL, or the name of the method that notes an exception */
    PyObject *dict;
    vectorcallfunc vectorcall;
} Guarded;

static PyObject *guard_name; /* "_guard", interned */

/* The exception being raised, normalized, with its traceback, taken (a new reference). */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL) {
        PyException_SetTraceback(value, traceback);
    }
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

/* Raise exc again (stolen). */
static void raise_exception(PyObject *exc) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

static PyObject *Guarded_vectorcall(Guarded *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) < 1) {
        PyErr_SetString(PyExc_TypeError, "a guarded method needs its instance");
        return NULL;
    }
    PyObject *instance = args[0];
    PyObject *guard = PyObject_GetAttr(instance, guard_name);
    if (guard == NULL) {
        return NULL;
    }
    if (!PyObject_TypeCheck(guard, &CallGuardType)) {
        PyErr_Format(PyExc_TypeError, "a guarded method's instance needs a CallGuard as _guard, not %.200s",
                     Py_TYPE(guard)->tp_name);
        Py_DECREF(guard);
        return NULL;
    }
    if (!CallGuard_take((CallGuard *)guard)) {
        Py_DECREF(guard);
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
    if (result == NULL && self->note != NULL) {
        PyObject *exc = take_exception();
        PyObject *noted = PyObject_CallMethodOneArg(instance, self->note, exc);
        if (noted != NULL) {
            Py_DECREF(noted);
            raise_exception(exc);
        } else { /* (an error out of note is raised, with the function's as its context, as in Python) */
            PyObject *later = take_exception();
            PyException_SetContext(later, exc); /* (steals exc) */
            raise_exception(later);
        }
    }
    CallGuard *held = (CallGuard *)guard;
    GUARDED_BEGIN(held)
    if (held->depth > 0) {
        held->depth--;
    }
    GUARDED_END()
    Py_DECREF(guard);
    return result;
}

static int Guarded_init(Guarded *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"function", "note", NULL};
    PyObject *function, *note = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:Guarded", keywords, &function, &note)) {
        return -1;
    }
    if (!PyCallable_Check(function) || (note != Py_None && !PyUnicode_Check(note))) {
        PyErr_SetString(PyExc_TypeError, "Guarded(function, note=None): a callable, and a method's name or None");
        return -1;
    }
    Py_INCREF(function);
    Py_XSETREF(self->function, function);
    if (note == Py_None) {
        Py_CLEAR(self->note);
    } else {
        Py_INCREF(note);
        Py_XSETREF(self->note, note);
    }
    self->vectorcall = (vectorcallfunc)Guarded_vectorcall;
    return 0;
}

static int Guarded_traverse(Guarded *self, visitproc visit, void *arg) {
    Py_VISIT(self->function);
    Py_VISIT(self->note);
    Py_VISIT(self->dict);
    return 0;
}

static int Guarded_clear(Guarded *self) {
    Py_CLEAR(self->function);
    Py_CLEAR(self->note);
    Py_CLEAR(self->dict);
    return 0;
}

static void Guarded_dealloc(Guarded *self) {
    PyObject_GC_UnTrack(self);
    Guarded_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Guarded_get(PyObject *self, PyObject *instance, PyObject *owner) {
    if (instance == NULL || instance == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, instance);
}

static PyObject *Guarded_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

/* Pickled by name, as a function is: its __qualname__ in its __module__ (a method of a class pickled by reference). */
static PyObject *Guarded_reduce(PyObject *self, PyObject *unused) {
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef Guarded_methods[] = {
    {"__reduce__", (PyCFunction)Guarded_reduce, METH_NOARGS, "pickled by name, as a function"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Guarded_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Guarded, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Guarded, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Guarded_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GuardedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shoal.vector._guard.Guarded",
    .tp_basicsize = sizeof(Guarded),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Guarded(function, note=None): a method run inside its instance's _guard (see the module's comment).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Guarded_init,
    .tp_traverse = (traverseproc)Guarded_traverse,
    .tp_clear = (inquiry)Guarded_clear,
    .tp_dealloc = (destructor)Guarded_dealloc,
    .tp_descr_get = Guarded_get,
    .tp_call = Guarded_call,
    .tp_vectorcall_offset = offsetof(Guarded, vectorcall),
    .tp_dictoffset = offsetof(Guarded, dict),
    .tp_methods = Guarded_methods,
    .tp_members = Guarded_members,
    .tp_getset = Guarded_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_guard", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__guard(void) {
    guard_name = PyUnicode_InternFromString("_guard");
    if (guard_name == NULL || PyType_Ready(&CallGuardType) < 0 || PyType_Ready(&GuardedType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "CallGuard", (PyObject *)&CallGuardType) < 0
        || PyModule_AddObjectRef(m, "Guarded", (PyObject *)&GuardedType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
