/* shoal.vector._rows: one env's step results written into the shared buffers in one call, if they are exactly what
 * the buffers hold.
 *
 * RowWriter(leaves, rewards, terminations, truncations, mask=None): `leaves` is a sequence of (path, sizes, view),
 * one per fixed-size leaf of the observation space (shoal.spaces.Layout.leaf_views): `path` the keys (str) and
 * indices (int) that lead from an observation to the leaf's value, `sizes` how many keys or items each container on
 * the way has (a dict with another key is not exact), `view` the (n, *leaf shape) array its values are stored in (a
 * field of a structured batch, or the batch itself), each row's bytes contiguous; or None for a loose leaf (Text,
 * Graph, ...: shoal.spaces.Layout.writer_leaves), whose path is walked, so its containers are checked, but whose
 * value is the caller's to keep; or (None, (), view): bytes every write of a row sets to zero (the padding after an
 * agent's flattened observation). The others are the 1-D float64 and bool per-env arrays (a multi-agent env's are
 * per row, and `mask` is its agent_mask). `agents`, for put_agents: one RowWriter per agent, whose leaves write that
 * agent's observations (agents of different spaces, each flattened into a row of one length), or None: this
 * writer's leaves for every agent.
 *
 * put(row, env, obs, reward, terminated, truncated) -> 0, 1 or 2. It writes obs's leaves into row `row` of their
 * views and the reward and flags into item `env` of the per-env arrays, and returns 2 if the episode ended (either
 * flag set), else 1, only when every value is one the full checks (shoal.vector.outputs) would take and stores as it
 * is:
 * - each leaf an exact numpy array of the leaf's dtype and shape (C-contiguous, or any strides: a slice or a
 *   transpose of a frame, copied as numpy copies it); a float64 array for a float32 leaf (converted as numpy converts
 *   it, with numpy's RuntimeWarning past float32's range); for a 0-d leaf also a numpy scalar of its dtype, a Python
 *   int for an int64 leaf, a Python float for a float32 or float64 leaf; for a leaf of 1 or more dims also a list or
 *   a tuple (not a subclass; nested, for more dims) of its shape: of Python floats, numpy float64 and float32 scalars
 *   and Python ints that fit int64 for a float32 or float64 leaf (none past float32's range), of Python ints in the
 *   leaf's range for a signed integer leaf (converted as numpy's write of the list converts them), or, at a level
 *   above the numbers, of exact C-contiguous arrays of the leaf's dtype and of the dims below (a list of frames for
 *   a stack of them; all the innermost items arrays, or all numbers: a mix is one dtype to numpy); an array of
 *   another dtype that numpy casts to the leaf's as the same kind (bools, integers and float32 into an integer,
 *   float32 or float64 leaf, never signed into unsigned: int32 for an int64 space, int64 for a float32 or an int32
 *   one, float32 for a float64 one), each integer within an integer leaf's range, C-contiguous, converted as that
 *   cast converts it; reached through dicts, OrderedDicts and tuples (not their subclasses) of the space's sizes;
 * - the reward a Python float, int or bool, or a numpy float64, float32, float16, integer or bool, or a 0-d array of
 *   one of those (np.where of scalars returns one);
 * - each flag a Python or numpy bool or a 0-d bool array, or a Python or numpy int 0 or 1.
 * put_obs(row, obs) -> 0 or 1: the same for an observation alone (a reset's).
 * Anything else returns 0 with nothing written, and the caller takes the slow path: the full checks, which name the
 * env and what was wrong, then numpy's own writes. numpy's own writes would broadcast a (1,)-shaped observation into
 * a (4,) row and cast a float frame into uint8 without a word; this never does, and costs less than those writes.
 *
 * put_agents(row, target, agents, observations, rewards, terminations, truncations, infos) -> (infos, over) or None:
 * one multi-agent env's step or reset (shoal.multiagent.engine). Agent `agents[k]` is item `row + k` of the per-row
 * arrays and row `target + k` of the views. Each agent in `observations`, its values and its entries in the three
 * flag dicts exact as above, is written with mask True; each other agent is padding: zeros, mask False, and reward 0,
 * terminated True, truncated False. On a reset the three flag dicts are None and only observations and mask are
 * written. It returns one info dict per agent (its entry in `infos`; a new empty dict if it has none or is padding)
 * and whether every agent it wrote ended its episode (False on a reset). The dicts may be dicts, OrderedDicts or
 * defaultdicts (PettingZoo's aec_to_parallel returns one). Anything inexact (a dict of another type, an agent not in
 * `agents`, a missing flag, an info that is not a dict, a value put would refuse) returns None, possibly with some
 * rows written: the caller takes the slow path, which writes every row again.
 *
 * The writer holds its views, so the memory it writes into lives as long as it does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_19_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

#define SCALAR_BYTES 16 /* the largest numpy scalar of a fixed-size leaf's kind (long double) */

enum source { COPY, F64_TO_F32, SCALAR, LIST, CAST, STRIDED };

typedef struct {
    PyObject *path;  /* tuple of keys */
    Py_ssize_t *sizes; /* of each container on the path */
    PyArrayObject *view; /* NULL for a loose leaf: walked, never written */
    int zero;            /* no path: its bytes are set to zero on every write */
    char *base;
    npy_intp stride; /* bytes between rows */
    npy_intp rows;
    int nd;          /* the leaf's dims: the view's after the first */
    npy_intp dims[NPY_MAXDIMS];
    PyArray_Descr *descr;
    npy_intp nbytes; /* one row's */
    /* filled per put: where this leaf's value comes from */
    enum source source;
    const char *src;
    PyObject *list; /* LIST: the list or tuple of Python numbers or arrays (borrowed; nothing runs between its check
                     * and its write) */
    PyArrayObject *strided; /* STRIDED: the array (borrowed, as `list` is) */
    char from_kind; /* CAST: the source array's kind ('b', 'i', 'u' or 'f') and item size */
    npy_intp from_size;
    char scalar[SCALAR_BYTES];
    int overflow; /* the scalar is a Python float past float32's range, now inf */
} Leaf;

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;
    Leaf *leaves;
    PyArrayObject *arrays[4]; /* rewards, terminations, truncations, and mask or NULL */
    PyObject *agent_writers;  /* a tuple of one RowWriter per agent, or NULL */
    double *rewards;
    npy_bool *terms, *truncs, *mask;
    npy_intp envs;
    int ready; /* set once __init__ has succeeded: the only state in which put writes */
} RowWriter;

static void RowWriter_dealloc(RowWriter *self) {
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_XDECREF(self->leaves[i].path);
        Py_XDECREF(self->leaves[i].view);
        PyMem_Free(self->leaves[i].sizes);
    }
    PyMem_Free(self->leaves);
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(self->arrays[i]);
    }
    Py_XDECREF(self->agent_writers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* `obj` as a 1-D contiguous array of `type`; a new reference in *out. */
static int per_env_array(PyObject *obj, int type, const char *name, PyArrayObject **out) {
    if (!PyArray_Check(obj) || PyArray_NDIM((PyArrayObject *)obj) != 1 ||
        PyArray_TYPE((PyArrayObject *)obj) != type || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)obj) ||
        !PyArray_ISWRITEABLE((PyArrayObject *)obj) || !PyArray_ISALIGNED((PyArrayObject *)obj)) {
        PyErr_Format(PyExc_ValueError, "RowWriter: %s must be a writable, aligned, contiguous 1-D array of %s", name,
                     type == NPY_DOUBLE ? "float64" : "bool");
        return -1;
    }
    Py_INCREF(obj);
    *out = (PyArrayObject *)obj;
    return 0;
}

/* The leaf's path (keys str or int) and the sizes of the containers on it. */
static int init_path(Leaf *leaf, PyObject *path, PyObject *sizes) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(path); k++) {
        PyObject *key = PyTuple_GET_ITEM(path, k);
        if (!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key)) {
            PyErr_SetString(PyExc_ValueError, "RowWriter: a path's keys must be str or int");
            return -1;
        }
    }
    Py_ssize_t depth = PyTuple_GET_SIZE(path);
    leaf->sizes = PyMem_Calloc(depth ? depth : 1, sizeof(Py_ssize_t));
    if (leaf->sizes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < depth; k++) {
        leaf->sizes[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, k));
        if (leaf->sizes[k] < 0) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "RowWriter: sizes must be counts");
            return -1;
        }
    }
    Py_INCREF(path);
    leaf->path = path;
    return 0;
}

static int init_leaf(Leaf *leaf, PyObject *pair) {
    PyObject *path, *sizes, *view;
    if (!PyTuple_Check(pair) || !PyArg_ParseTuple(pair, "OO!O", &path, &PyTuple_Type, &sizes, &view) ||
        (path == Py_None ? PyTuple_GET_SIZE(sizes) != 0 || !PyArray_Check(view)
                         : !PyTuple_Check(path) || (view != Py_None && !PyArray_Check(view)) ||
                               PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(path))) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError,
                        "RowWriter: each leaf must be a (path, sizes, array or None) or (None, (), array) tuple");
        return -1;
    }
    leaf->zero = path == Py_None;
    if (!leaf->zero && init_path(leaf, path, sizes) < 0) {
        return -1;
    }
    if (view == Py_None) {
        return 0;
    }
    PyArrayObject *array = (PyArrayObject *)view;
    int nd = PyArray_NDIM(array);
    if (nd < 1 || !PyArray_ISWRITEABLE(array)) {
        PyErr_SetString(PyExc_ValueError, "RowWriter: a leaf's view must be a writable array of one row per env");
        return -1;
    }
    PyArray_Descr *descr = PyArray_DESCR(array);
    npy_intp expected = PyDataType_ELSIZE(descr); /* each row's bytes must lie together, in C order */
    for (int d = nd - 1; d >= 1; d--) {
        if (PyArray_DIM(array, d) > 1 && PyArray_STRIDE(array, d) != expected) {
            PyErr_SetString(PyExc_ValueError, "RowWriter: a leaf's rows must each be C-contiguous");
            return -1;
        }
        expected *= PyArray_DIM(array, d);
    }
    if (PyDataType_ELSIZE(descr) > SCALAR_BYTES || PyDataType_HASFIELDS(descr) || PyDataType_HASSUBARRAY(descr)) {
        PyErr_SetString(PyExc_ValueError, "RowWriter: a leaf's dtype must be a plain number type");
        return -1;
    }
    Py_INCREF(view);
    leaf->view = array;
    leaf->base = PyArray_BYTES(array);
    leaf->stride = PyArray_STRIDE(array, 0);
    leaf->rows = PyArray_DIM(array, 0);
    leaf->nd = nd - 1;
    for (int d = 1; d < nd; d++) {
        leaf->dims[d - 1] = PyArray_DIM(array, d);
    }
    leaf->descr = descr;
    leaf->nbytes = expected;
    return 0;
}

static PyTypeObject RowWriterType;

static int RowWriter_init(RowWriter *self, PyObject *args, PyObject *kwds) {
    PyObject *leaves, *rewards, *terms, *truncs, *mask = Py_None, *agents = Py_None;
    static char *kwlist[] = {"leaves", "rewards", "terminations", "truncations", "mask", "agents", NULL};
    if (self->leaves != NULL || self->arrays[0] != NULL || self->agent_writers != NULL) {
        PyErr_SetString(PyExc_TypeError, "RowWriter: already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|OO", kwlist, &leaves, &rewards, &terms, &truncs, &mask,
                                     &agents)) {
        return -1;
    }
    if (agents != Py_None) {
        PyObject *writers = PySequence_Tuple(agents);
        if (writers == NULL) {
            return -1;
        }
        self->agent_writers = writers;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(writers); k++) {
            PyObject *writer = PyTuple_GET_ITEM(writers, k);
            if (!PyObject_TypeCheck(writer, &RowWriterType) || !((RowWriter *)writer)->ready) {
                PyErr_SetString(PyExc_ValueError, "RowWriter: agents must be RowWriters, one per agent");
                return -1;
            }
        }
    }
    PyObject *seq = PySequence_Fast(leaves, "RowWriter: leaves must be a sequence");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    self->leaves = PyMem_Calloc(count ? count : 1, sizeof(Leaf));
    if (self->leaves == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        self->count = i + 1; /* before: dealloc frees what a failed init_leaf kept (the rest of it is zeros) */
        if (init_leaf(&self->leaves[i], PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    if (per_env_array(rewards, NPY_DOUBLE, "rewards", &self->arrays[0]) < 0 ||
        per_env_array(terms, NPY_BOOL, "terminations", &self->arrays[1]) < 0 ||
        per_env_array(truncs, NPY_BOOL, "truncations", &self->arrays[2]) < 0 ||
        (mask != Py_None && per_env_array(mask, NPY_BOOL, "mask", &self->arrays[3]) < 0)) {
        return -1;
    }
    self->envs = PyArray_DIM(self->arrays[0], 0);
    if (PyArray_DIM(self->arrays[1], 0) != self->envs || PyArray_DIM(self->arrays[2], 0) != self->envs ||
        (self->arrays[3] != NULL && PyArray_DIM(self->arrays[3], 0) != self->envs)) {
        PyErr_SetString(PyExc_ValueError, "RowWriter: the per-env arrays must have one item per env each");
        return -1;
    }
    self->rewards = (double *)PyArray_DATA(self->arrays[0]);
    self->terms = (npy_bool *)PyArray_DATA(self->arrays[1]);
    self->truncs = (npy_bool *)PyArray_DATA(self->arrays[2]);
    self->mask = self->arrays[3] != NULL ? (npy_bool *)PyArray_DATA(self->arrays[3]) : NULL;
    self->ready = 1;
    return 0;
}

/* The value at leaf->path in `obs`, through exact dicts (or OrderedDicts, whose items are the dict's) and tuples of
 * leaf->sizes only (borrowed); NULL without an error if not. */
static PyObject *walk(PyObject *obs, Leaf *leaf) {
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

/* An exact Python int that fits int64: 1 and *out set, else 0 (no error set). */
static int exact_int64(PyObject *value, long long *out) {
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
static int integer_fits(Leaf *leaf, unsigned long long v, int is_signed) {
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
static int list_fits(Leaf *leaf, PyObject *list) {
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
static void store_integer(char *at, npy_intp size, unsigned long long v) {
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
static void write_list(Leaf *leaf, char *dst) {
    write_sequence(leaf, leaf->list, 0, &dst);
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
static void write_cast(Leaf *leaf, char *dst) {
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
static int classify(Leaf *leaf, PyObject *value) {
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

static int as_flag(PyObject *value, npy_bool *out) {
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

static int as_reward(PyObject *value, double *out) {
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

/* 1 if every leaf of `obs` is one this writer stores exactly in row `row` (each leaf's source set), 0 if not, -1
 * with an IndexError for a row outside the views. */
static int take_obs(RowWriter *self, Py_ssize_t row, PyObject *obs) {
    for (Py_ssize_t i = 0; i < self->count; i++) { /* every leaf looked at before any is written */
        Leaf *leaf = &self->leaves[i];
        if (leaf->view != NULL && (row < 0 || row >= leaf->rows)) {
            PyErr_Format(PyExc_IndexError, "put: row %zd outside the %zd rows", row, (Py_ssize_t)leaf->rows);
            return -1;
        }
        if (leaf->zero) {
            continue;
        }
        PyObject *value = walk(obs, leaf);
        if (value == NULL || (leaf->view != NULL && !classify(leaf, value))) {
            return 0;
        }
    }
    return 1;
}

/* Copy the array classify() took as STRIDED (of the leaf's dtype, not C-contiguous: a slice or a transpose of a
 * frame) into `dst` with numpy's own copy, as the slow path's write copies it. 0, or -1 with an error set (no memory
 * for the row's view). */
static int write_strided(Leaf *leaf, char *dst) {
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
static int report_overflow(void) {
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

/* Write the leaves take_obs took into row `row`. A float64 or Python float past float32's range is reported as
 * numpy's cast reports it, through numpy's error state: a RuntimeWarning by default, nothing under
 * np.errstate(over="ignore"), a FloatingPointError under over="raise"; -1 where that raised (the row is written), or
 * where a strided copy found no memory for its view (the row is partly written). */
static int write_obs(RowWriter *self, Py_ssize_t row) {
    int overflow = 0;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Leaf *leaf = &self->leaves[i];
        if (leaf->view == NULL) {
            continue;
        }
        char *dst = leaf->base + row * leaf->stride;
        if (leaf->zero) {
            memset(dst, 0, leaf->nbytes);
        } else if (leaf->source == COPY) {
            memcpy(dst, leaf->src, leaf->nbytes);
        } else if (leaf->source == SCALAR) {
            memcpy(dst, leaf->scalar, leaf->nbytes);
            overflow |= leaf->overflow;
        } else if (leaf->source == LIST) {
            write_list(leaf, dst);
        } else if (leaf->source == CAST) {
            write_cast(leaf, dst);
        } else if (leaf->source == STRIDED) {
            if (write_strided(leaf, dst) < 0) {
                return -1;
            }
        } else { /* F64_TO_F32 */
            const double *src = (const double *)leaf->src;
            npy_intp items = leaf->nbytes / (npy_intp)sizeof(float);
            for (npy_intp k = 0; k < items; k++) {
                float item = (float)src[k];
                overflow |= isinf(item) && !isinf(src[k]);
                memcpy(dst + k * sizeof(float), &item, sizeof item);
            }
        }
    }
    return overflow ? report_overflow() : 0;
}

/* The call's arguments checked (`nargs` of `usage`'s `count`) and the first, the row, read into *row; 0 with an
 * error set if they are not. */
static int arguments(RowWriter *self, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t count, const char *usage,
                     Py_ssize_t *row) {
    if (nargs != count) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", usage, count);
        return 0;
    }
    if (!self->ready) {
        PyErr_SetString(PyExc_ValueError, "RowWriter: not initialised");
        return 0;
    }
    *row = PyLong_AsSsize_t(args[0]);
    return !(*row == -1 && PyErr_Occurred());
}

static PyObject *RowWriter_put(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t row;
    if (!arguments(self, args, nargs, 6, "put(row, env, obs, reward, terminated, truncated)", &row)) {
        return NULL;
    }
    Py_ssize_t env = PyLong_AsSsize_t(args[1]);
    if (env == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (env < 0 || env >= self->envs) {
        PyErr_Format(PyExc_IndexError, "put: env %zd outside the %zd envs", env, (Py_ssize_t)self->envs);
        return NULL;
    }
    double reward;
    npy_bool terminated, truncated;
    if (!as_reward(args[3], &reward) || !as_flag(args[4], &terminated) || !as_flag(args[5], &truncated)) {
        return PyLong_FromLong(0);
    }
    int taken = take_obs(self, row, args[2]);
    if (taken <= 0) {
        return taken < 0 ? NULL : PyLong_FromLong(0);
    }
    if (write_obs(self, row) < 0) {
        return NULL;
    }
    self->rewards[env] = reward;
    self->terms[env] = terminated;
    self->truncs[env] = truncated;
    return PyLong_FromLong(terminated || truncated ? 2 : 1);
}

static PyObject *RowWriter_put_obs(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t row;
    if (!arguments(self, args, nargs, 2, "put_obs(row, obs)", &row)) {
        return NULL;
    }
    int taken = take_obs(self, row, args[1]);
    if (taken <= 0) {
        return taken < 0 ? NULL : PyLong_FromLong(0);
    }
    if (write_obs(self, row) < 0) {
        return NULL;
    }
    return PyLong_FromLong(1);
}

/* Agent `agent`'s entry in `dict` (borrowed), NULL (no error) if it has none or looking it up raised. */
static PyObject *entry(PyObject *dict, PyObject *agent) {
    PyObject *value = PyDict_GetItemWithError(dict, agent);
    if (value == NULL) {
        PyErr_Clear();
    }
    return value;
}

/* Row `row` of `views`' leaves and item `env` of self's per-row arrays as padding: zeros, mask False, and on a step
 * reward 0, terminated True, truncated False. */
static void write_padding(RowWriter *self, RowWriter *views, Py_ssize_t row, Py_ssize_t env, int stepping) {
    for (Py_ssize_t i = 0; i < views->count; i++) {
        Leaf *leaf = &views->leaves[i];
        if (leaf->view != NULL) {
            memset(leaf->base + row * leaf->stride, 0, leaf->nbytes);
        }
    }
    self->mask[env] = 0;
    if (stepping) {
        self->rewards[env] = 0.0;
        self->terms[env] = 1;
        self->truncs[env] = 0;
    }
}

static PyTypeObject *DefaultDict; /* collections.defaultdict: PettingZoo's aec_to_parallel returns rewards in one */

/* Whether `obj` is a dict whose items are read as a dict's: a dict, an OrderedDict or a defaultdict (the items it
 * has; a missing one leaves the fast path, as does any other subclass, which may read its items its own way). */
static int plain_dict(PyObject *obj) {
    return PyDict_CheckExact(obj) || PyODict_CheckExact(obj) || Py_TYPE(obj) == DefaultDict;
}

/* The writer of agent `k`'s observations: its own among self's agent writers, or self. */
static RowWriter *agent_writer(RowWriter *self, Py_ssize_t k) {
    return self->agent_writers != NULL ? (RowWriter *)PyTuple_GET_ITEM(self->agent_writers, k) : self;
}

static PyObject *RowWriter_put_agents(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t row;
    if (!arguments(self, args, nargs, 8,
                   "put_agents(row, target, agents, observations, rewards, terminations, truncations, infos)", &row)) {
        return NULL;
    }
    Py_ssize_t target = PyLong_AsSsize_t(args[1]);
    if (target == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *agents = args[2], *observations = args[3], *rewards = args[4], *terms = args[5], *truncs = args[6],
             *infos = args[7];
    if (self->mask == NULL) {
        PyErr_SetString(PyExc_ValueError, "put_agents: the writer has no mask");
        return NULL;
    }
    if (!PyTuple_CheckExact(agents)) {
        PyErr_SetString(PyExc_TypeError, "put_agents: agents must be a tuple");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(agents);
    if (row < 0 || row > self->envs - count) {
        PyErr_Format(PyExc_IndexError, "put_agents: rows %zd to %zd outside the %zd envs", row, row + count - 1,
                     (Py_ssize_t)self->envs);
        return NULL;
    }
    if (self->agent_writers != NULL && PyTuple_GET_SIZE(self->agent_writers) != count) {
        PyErr_Format(PyExc_ValueError, "put_agents: %zd agents, the writer has writers for %zd", count,
                     PyTuple_GET_SIZE(self->agent_writers));
        return NULL;
    }
    for (Py_ssize_t k = 0; k < (self->agent_writers != NULL ? count : 1); k++) {
        RowWriter *views = agent_writer(self, k);
        for (Py_ssize_t i = 0; i < views->count; i++) {
            Leaf *leaf = &views->leaves[i];
            if (leaf->view != NULL && (target < 0 || target > leaf->rows - count)) {
                PyErr_Format(PyExc_IndexError, "put_agents: rows %zd to %zd outside the %zd rows", target,
                             target + count - 1, (Py_ssize_t)leaf->rows);
                return NULL;
            }
        }
    }
    int stepping = rewards != Py_None;
    if (!plain_dict(observations) || !plain_dict(infos) ||
        (stepping ? !plain_dict(rewards) || !plain_dict(terms) || !plain_dict(truncs)
                  : terms != Py_None || truncs != Py_None)) {
        Py_RETURN_NONE;
    }
    PyObject *list = PyList_New(count);
    if (list == NULL) {
        return NULL;
    }
    Py_ssize_t live = 0, ended = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *agent = PyTuple_GET_ITEM(agents, k);
        PyObject *obs = entry(observations, agent), *info = NULL;
        RowWriter *views = agent_writer(self, k);
        if (obs == NULL) {
            write_padding(self, views, target + k, row + k, stepping);
        } else {
            live++;
            info = entry(infos, agent);
            if (info != NULL && !PyDict_Check(info)) {
                goto inexact;
            }
            double reward = 0.0;
            npy_bool terminated = 0, truncated = 0;
            if (stepping) {
                PyObject *r = entry(rewards, agent), *t = entry(terms, agent), *u = entry(truncs, agent);
                if (r == NULL || t == NULL || u == NULL || !as_reward(r, &reward) || !as_flag(t, &terminated) ||
                    !as_flag(u, &truncated)) {
                    goto inexact;
                }
            }
            if (take_obs(views, target + k, obs) <= 0) { /* (0: inexact; the rows were checked above) */
                goto inexact;
            }
            if (write_obs(views, target + k) < 0) {
                Py_DECREF(list);
                return NULL;
            }
            self->mask[row + k] = 1;
            if (stepping) {
                self->rewards[row + k] = reward;
                self->terms[row + k] = terminated;
                self->truncs[row + k] = truncated;
                ended += terminated || truncated;
            }
        }
        if (info == NULL) {
            info = PyDict_New();
            if (info == NULL) {
                Py_DECREF(list);
                return NULL;
            }
        } else {
            Py_INCREF(info);
        }
        PyList_SET_ITEM(list, k, info);
    }
    if (live != PyDict_GET_SIZE(observations)) { /* an observation of an agent not in `agents` */
        goto inexact;
    }
    return Py_BuildValue("(NO)", list, stepping && ended == live ? Py_True : Py_False);
inexact:
    Py_DECREF(list);
    Py_RETURN_NONE;
}

static PyMethodDef RowWriter_methods[] = {
    {"put", (PyCFunction)(void (*)(void))RowWriter_put, METH_FASTCALL,
     "put(row, env, obs, reward, terminated, truncated) -> 0 (nothing written: not exact), 1, or 2 (written; the "
     "episode ended)"},
    {"put_obs", (PyCFunction)(void (*)(void))RowWriter_put_obs, METH_FASTCALL,
     "put_obs(row, obs) -> 0 (nothing written: not exact) or 1 (written): a reset's observation"},
    {"put_agents", (PyCFunction)(void (*)(void))RowWriter_put_agents, METH_FASTCALL,
     "put_agents(row, target, agents, observations, rewards, terminations, truncations, infos) -> (infos, over), "
     "or None (not exact; rows may be written): a multi-agent env's step or reset"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RowWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal.vector._rows.RowWriter",
    .tp_basicsize = sizeof(RowWriter),
    .tp_dealloc = (destructor)RowWriter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RowWriter(leaves, rewards, terminations, truncations, mask=None, agents=None): see the module's "
              "docstring",
    .tp_methods = RowWriter_methods,
    .tp_init = (initproc)RowWriter_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__rows(void) {
    import_array();
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL) {
        return NULL;
    }
    DefaultDict = (PyTypeObject *)PyObject_GetAttrString(collections, "defaultdict"); /* kept for good */
    Py_DECREF(collections);
    if (DefaultDict == NULL) {
        return NULL;
    }
    if (PyType_Ready(&RowWriterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&RowWriterType);
    if (PyModule_AddObject(m, "RowWriter", (PyObject *)&RowWriterType) < 0) {
        Py_DECREF(&RowWriterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
