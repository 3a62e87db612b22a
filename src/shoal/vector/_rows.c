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
#define ROWS_IMPORTS_NUMPY
#include "rows.h"

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

/* 1 if every leaf of `obs` is one this writer stores exactly in row `row` (each leaf's source set), 0 if not, -1
 * with an IndexError for a row outside the views. */
int take_obs(RowWriter *self, Py_ssize_t row, PyObject *obs) {
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

/* Write the leaves take_obs took into row `row`. A float64 or Python float past float32's range is reported as
 * numpy's cast reports it, through numpy's error state: a RuntimeWarning by default, nothing under
 * np.errstate(over="ignore"), a FloatingPointError under over="raise"; -1 where that raised (the row is written), or
 * where a strided copy found no memory for its view (the row is partly written). */
int write_obs(RowWriter *self, Py_ssize_t row) {
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
int arguments(RowWriter *self, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t count, const char *usage,
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
    if (agents_ready() < 0) {
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
