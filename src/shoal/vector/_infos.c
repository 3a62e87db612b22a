/* shoal.vector._infos: infos in C, on their way into Gymnasium's vector form.
 * - add_info: one env's info added to the vector infos (below);
 * - add_columns: the infos of a worker's group, read from the info table (one 8-byte word per env and key), added a
 *   key at a time wherever that gives what add_info of each env's info would;
 * - fill_words: in the worker, a group's numeric infos checked and written into that table;
 * - column_entries: a group's infos from the table as the dicts its envs returned (SB3's and PufferLib's per-env
 *   infos).
 *
 * add_info(infos, info, index, size) is Gymnasium's VectorEnv._add_info with the batch size passed explicitly
 * (shoal.vector.infos says why), step for step, and returns infos. For each (key, value) of info.items():
 * - key "final_obs": an object array of size rows, None in each (np.empty), takes value at row index;
 * - a dict value (a dict subclass too): added to infos.get(key, {}) the same way, recursively;
 * - anything else goes into infos[key], made on the key's first value: np.zeros(size, type(value)) for Python's int,
 *   float and bool and numpy's numbers (numpy's bool is not one: an object array, as Gymnasium makes), np.zeros((size,
 *   *value.shape), value.dtype) for an array, else an object array of None;
 * - then the mask infos[f"_{key}"] (np.zeros(size, bool) on first use) is set at row index, and infos[key] and the
 *   mask are stored in that order (which sets the keys' order).
 * A value goes into its array as numpy's `array[index] = value` puts it (its casts and errors), written directly where
 * that is one store: a Python float into float64, a Python int that fits into int64, a Python bool into bool, a numpy
 * scalar into an array of its own type, each at an index inside the array's one dimension.
 *
 * Why in C: an env wrapped in RecordEpisodeStatistics (every CleanRL script's) reports {"episode": {"r", "l", "t"}}
 * at each episode's end, seven arrays and four dicts an entry; in Python that merge took ~2.6 us an entry, ~3.5 with
 * the caches cold as they are between two steps, and on short episodes it was a tenth of a serial CartPole step.
 */
#define INFOS_IMPORTS_NUMPY
#include "infos.h"

#define MAX_MASK_NAMES 4096 /* str keys whose mask name is kept (f"_{key}" made once) */

PyObject *FinalObs;         /* "final_obs" */
static PyObject *MaskNames; /* str key -> "_key" */
static PyObject *Dtypes;    /* numeric scalar type -> np.dtype(type) */

/* f"_{key}": new reference, or NULL with an exception set. */
static PyObject *mask_name(PyObject *key) {
    if (PyUnicode_CheckExact(key)) {
        PyObject *name = PyDict_GetItemWithError(MaskNames, key);
        if (name != NULL) {
            Py_INCREF(name);
            return name;
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
        name = PyUnicode_FromFormat("_%U", key);
        if (name != NULL && PyDict_GET_SIZE(MaskNames) < MAX_MASK_NAMES && PyDict_SetItem(MaskNames, key, name) < 0) {
            Py_CLEAR(name);
        }
        return name;
    }
    PyObject *text = PyObject_Format(key, NULL); /* what an f-string's {key} gives */
    if (text == NULL) {
        return NULL;
    }
    PyObject *name = PyUnicode_FromFormat("_%U", text);
    Py_DECREF(text);
    return name;
}

/* np.dtype(type(value)) for the scalars Gymnasium gives typed arrays (Python's int, float and bool, numpy's numbers):
 * new reference; NULL without an exception for any other value; NULL with one on failure. */
static PyArray_Descr *numeric_dtype(PyObject *value) {
    PyTypeObject *type = Py_TYPE(value);
    if (type != &PyFloat_Type && type != &PyLong_Type && type != &PyBool_Type &&
        !PyType_IsSubtype(type, &PyNumberArrType_Type)) {
        return NULL;
    }
    PyArray_Descr *dtype = (PyArray_Descr *)PyDict_GetItemWithError(Dtypes, (PyObject *)type);
    if (dtype != NULL) {
        Py_INCREF(dtype);
        return dtype;
    }
    if (PyErr_Occurred() || !PyArray_DescrConverter((PyObject *)type, &dtype)) {
        return NULL;
    }
    if (PyDict_SetItem(Dtypes, (PyObject *)type, (PyObject *)dtype) < 0) {
        Py_DECREF(dtype);
        return NULL;
    }
    return dtype;
}

/* The array a key's first value makes (see the module's docstring): new reference, or NULL with an exception set. */
static PyObject *new_array(PyObject *value, npy_intp size) {
    PyArray_Descr *dtype = numeric_dtype(value);
    if (dtype != NULL) {
        return PyArray_Zeros(1, &size, dtype, 0); /* steals dtype */
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (PyArray_Check(value)) {
        PyArrayObject *like = (PyArrayObject *)value;
        int nd = PyArray_NDIM(like);
        if (nd + 1 > NPY_MAXDIMS) {
            PyErr_Format(PyExc_ValueError, "an info array of %d dimensions has no room for the batch's", nd);
            return NULL;
        }
        npy_intp dims[NPY_MAXDIMS];
        dims[0] = size;
        for (int i = 0; i < nd; i++) {
            dims[i + 1] = PyArray_DIM(like, i);
        }
        dtype = PyArray_DESCR(like);
        Py_INCREF(dtype);
        return PyArray_Zeros(nd + 1, dims, dtype, 0);
    }
    return PyArray_Empty(1, &size, PyArray_DescrFromType(NPY_OBJECT), 0); /* None in every row */
}

/* array[index] = value: 0, or -1 with an exception set. `at` is index as a C integer, or -1 when index is not a
 * Python int (numpy's own indexing then reads it). */
static int store(PyObject *array, PyObject *index, Py_ssize_t at, PyObject *value) {
    if (at >= 0 && PyArray_CheckExact(array)) {
        PyArrayObject *a = (PyArrayObject *)array;
        if (PyArray_NDIM(a) == 1 && at < PyArray_DIM(a, 0) && PyArray_ISBEHAVED(a)) {
            char *to = PyArray_BYTES(a) + at * PyArray_STRIDE(a, 0);
            PyTypeObject *type = Py_TYPE(value);
            int kind = PyArray_TYPE(a);
            if (kind == NPY_DOUBLE && type == &PyFloat_Type) {
                *(npy_double *)to = PyFloat_AS_DOUBLE(value);
                return 0;
            }
            if (kind == NPY_BOOL && type == &PyBool_Type) {
                *(npy_bool *)to = value == Py_True;
                return 0;
            }
            if (kind == NPY_INT64 && type == &PyLong_Type) {
                int overflow;
                long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
                if (!overflow) { /* (an int outside int64: numpy's store raises its OverflowError) */
                    *(npy_int64 *)to = (npy_int64)v;
                    return 0;
                }
            }
            if (PyTypeNum_ISNUMBER(kind) && type == PyArray_DESCR(a)->typeobj) { /* a numpy scalar of its type */
                PyArray_ScalarAsCtype(value, to);
                return 0;
            }
        }
    }
    return PyObject_SetItem(array, index, value);
}

/* infos.get(key) for infos a dict: borrowed reference, or NULL (with an exception set only on failure). Anything
 * else in infos' place (a key of one env's info holding a dict where another's held a value) is asked for .get as
 * Gymnasium asks it, which raises the same AttributeError. */
static PyObject *get(PyObject *infos, PyObject *key, PyObject **owned) {
    *owned = NULL;
    if (PyDict_CheckExact(infos)) {
        return PyDict_GetItemWithError(infos, key);
    }
    PyObject *found = PyObject_CallMethod(infos, "get", "O", key);
    if (found == Py_None) {
        Py_CLEAR(found);
    }
    *owned = found;
    return found;
}

static PyObject *add(PyObject *infos, PyObject *info, PyObject *index, Py_ssize_t at, npy_intp size);

/* One (key, value) of an info; 0, or -1 with an exception set. */
static int add_item(PyObject *infos, PyObject *key, PyObject *value, PyObject *index, Py_ssize_t at, npy_intp size) {
    PyObject *array = NULL, *mask = NULL, *owned = NULL, *name = NULL;
    int final = PyObject_RichCompareBool(key, FinalObs, Py_EQ);
    if (final < 0) {
        return -1;
    }
    PyObject *found = get(infos, key, &owned);
    if (found == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (final) {
        array = found != NULL ? Py_NewRef(found) : PyArray_Empty(1, &size, PyArray_DescrFromType(NPY_OBJECT), 0);
        if (array == NULL || store(array, index, at, value) < 0) {
            goto fail;
        }
    } else if (PyDict_Check(value)) {
        PyObject *inner = found != NULL ? Py_NewRef(found) : PyDict_New();
        if (inner == NULL) {
            goto fail;
        }
        array = add(inner, value, index, at, size);
        Py_DECREF(inner);
        if (array == NULL) {
            goto fail;
        }
    } else {
        array = found != NULL ? Py_NewRef(found) : new_array(value, size);
        if (array == NULL || store(array, index, at, value) < 0) {
            goto fail;
        }
    }
    Py_CLEAR(owned);
    name = mask_name(key);
    if (name == NULL) {
        goto fail;
    }
    found = get(infos, name, &owned);
    if (found == NULL && PyErr_Occurred()) {
        goto fail;
    }
    mask = found != NULL ? Py_NewRef(found) : PyArray_Zeros(1, &size, PyArray_DescrFromType(NPY_BOOL), 0);
    if (mask == NULL || store(mask, index, at, Py_True) < 0 || PyObject_SetItem(infos, key, array) < 0 ||
        PyObject_SetItem(infos, name, mask) < 0) {
        goto fail;
    }
    Py_DECREF(array);
    Py_DECREF(mask);
    Py_DECREF(name);
    Py_XDECREF(owned);
    return 0;
fail:
    Py_XDECREF(array);
    Py_XDECREF(mask);
    Py_XDECREF(name);
    Py_XDECREF(owned);
    return -1;
}

/* infos with info added; new reference, or NULL with an exception set. */
static PyObject *add(PyObject *infos, PyObject *info, PyObject *index, Py_ssize_t at, npy_intp size) {
    if (Py_EnterRecursiveCall(" while merging an info dict into the vector infos")) { /* (a dict that holds itself) */
        return NULL;
    }
    int failed = 0;
    if (PyDict_CheckExact(info)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        Py_INCREF(info);
        while (!failed && PyDict_Next(info, &pos, &key, &value)) {
            Py_INCREF(key);
            Py_INCREF(value);
            failed = add_item(infos, key, value, index, at, size) < 0;
            Py_DECREF(key);
            Py_DECREF(value);
        }
        Py_DECREF(info);
    } else { /* a dict subclass: through its own items() */
        PyObject *items = PyObject_CallMethod(info, "items", NULL);
        PyObject *iterator = items == NULL ? NULL : PyObject_GetIter(items);
        Py_XDECREF(items);
        failed = iterator == NULL;
        PyObject *item;
        while (!failed && (item = PyIter_Next(iterator)) != NULL) {
            PyObject *pair = PySequence_Tuple(item); /* (key, value), as a for loop unpacks it */
            Py_DECREF(item);
            if (pair != NULL && PyTuple_GET_SIZE(pair) != 2) {
                PyErr_Format(PyExc_ValueError, "expected 2 values to unpack from an info's items(), got %zd",
                             PyTuple_GET_SIZE(pair));
                Py_CLEAR(pair);
            }
            failed = pair == NULL ||
                     add_item(infos, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), index, at, size) < 0;
            Py_XDECREF(pair);
        }
        failed = failed || PyErr_Occurred();
        Py_XDECREF(iterator);
    }
    Py_LeaveRecursiveCall();
    return failed ? NULL : Py_NewRef(infos);
}

static PyObject *add_info(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "add_info(infos, info, index, size) takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *infos = args[0], *info = args[1], *index = args[2];
    npy_intp size = PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyDict_Check(info)) {
        PyErr_Format(PyExc_TypeError, "add_info: expected an info dict, got %.100s", Py_TYPE(info)->tp_name);
        return NULL;
    }
    Py_ssize_t at = -1;
    if (PyLong_CheckExact(index)) {
        at = PyLong_AsSsize_t(index);
        if (at < 0) { /* a negative or huge row: numpy's indexing reads it */
            PyErr_Clear();
            at = -1;
        }
    }
    return add(infos, info, index, at, size);
}
static PyMethodDef methods[] = {
    {"add_info", (PyCFunction)(void (*)(void))add_info, METH_FASTCALL,
     "add_info(infos, info, index, size): add one env's info at row index of the vector infos (arrays of size "
     "rows), as Gymnasium's VectorEnv._add_info does; returns infos"},
    {"add_columns", (PyCFunction)(void (*)(void))add_columns, METH_FASTCALL,
     "add_columns(infos, keys, masks, dtypes, words, rows, size): add the infos of a Columns (words: one 8-byte word "
     "per env and key) at rows (the first, consecutive, or a list of one per env) a key at a time, as add_info of "
     "each env's info would; False, with nothing changed, where that would differ (a key's array of another type)"},
    {"column_entries", (PyCFunction)(void (*)(void))column_entries, METH_FASTCALL,
     "column_entries(ids, keys, kinds, dtypes, words): the (env_id, info) entries of a Columns, each value of the type "
     "the env returned"},
    {"fill_words", (PyCFunction)(void (*)(void))fill_words, METH_FASTCALL,
     "fill_words(words, entries, start, wide, slots): write a group's numeric infos into the info table's words; "
     "(keys, kinds), or None where they do not fit"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_infos", NULL, -1, methods};

PyMODINIT_FUNC PyInit__infos(void) {
    import_array();
    FinalObs = PyUnicode_InternFromString("final_obs"); /* these three kept for good */
    MaskNames = PyDict_New();
    Dtypes = PyDict_New();
    if (FinalObs == NULL || MaskNames == NULL || Dtypes == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
