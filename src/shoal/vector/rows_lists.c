/* shoal.vector._rows: lists and tuples as numpy's write of them reads them (rows.h). A leaf of 1 or more dims takes
 * an exact list or tuple of its shape (nested, for more dims) of Python numbers, or, at a level above the numbers,
 * of exact C-contiguous arrays of the leaf's dtype (a list of frames for a stack of them). */
#include "rows.h"

/* An exact Python int that fits int64: 1 and *out set, else 0 (no error set). */
int exact_int64(PyObject *value, long long *out) {
    if (!PyLong_CheckExact(value)) {
        return 0;
    }
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* An item of a list for a float leaf as numpy's write of the list converts it, through a double: a Python float or
 * numpy float64 as it is, a numpy float32 widened, a Python int that fits int64 rounded to nearest (the full checks
 * read a list of ints past int64 as objects, so those go the slow path). 1 and *out set, else 0. */
static int list_double(PyObject *item, double *out) {
    if (PyFloat_CheckExact(item) || PyArray_IsScalar(item, Double)) {
        *out = PyFloat_AS_DOUBLE(item);
        return 1;
    }
    if (PyArray_IsScalar(item, Float)) {
        *out = (double)PyArrayScalar_VAL(item, Float);
        return 1;
    }
    long long v;
    if (exact_int64(item, &v)) {
        *out = (double)v;
        return 1;
    }
    return 0;
}

/* Whether integer `v` (sign-extended where `is_signed`) is within the range of `leaf`'s integer dtype. */
int integer_fits(Leaf *leaf, unsigned long long v, int is_signed) {
    int bits = 8 * (int)PyArray_ITEMSIZE(leaf->view);
    if (leaf->descr->kind == 'u') {
        return (!is_signed || (long long)v >= 0) && (bits == 64 || v <= (1ULL << bits) - 1);
    }
    long long high = bits == 64 ? LLONG_MAX : (1LL << (bits - 1)) - 1;
    if (!is_signed) {
        return v <= (unsigned long long)high;
    }
    return (long long)v >= -high - 1 && (long long)v <= high;
}

/* An item of a list for a signed integer leaf: a Python int within the leaf's range (what the full checks take;
 * numpy's write stores it as it is). 1 and *out set, else 0. */
static int list_integer(Leaf *leaf, PyObject *item, long long *out) {
    long long v;
    if (!exact_int64(item, &v) || !integer_fits(leaf, (unsigned long long)v, 1)) {
        return 0;
    }
    *out = v;
    return 1;
}

enum terminals { UNSEEN, NUMBERS, ARRAYS }; /* what a sequence's innermost items are, all of them alike */

/* The bytes of one item of level `depth` of `leaf` (a row of the dims after it). */
static npy_intp level_bytes(Leaf *leaf, int depth) {
    npy_intp bytes = PyArray_ITEMSIZE(leaf->view);
    for (int d = depth + 1; d < leaf->nd; d++) {
        bytes *= leaf->dims[d];
    }
    return bytes;
}

/* Whether `item` is an item of level `depth` of `leaf` that numpy reads as it is (a frame of a list of frames): an
 * exact, C-contiguous numpy array of the leaf's dtype and of the dims after `depth`. */
static int exact_part(Leaf *leaf, PyObject *item, int depth) {
    if (!PyArray_CheckExact(item)) {
        return 0;
    }
    PyArrayObject *array = (PyArrayObject *)item;
    PyArray_Descr *descr = PyArray_DESCR(array);
    if (PyArray_NDIM(array) != leaf->nd - depth - 1 || !PyArray_IS_C_CONTIGUOUS(array) ||
        !(descr == leaf->descr || PyArray_EquivTypes(descr, leaf->descr))) {
        return 0;
    }
    for (int d = depth + 1; d < leaf->nd; d++) {
        if (PyArray_DIM(array, d - depth - 1) != leaf->dims[d]) {
            return 0;
        }
    }
    return 1;
}

/* Whether `seq` (an exact list or tuple) holds level `depth` of a value of `leaf`: dims[depth] items, each an exact
 * list or tuple of the next level or an array exact_part takes (a part of the leaf), down to numbers list_double (a
 * float32 or float64 leaf; none past float32's range for a float32 leaf, of which numpy's write warns once per item:
 * the slow path reports them) or list_integer (a signed integer leaf) takes. The innermost items are all numbers or
 * all arrays (*terminals): numpy reads a mix of both as one dtype found from them all, which the full checks weigh. */
static int sequence_fits(Leaf *leaf, PyObject *seq, int depth, enum terminals *terminals) {
    int type = leaf->descr->type_num;
    int numbers = type == NPY_FLOAT || type == NPY_DOUBLE ||
                  (leaf->descr->kind == 'i' && PyArray_ISNBO(leaf->descr->byteorder));
    Py_ssize_t length = PySequence_Fast_GET_SIZE(seq);
    if (length != leaf->dims[depth]) {
        return 0;
    }
    for (Py_ssize_t k = 0; k < length; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        if (depth + 1 < leaf->nd) {
            if (PyList_CheckExact(item) || PyTuple_CheckExact(item)) {
                if (!sequence_fits(leaf, item, depth + 1, terminals)) {
                    return 0;
                }
            } else if (*terminals == NUMBERS || !exact_part(leaf, item, depth)) {
                return 0;
            } else {
                *terminals = ARRAYS;
            }
            continue;
        }
        if (*terminals == ARRAYS || !numbers) {
            return 0;
        }
        *terminals = NUMBERS;
        if (type == NPY_FLOAT || type == NPY_DOUBLE) {
            double d;
            if (!list_double(item, &d) || (type == NPY_FLOAT && isinf((float)d) && !isinf(d))) {
                return 0;
            }
        } else {
            long long v;
            if (!list_integer(leaf, item, &v)) {
                return 0;
            }
        }
    }
    return 1;
}

/* Whether `list` (an exact list or tuple, of lists or tuples for a leaf of more dims: numpy reads them alike) is
 * stored exactly in `leaf`, of its shape (sequence_fits): numbers for a float32, float64 or signed integer leaf,
 * arrays of any leaf's dtype. (An empty list is float64 to numpy, which the full checks refuse for an integer leaf,
 * as they refuse Python ints for an unsigned leaf, as Gymnasium's SyncVectorEnv does: int64 does not cast to it as
 * the same kind. A leaf of more dims and no items is left to them: [] is no (0, 2) array.) 1 and leaf->source set
 * to LIST, else 0. */
int list_fits(Leaf *leaf, PyObject *list) {
    int floats = leaf->descr->type_num == NPY_FLOAT || leaf->descr->type_num == NPY_DOUBLE;
    enum terminals terminals = UNSEEN;
    if (leaf->nd < 1 || (leaf->nbytes == 0 && (!floats || leaf->nd > 1)) ||
        !sequence_fits(leaf, list, 0, &terminals)) {
        return 0;
    }
    leaf->source = LIST;
    leaf->list = list;
    return 1;
}

/* Store integer `v` (in the destination's range) in `size` bytes at `at`. */
void store_integer(char *at, npy_intp size, unsigned long long v) {
    if (size == 1) {
        uint8_t x = (uint8_t)v;
        memcpy(at, &x, 1);
    } else if (size == 2) {
        uint16_t x = (uint16_t)v;
        memcpy(at, &x, 2);
    } else if (size == 4) {
        uint32_t x = (uint32_t)v;
        memcpy(at, &x, 4);
    } else {
        memcpy(at, &v, 8);
    }
}

/* Write level `depth` of the value sequence_fits took into `*at`, moving it past what it wrote. (Nothing runs between
 * that check and this write; were a list changed since, the row would still never be overrun.) */
static void write_sequence(Leaf *leaf, PyObject *seq, int depth, char **at) {
    int type = leaf->descr->type_num;
    npy_intp size = PyArray_ITEMSIZE(leaf->view);
    Py_ssize_t items = Py_MIN(leaf->dims[depth], PySequence_Fast_GET_SIZE(seq));
    npy_intp part = depth + 1 < leaf->nd ? level_bytes(leaf, depth) : 0; /* an array item's bytes, at this level */
    for (Py_ssize_t k = 0; k < items; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        if (depth + 1 < leaf->nd) {
            if (PyList_CheckExact(item) || PyTuple_CheckExact(item)) {
                write_sequence(leaf, item, depth + 1, at);
            } else if (PyArray_CheckExact(item) && PyArray_NBYTES((PyArrayObject *)item) == part) {
                memcpy(*at, PyArray_BYTES((PyArrayObject *)item), part);
                *at += part;
            }
            continue;
        }
        if (type == NPY_FLOAT || type == NPY_DOUBLE) {
            double d = 0.0;
            list_double(item, &d);
            if (type == NPY_FLOAT) {
                float f = (float)d;
                memcpy(*at, &f, sizeof f);
            } else {
                memcpy(*at, &d, sizeof d);
            }
        } else {
            long long v = 0;
            list_integer(leaf, item, &v);
            store_integer(*at, size, (unsigned long long)v);
        }
        *at += size;
    }
}

/* Write the value list_fits took into `dst`. */
void write_list(Leaf *leaf, char *dst) {
    write_sequence(leaf, leaf->list, 0, &dst);
}

