/* shoal.vector._rows: one value (rows.h). Where an observation leaf's value comes from, if it is stored exactly
 * (walk, classify), and the writes that are not a plain copy (casts, strided arrays); a reward and a flag as the full
 * checks take them. */
#include "rows.h"

/* The value at leaf->path in `obs`, through exact dicts (or OrderedDicts, whose items are the dict's) and tuples of
 * leaf->sizes only (borrowed); NULL without an error if not. */
PyObject *walk(PyObject *obs, Leaf *leaf) {
    PyObject *value = obs, *path = leaf->path;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(path); k++) {
        PyObject *key = PyTuple_GET_ITEM(path, k);
        if ((PyDict_CheckExact(value) || PyODict_CheckExact(value)) && PyDict_GET_SIZE(value) == leaf->sizes[k]) {
            value = PyDict_GetItemWithError(value, key);
            if (value == NULL) {
                PyErr_Clear();
                return NULL;
            }
        } else if (PyTuple_CheckExact(value) && PyTuple_GET_SIZE(value) == leaf->sizes[k] && PyLong_CheckExact(key)) {
            Py_ssize_t i = PyLong_AsSsize_t(key);
            if (i < 0 || i >= PyTuple_GET_SIZE(value)) {
                PyErr_Clear();
                return NULL;
            }
            value = PyTuple_GET_ITEM(value, i);
        } else {
            return NULL;
        }
    }
    return value;
}

static int same_shape(Leaf *leaf, PyArrayObject *array) {
    if (PyArray_NDIM(array) != leaf->nd) {
        return 0;
    }
    for (int d = 0; d < leaf->nd; d++) {
        if (PyArray_DIM(array, d) != leaf->dims[d]) {
            return 0;
        }
    }
    return 1;
}

/* An integer item of `size` bytes at `at`, sign-extended to 64 bits where `is_signed`. */
static unsigned long long integer_item(const char *at, npy_intp size, int is_signed) {
    if (size == 1) {
        uint8_t x;
        memcpy(&x, at, 1);
        return is_signed ? (unsigned long long)(long long)(int8_t)x : x;
    }
    if (size == 2) {
        uint16_t x;
        memcpy(&x, at, 2);
        return is_signed ? (unsigned long long)(long long)(int16_t)x : x;
    }
    if (size == 4) {
        uint32_t x;
        memcpy(&x, at, 4);
        return is_signed ? (unsigned long long)(long long)(int32_t)x : x;
    }
    uint64_t x;
    memcpy(&x, at, 8);
    return x;
}

/* Whether `array` (C-contiguous, of another dtype than `leaf`'s) is stored in `leaf` as the full checks take it and
 * as numpy's cast stores it: bools, integers and float32, native byte order, into an integer, float32 or float64 leaf
 * where numpy casts them as the same kind (never floats into integers, nor signed into unsigned); where that cast is
 * not safe between integers (int64 for an int32 space), every item within the leaf's range, as the full checks
 * demand (numpy's cast would wrap it). Ints into a float leaf are rounded by C's conversion, which is numpy's cast. */
static int casts(Leaf *leaf, PyArrayObject *array) {
    PyArray_Descr *from = PyArray_DESCR(array);
    int to_kind = leaf->descr->kind, to_type = leaf->descr->type_num;
    int from_ok = from->kind == 'b' || from->kind == 'i' || from->kind == 'u' || from->type_num == NPY_FLOAT;
    int to_ok = to_kind == 'i' || to_kind == 'u' || to_type == NPY_FLOAT || to_type == NPY_DOUBLE;
    if (!from_ok || !to_ok || !PyArray_ISNBO(from->byteorder) || !PyArray_ISNBO(leaf->descr->byteorder) ||
        !PyArray_CanCastTypeTo(from, leaf->descr, NPY_SAME_KIND_CASTING)) {
        return 0;
    }
    if ((to_kind == 'i' || to_kind == 'u') && from->kind != 'b' && !PyArray_CanCastSafely(from->type_num, to_type)) {
        npy_intp size = PyArray_ITEMSIZE(array), items = PyArray_SIZE(array);
        const char *src = PyArray_BYTES(array);
        int is_signed = from->kind == 'i';
        for (npy_intp k = 0; k < items; k++) {
            if (!integer_fits(leaf, integer_item(src + k * size, size, is_signed), is_signed)) {
                return 0;
            }
        }
    }
    return 1;
}

/* Write the array casts() took into `dst`, each item converted as numpy's cast converts it (a bool is 0 or 1, as
 * numpy reads any nonzero byte of a bool array). */
void write_cast(Leaf *leaf, char *dst) {
    npy_intp to_size = PyArray_ITEMSIZE(leaf->view), from_size = leaf->from_size;
    int to_type = leaf->descr->type_num, is_signed = leaf->from_kind == 'i';
    npy_intp items = leaf->nbytes / to_size;
    for (npy_intp k = 0; k < items; k++) {
        char *at = dst + k * to_size;
        if (leaf->from_kind == 'f') { /* float32: into float64 only */
            float x;
            memcpy(&x, leaf->src + k * sizeof x, sizeof x);
            double d = x;
            memcpy(at, &d, sizeof d);
            continue;
        }
        unsigned long long v = integer_item(leaf->src + k * from_size, from_size, is_signed);
        if (leaf->from_kind == 'b') {
            v = v != 0;
        }
        if (to_type == NPY_DOUBLE) {
            double d = is_signed ? (double)(long long)v : (double)v;
            memcpy(at, &d, sizeof d);
        } else if (to_type == NPY_FLOAT) {
            float f = is_signed ? (float)(long long)v : (float)v;
            memcpy(at, &f, sizeof f);
        } else {
            store_integer(at, to_size, v); /* (in the leaf's range: casts() saw to it) */
        }
    }
}

/* Where `value` comes from for `leaf`, if it is stored exactly: 1 and leaf->source set, else 0. */
int classify(Leaf *leaf, PyObject *value) {
    int type = leaf->descr->type_num;
    leaf->overflow = 0;
    if (PyArray_CheckExact(value)) {
        PyArrayObject *array = (PyArrayObject *)value;
        if (!same_shape(leaf, array)) {
            return 0;
        }
        PyArray_Descr *descr = PyArray_DESCR(array);
        int same = descr == leaf->descr || PyArray_EquivTypes(descr, leaf->descr);
        if (!PyArray_IS_C_CONTIGUOUS(array)) {
            if (!same) {
                return 0;
            }
            leaf->source = STRIDED;
            leaf->strided = array;
            return 1;
        }
        if (same) {
            leaf->source = COPY;
        } else if (type == NPY_FLOAT && descr->type_num == NPY_DOUBLE && PyArray_ISNOTSWAPPED(array) &&
                   PyArray_ISALIGNED(array)) {
            leaf->source = F64_TO_F32;
        } else if (casts(leaf, array)) {
            leaf->source = CAST;
            leaf->from_kind = descr->kind;
            leaf->from_size = PyArray_ITEMSIZE(array);
        } else {
            return 0;
        }
        leaf->src = PyArray_BYTES(array);
        return 1;
    }
    if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        return list_fits(leaf, value);
    }
    if (leaf->nd != 0) {
        return 0;
    }
    leaf->source = SCALAR;
    if (PyLong_CheckExact(value)) {
        long long item;
        if (type != NPY_INT64 || !exact_int64(value, &item)) {
            return 0;
        }
        npy_int64 stored = (npy_int64)item;
        memcpy(leaf->scalar, &stored, sizeof stored);
        return 1;
    }
    if (PyFloat_CheckExact(value)) {
        double item = PyFloat_AS_DOUBLE(value);
        if (type == NPY_DOUBLE) {
            memcpy(leaf->scalar, &item, sizeof item);
        } else if (type == NPY_FLOAT) {
            float stored = (float)item;
            leaf->overflow = isinf(stored) && !isinf(item);
            memcpy(leaf->scalar, &stored, sizeof stored);
        } else {
            return 0;
        }
        return 1;
    }
    if (PyArray_IsScalar(value, Generic)) {
        PyArray_Descr *descr = PyArray_DescrFromScalar(value);
        if (descr == NULL) {
            PyErr_Clear();
            return 0;
        }
        int same = descr == leaf->descr || PyArray_EquivTypes(descr, leaf->descr);
        Py_DECREF(descr);
        if (!same) {
            return 0;
        }
        PyArray_ScalarAsCtype(value, leaf->scalar);
        return 1;
    }
    return 0;
}

int as_flag(PyObject *value, npy_bool *out) {
    if (PyArray_CheckExact(value) && PyArray_NDIM((PyArrayObject *)value) == 0) { /* a 0-d bool array, as the checks */
        if (PyArray_TYPE((PyArrayObject *)value) != NPY_BOOL) {
            return 0;
        }
        *out = *(npy_bool *)PyArray_DATA((PyArrayObject *)value) != 0;
        return 1;
    }
    if (value == Py_True || value == Py_False) {
        *out = value == Py_True;
        return 1;
    }
    if (PyArray_IsScalar(value, Bool)) {
        *out = PyArrayScalar_VAL(value, Bool) != 0;
        return 1;
    }
    if (PyLong_CheckExact(value) || PyArray_IsScalar(value, Integer)) {
        /* an int 0 or 1, Python's or numpy's, as the full checks take it (an older env's flags) */
        int overflow;
        long item = PyLong_AsLongAndOverflow(value, &overflow);
        if (!overflow && (item == 0 || item == 1)) {
            *out = item == 1;
            return 1;
        }
        PyErr_Clear();
    }
    return 0;
}

int as_reward(PyObject *value, double *out) {
    if (PyFloat_CheckExact(value) || PyArray_IsScalar(value, Double)) { /* numpy's float64 is a float */
        *out = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (value == Py_True || value == Py_False) {
        *out = value == Py_True ? 1.0 : 0.0;
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        double item = PyLong_AsDouble(value);
        if (item == -1.0 && PyErr_Occurred()) { /* too large for a float: the slow path says so */
            PyErr_Clear();
            return 0;
        }
        *out = item;
        return 1;
    }
    if (PyArray_IsScalar(value, Bool)) {
        *out = PyArrayScalar_VAL(value, Bool) ? 1.0 : 0.0;
        return 1;
    }
    if (PyArray_IsScalar(value, Integer) || PyArray_IsScalar(value, Half)) { /* as numpy's cast to float64 rounds */
        double item = PyFloat_AsDouble(value);
        if (item == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *out = item;
        return 1;
    }
    if (PyArray_IsScalar(value, Float)) {
        *out = (double)PyArrayScalar_VAL(value, Float);
        return 1;
    }
    if (PyArray_CheckExact(value) && PyArray_NDIM((PyArrayObject *)value) == 0) {
        /* a 0-d array (np.where of scalars returns one) of bools, ints or floats, read as the scalar it holds: a
         * Python bool, int or float (none of them tracked by the garbage collector, so making it runs nothing), or
         * a numpy long double, which the slow path takes */
        int kind = PyArray_DESCR((PyArrayObject *)value)->kind;
        if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f') {
            return 0;
        }
        PyObject *item = PyArray_GETITEM((PyArrayObject *)value, PyArray_DATA((PyArrayObject *)value));
        if (item == NULL) {
            PyErr_Clear();
            return 0;
        }
        int done = as_reward(item, out);
        Py_DECREF(item);
        return done;
    }
    return 0;
}

/* Copy the array classify() took as STRIDED (of the leaf's dtype, not C-contiguous: a slice or a transpose of a
 * frame) into `dst` with numpy's own copy, as the slow path's write copies it. 0, or -1 with an error set (no memory
 * for the row's view). */
int write_strided(Leaf *leaf, char *dst) {
    Py_INCREF(leaf->descr); /* (stolen) */
    PyObject *row = PyArray_NewFromDescr(&PyArray_Type, leaf->descr, leaf->nd, leaf->dims, NULL, dst,
                                         NPY_ARRAY_WRITEABLE, NULL);
    if (row == NULL) {
        return -1;
    }
    int done = PyArray_CopyInto((PyArrayObject *)row, leaf->strided);
    Py_DECREF(row);
    return done;
}

/* numpy's own report of a cast past float32's range, under its error state (np.errstate, np.seterr): it casts the
 * largest float64 to float32. 0, or -1 where that raised. */
int report_overflow(void) {
    PyObject *big = PyArray_SimpleNew(0, NULL, NPY_DOUBLE);
    if (big == NULL) {
        return -1;
    }
    *(npy_double *)PyArray_DATA((PyArrayObject *)big) = DBL_MAX;
    PyObject *cast = PyArray_CastToType((PyArrayObject *)big, PyArray_DescrFromType(NPY_FLOAT), 0);
    Py_DECREF(big);
    if (cast == NULL) {
        return -1;
    }
    Py_DECREF(cast);
    return 0;
}

