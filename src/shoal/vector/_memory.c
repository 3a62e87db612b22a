/* shoal.vector._memory: where two buffers lie relative to each other within a page, cheaply.
 *
 * page_delta(dst, src) -> (address of dst - address of src) mod 4096, for two contiguous buffers (numpy arrays).
 * numpy's own ways to an array's address (arr.ctypes.data, arr.__array_interface__) cost ~2.5 us a call here; this
 * costs ~0.1 us, little enough to ask it before every large copy (shoal/vector/copies.py says why it matters).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define PAGE 4096

static int address_of(PyObject *obj, uintptr_t *address) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0) {
        return -1;
    }
    *address = (uintptr_t)view.buf;
    PyBuffer_Release(&view);
    return 0;
}

static PyObject *page_delta(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    uintptr_t dst, src;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "page_delta(dst, src) takes two buffers");
        return NULL;
    }
    if (address_of(args[0], &dst) < 0 || address_of(args[1], &src) < 0) {
        return NULL;
    }
    return PyLong_FromSize_t((size_t)((dst - src) % PAGE));
}

static PyMethodDef methods[] = {
    {"page_delta", (PyCFunction)(void (*)(void))page_delta, METH_FASTCALL,
     "page_delta(dst, src) -> (address of dst - address of src) mod 4096"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_memory", NULL, -1, methods};

PyMODINIT_FUNC PyInit__memory(void) { return PyModule_Create(&module); }
