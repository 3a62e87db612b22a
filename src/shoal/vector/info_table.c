/* shoal.vector._infos: the info table (infos.h; _infos.c says what each call does). */
#include "infos.h"

#define MAX_KEYS 64 /* the most keys fill_words takes (the table has 16 slots) */

/* Columns: a worker's infos through the info table (shoal.vector.info_table), one 8-byte word per env and key. Both
 * ends were numpy and Python: for a worker's four HalfCheetah infos the worker's writes took ~3.2 us and the merge a key
 * at a time ~5.8, more than the env's infos cost Gymnasium's SyncVectorEnv in all (now ~0.7 and ~1.4). */

/* Whether infos[key] (found, may be NULL) can take the key's values as add_info would put them one by one: new, or
 * a 1-d array of size rows of the dtype their type makes (so nothing is cast). A mask need only be a 1-d array of
 * size rows (add_info stores True into whatever it is). */
static int takes(PyObject *found, PyArray_Descr *dtype, npy_intp size) {
    if (found == NULL) {
        return 1;
    }
    if (!PyArray_CheckExact(found)) {
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)found;
    return PyArray_NDIM(a) == 1 && PyArray_DIM(a, 0) == size && PyArray_ISBEHAVED(a) &&
           (dtype == NULL || PyArray_EquivTypes(PyArray_DESCR(a), dtype));
}

/* A word's value (of type `own`, a dtype number, held exactly as the 8-byte type of its kind: float64 for floats,
 * int64 for signed ints and bools, uint64 for unsigned ints; infos.WIDE) stored at `to` as that type: 1, or 0 for
 * float16, which takes numpy's conversion. */
typedef union {
    npy_double f;
    npy_int64 i;
    npy_uint64 u;
} Word; /* a table word, read as each of its three 8-byte kinds */

static Word word_at(const char *word) {
    Word w;
    memcpy(&w, word, 8);
    return w;
}

static int as_own(char *to, const char *word, int own) {
    Word w = word_at(word);
    npy_double f = w.f;
    npy_int64 i = w.i;
    npy_uint64 u = w.u;
    switch (own) {
    case NPY_DOUBLE: *(npy_double *)to = f; return 1;
    case NPY_FLOAT: *(npy_float *)to = (npy_float)f; return 1;
    case NPY_BOOL: *(npy_bool *)to = i != 0; return 1;
    case NPY_BYTE: *(npy_byte *)to = (npy_byte)i; return 1;
    case NPY_SHORT: *(npy_short *)to = (npy_short)i; return 1;
    case NPY_INT: *(npy_int *)to = (npy_int)i; return 1;
    case NPY_LONG: *(npy_long *)to = (npy_long)i; return 1;
    case NPY_LONGLONG: *(npy_longlong *)to = (npy_longlong)i; return 1;
    case NPY_UBYTE: *(npy_ubyte *)to = (npy_ubyte)u; return 1;
    case NPY_USHORT: *(npy_ushort *)to = (npy_ushort)u; return 1;
    case NPY_UINT: *(npy_uint *)to = (npy_uint)u; return 1;
    case NPY_ULONG: *(npy_ulong *)to = (npy_ulong)u; return 1;
    case NPY_ULONGLONG: *(npy_ulonglong *)to = (npy_ulonglong)u; return 1;
    default: return 0;
    }
}

/* A word's value (of type `own`, as above) as a Python object of its 8-byte kind: a float, an int, or a bool for a
 * bool. New reference, or NULL with an exception set. */
static PyObject *as_python(const char *word, int own) {
    Word w = word_at(word);
    if (PyTypeNum_ISFLOAT(own)) {
        return PyFloat_FromDouble(w.f);
    }
    if (own == NPY_BOOL) {
        return PyBool_FromLong(w.i != 0);
    }
    return PyTypeNum_ISUNSIGNED(own) ? PyLong_FromUnsignedLongLong(w.u) : PyLong_FromLongLong(w.i);
}

/* Store a key's word at `to` in array a: directly where a is of its own type, else (a mask made by another key of the
 * same columns, "_a" beside "a"; or float16) as numpy casts its value. 0, or -1 with an exception set. */
static int put_word(PyArrayObject *a, char *to, const char *word, int own) {
    if (PyArray_TYPE(a) == own && as_own(to, word, own)) {
        return 0;
    }
    PyObject *value = as_python(word, own);
    int failed = value == NULL || PyArray_SETITEM(a, to, value) < 0;
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

/* column_entries(ids, keys, kinds, dtypes, words): the (env_id, info) entries the columns were made of, each value of
 * the type the env returned (kinds[j]: Python's float, int or bool, or a numpy scalar type of dtype dtypes[j]). */
PyObject *column_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2]) ||
        !PyTuple_Check(args[3]) || !PyArray_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "column_entries(ids, keys, kinds, dtypes, words)");
        return NULL;
    }
    PyObject *ids = args[0], *keys = args[1], *kinds = args[2], *dtypes = args[3];
    PyArrayObject *words = (PyArrayObject *)args[4];
    Py_ssize_t n = PyList_GET_SIZE(ids), k = PyTuple_GET_SIZE(keys);
    if (PyTuple_GET_SIZE(kinds) != k || PyTuple_GET_SIZE(dtypes) != k || PyArray_NDIM(words) != 2 ||
        PyArray_ITEMSIZE(words) != 8 || !PyArray_IS_C_CONTIGUOUS(words) || PyArray_DIM(words, 0) != n ||
        PyArray_DIM(words, 1) != k) {
        PyErr_SetString(PyExc_ValueError, "column_entries: a kind and dtype per key, and an (envs, keys) C-contiguous "
                                          "array of 8-byte words");
        return NULL;
    }
    for (Py_ssize_t c = 0; c < k; c++) {
        if (!PyArray_DescrCheck(PyTuple_GET_ITEM(dtypes, c))) {
            PyErr_SetString(PyExc_TypeError, "column_entries: dtypes must be numpy dtypes");
            return NULL;
        }
    }
    PyObject *entries = PyList_New(n);
    if (entries == NULL) {
        return NULL;
    }
    const char *base = PyArray_BYTES(words);
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *info = PyDict_New();
        PyObject *entry = info == NULL ? NULL : PyTuple_Pack(2, PyList_GET_ITEM(ids, j), info);
        Py_XDECREF(info);
        if (entry == NULL) {
            Py_DECREF(entries);
            return NULL;
        }
        PyList_SET_ITEM(entries, j, entry);
        for (Py_ssize_t c = 0; c < k; c++) {
            const char *word = base + (j * k + c) * 8;
            PyObject *kind = PyTuple_GET_ITEM(kinds, c), *value;
            PyArray_Descr *dtype = (PyArray_Descr *)PyTuple_GET_ITEM(dtypes, c);
            int own = dtype->type_num;
            npy_longlong raw[2]; /* (room for any of WIDE's types) */
            if (kind == (PyObject *)&PyFloat_Type || kind == (PyObject *)&PyLong_Type ||
                kind == (PyObject *)&PyBool_Type) {
                value = as_python(word, own);
            } else if (as_own((char *)raw, word, own)) {
                value = PyArray_Scalar(raw, dtype, NULL);
            } else { /* float16: its type made from the exact float */
                PyObject *exact = as_python(word, own);
                value = exact == NULL ? NULL : PyObject_CallOneArg(kind, exact);
                Py_XDECREF(exact);
            }
            if (value == NULL || PyDict_SetItem(info, PyTuple_GET_ITEM(keys, c), value) < 0) {
                Py_XDECREF(value);
                Py_DECREF(entries);
                return NULL;
            }
            Py_DECREF(value);
        }
    }
    return entries;
}

PyObject *add_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "add_columns(infos, keys, masks, dtypes, words, rows, size) takes 7 arguments "
                                      "(%zd given)", nargs);
        return NULL;
    }
    PyObject *infos = args[0], *keys = args[1], *masks = args[2], *dtypes = args[3], *rows = args[5];
    npy_intp size = PyNumber_AsSsize_t(args[6], PyExc_OverflowError);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyDict_CheckExact(infos) || !PyTuple_Check(keys) || !PyTuple_Check(masks) || !PyTuple_Check(dtypes) ||
        !PyArray_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "add_columns: expected a dict, three tuples and an array");
        return NULL;
    }
    PyArrayObject *words = (PyArrayObject *)args[4];
    Py_ssize_t k = PyTuple_GET_SIZE(keys);
    if (PyTuple_GET_SIZE(masks) != k || PyTuple_GET_SIZE(dtypes) != k || PyArray_NDIM(words) != 2 ||
        PyArray_ITEMSIZE(words) != 8 || !PyArray_IS_C_CONTIGUOUS(words) || !PyArray_ISALIGNED(words) ||
        PyArray_DIM(words, 1) != k) {
        PyErr_SetString(PyExc_ValueError, "add_columns: a key, mask and dtype each, and a C-contiguous (envs, keys) "
                                          "array of 8-byte words");
        return NULL;
    }
    npy_intp n = PyArray_DIM(words, 0);
    /* the rows: consecutive from an int, or a list of one int per env */
    npy_intp first = -1;
    if (PyLong_Check(rows)) {
        first = PyLong_AsSsize_t(rows);
        if (first == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (first < 0 || first + n > size) {
            PyErr_Format(PyExc_IndexError, "add_columns: rows %zd to %zd outside %zd", first, first + n, size);
            return NULL;
        }
    } else if (!PyList_CheckExact(rows) || PyList_GET_SIZE(rows) != n) {
        PyErr_SetString(PyExc_TypeError, "add_columns: rows must be the first row or a list of one row per env");
        return NULL;
    } else {
        for (npy_intp j = 0; j < n; j++) {
            Py_ssize_t row = PyLong_AsSsize_t(PyList_GET_ITEM(rows, j));
            if (row == -1 && PyErr_Occurred()) {
                return NULL;
            }
            if (row < 0 || row >= size) {
                PyErr_Format(PyExc_IndexError, "add_columns: row %zd outside %zd", row, size);
                return NULL;
            }
        }
    }
    for (Py_ssize_t c = 0; c < k; c++) { /* all or nothing: every key checked before any is written */
        PyObject *dtype = PyTuple_GET_ITEM(dtypes, c);
        if (!PyArray_DescrCheck(dtype)) {
            PyErr_SetString(PyExc_TypeError, "add_columns: dtypes must be numpy dtypes");
            return NULL;
        }
        PyObject *array = PyDict_GetItemWithError(infos, PyTuple_GET_ITEM(keys, c));
        if (array == NULL && PyErr_Occurred()) {
            return NULL;
        }
        PyObject *mask = PyDict_GetItemWithError(infos, PyTuple_GET_ITEM(masks, c));
        if (mask == NULL && PyErr_Occurred()) {
            return NULL;
        }
        if (!takes(array, (PyArray_Descr *)dtype, size) || !takes(mask, NULL, size)) {
            Py_RETURN_FALSE;
        }
    }
    const char *base = PyArray_BYTES(words);
    for (Py_ssize_t c = 0; c < k; c++) {
        PyObject *key = PyTuple_GET_ITEM(keys, c), *name = PyTuple_GET_ITEM(masks, c);
        PyArray_Descr *dtype = (PyArray_Descr *)PyTuple_GET_ITEM(dtypes, c);
        PyObject *array = PyDict_GetItemWithError(infos, key); /* (a key earlier in keys may have made it: a mask) */
        if (array == NULL && PyErr_Occurred()) {
            return NULL;
        }
        if (array != NULL) {
            Py_INCREF(array);
        } else {
            Py_INCREF(dtype);
            array = PyArray_Zeros(1, &size, dtype, 0);
            if (array == NULL) {
                return NULL;
            }
        }
        PyObject *mask = PyDict_GetItemWithError(infos, name);
        if (mask == NULL && PyErr_Occurred()) {
            Py_DECREF(array);
            return NULL;
        }
        if (mask != NULL) {
            Py_INCREF(mask);
        } else {
            mask = PyArray_Zeros(1, &size, PyArray_DescrFromType(NPY_BOOL), 0);
            if (mask == NULL) {
                Py_DECREF(array);
                return NULL;
            }
        }
        PyArrayObject *a = (PyArrayObject *)array, *m = (PyArrayObject *)mask;
        int own = dtype->type_num, failed = !takes(array, NULL, size) || !takes(mask, NULL, size);
        if (failed) {
            PyErr_SetString(PyExc_RuntimeError, "add_columns: a key's array changed under it");
        }
        for (npy_intp j = 0; !failed && j < n; j++) {
            npy_intp row = first >= 0 ? first + j : PyLong_AsSsize_t(PyList_GET_ITEM(rows, j));
            failed = put_word(a, PyArray_BYTES(a) + row * PyArray_STRIDE(a, 0), base + (j * k + c) * 8, own) < 0;
            char *at = PyArray_BYTES(m) + row * PyArray_STRIDE(m, 0);
            if (!failed && PyArray_TYPE(m) == NPY_BOOL) {
                *(npy_bool *)at = 1;
            } else if (!failed) {
                failed = PyArray_SETITEM(m, at, Py_True) < 0;
            }
        }
        failed = failed || PyDict_SetItem(infos, key, array) < 0 || PyDict_SetItem(infos, name, mask) < 0;
        Py_DECREF(array);
        Py_DECREF(mask);
        if (failed) {
            return NULL;
        }
    }
    Py_RETURN_TRUE;
}

/* A word from value (of one of infos.WIDE's types, `wide` its 8-byte kind: 'f' float64, 'i' int64, 'u' uint64): 1,
 * or 0 where it does not fit its kind (a Python int outside int64), or -1 with an exception set. */
static int to_word(PyObject *value, char wide, char *word) {
    if (wide == 'f') {
        double f = PyFloat_AsDouble(value); /* exact for every float type WIDE takes */
        if (f == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        memcpy(word, &f, 8);
        return 1;
    }
    if (PyLong_Check(value)) { /* Python's int and bool */
        int overflow;
        long long i = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (i == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow || wide != 'i') {
            return 0;
        }
        npy_int64 v = (npy_int64)i;
        memcpy(word, &v, 8);
        return 1;
    }
    if (!PyArray_IsScalar(value, Integer)) {
        PyErr_Format(PyExc_TypeError, "fill_words: %.100s is not an integer type", Py_TYPE(value)->tp_name);
        return -1;
    }
    PyArray_Descr *descr = PyArray_DescrFromScalar(value);
    if (descr == NULL) {
        return -1;
    }
    int num = descr->type_num;
    Py_DECREF(descr);
    union {
        npy_byte i8; npy_short i16; npy_int i32; npy_long il; npy_longlong ill;
        npy_ubyte u8; npy_ushort u16; npy_uint u32; npy_ulong ul; npy_ulonglong ull;
    } raw;
    PyArray_ScalarAsCtype(value, &raw);
    npy_int64 i = 0;
    npy_uint64 u = 0;
    switch (num) {
    case NPY_BYTE: i = raw.i8; break;
    case NPY_SHORT: i = raw.i16; break;
    case NPY_INT: i = raw.i32; break;
    case NPY_LONG: i = raw.il; break;
    case NPY_LONGLONG: i = raw.ill; break;
    case NPY_UBYTE: u = raw.u8; break;
    case NPY_USHORT: u = raw.u16; break;
    case NPY_UINT: u = raw.u32; break;
    case NPY_ULONG: u = raw.ul; break;
    case NPY_ULONGLONG: u = raw.ull; break;
    default: return 0;
    }
    if (wide == 'u') {
        memcpy(word, &u, 8);
    } else {
        memcpy(word, &i, 8);
    }
    return 1;
}

/* fill_words(words, entries, start, wide, slots): in a worker, the step's info entries of a group starting at env
 * start (its envs in order, one (env_id, info) each) written into rows start, start + 1, ... of words (uint64, one
 * row of slots words per env): where every info is a plain dict with the keys of the first, in the same order (at
 * most slots of them, none "final_obs"), each key's values of one type that `wide` (a dict: type -> 'f', 'i' or 'u',
 * infos.WIDE's 8-byte kinds) holds. Returns (keys, kinds), or None where they do not all fit (rows may then hold
 * some of the values: nobody reads them). */
PyObject *fill_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyArray_Check(args[0]) || !PyList_CheckExact(args[1]) || !PyDict_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "fill_words(words, entries, start, wide, slots)");
        return NULL;
    }
    PyArrayObject *words = (PyArrayObject *)args[0];
    PyObject *entries = args[1], *wide = args[3];
    Py_ssize_t start = PyLong_AsSsize_t(args[2]), slots = PyLong_AsSsize_t(args[4]);
    if ((start == -1 || slots == -1) && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (PyArray_NDIM(words) != 2 || PyArray_TYPE(words) != NPY_UINT64 || !PyArray_IS_C_CONTIGUOUS(words) ||
        !PyArray_ISWRITEABLE(words) || PyArray_DIM(words, 1) < slots || start < 0 || start + n > PyArray_DIM(words, 0)) {
        PyErr_SetString(PyExc_ValueError, "fill_words: words must be a writeable C-contiguous (envs, slots) uint64 "
                                          "array holding the group's rows");
        return NULL;
    }
    if (n == 0) {
        Py_RETURN_NONE;
    }
    PyObject *head = PyList_GET_ITEM(entries, 0);
    if (!PyTuple_CheckExact(head) || PyTuple_GET_SIZE(head) != 2 || !PyDict_CheckExact(PyTuple_GET_ITEM(head, 1))) {
        Py_RETURN_NONE;
    }
    PyObject *first = PyTuple_GET_ITEM(head, 1);
    Py_ssize_t k = PyDict_GET_SIZE(first);
    char codes[MAX_KEYS];
    if (k == 0 || k > slots || k > MAX_KEYS) {
        Py_RETURN_NONE;
    }
    PyObject *keys = PyTuple_New(k), *kinds = PyTuple_New(k);
    if (keys == NULL || kinds == NULL) {
        goto fail;
    }
    Py_ssize_t pos = 0, j = 0;
    PyObject *key, *value;
    while (PyDict_Next(first, &pos, &key, &value)) {
        int final = PyObject_RichCompareBool(key, FinalObs, Py_EQ);
        if (final < 0) {
            goto fail;
        }
        PyObject *code = PyDict_GetItemWithError(wide, (PyObject *)Py_TYPE(value));
        if (code == NULL && PyErr_Occurred()) {
            goto fail;
        }
        if (final || code == NULL || !PyUnicode_Check(code) || PyUnicode_GET_LENGTH(code) != 1) {
            goto refused;
        }
        codes[j] = (char)PyUnicode_READ_CHAR(code, 0);
        Py_INCREF(key);
        Py_INCREF(Py_TYPE(value));
        PyTuple_SET_ITEM(keys, j, key);
        PyTuple_SET_ITEM(kinds, j, (PyObject *)Py_TYPE(value));
        j++;
    }
    char *base = PyArray_BYTES(words);
    npy_intp stride = PyArray_STRIDE(words, 0);
    for (Py_ssize_t e = 0; e < n; e++) {
        PyObject *entry = PyList_GET_ITEM(entries, e);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
            goto refused;
        }
        PyObject *env = PyTuple_GET_ITEM(entry, 0), *info = PyTuple_GET_ITEM(entry, 1);
        if (!PyLong_Check(env) || !PyDict_CheckExact(info) || PyDict_GET_SIZE(info) != k) {
            goto refused;
        }
        Py_ssize_t env_id = PyLong_AsSsize_t(env);
        if (env_id == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto refused;
        }
        if (env_id != start + e) {
            goto refused;
        }
        char *row = base + (start + e) * stride;
        pos = 0;
        j = 0;
        while (PyDict_Next(info, &pos, &key, &value)) {
            PyObject *want = PyTuple_GET_ITEM(keys, j);
            if (key != want) { /* (the same key, usually the same object) */
                int same = PyObject_RichCompareBool(key, want, Py_EQ);
                if (same < 0) {
                    goto fail;
                }
                if (!same) {
                    goto refused;
                }
            }
            if ((PyObject *)Py_TYPE(value) != PyTuple_GET_ITEM(kinds, j)) {
                goto refused;
            }
            int fits = to_word(value, codes[j], row + j * 8);
            if (fits < 0) {
                goto fail;
            }
            if (!fits) {
                goto refused;
            }
            j++;
        }
    }
    PyObject *schema = PyTuple_Pack(2, keys, kinds);
    Py_DECREF(keys);
    Py_DECREF(kinds);
    return schema;
refused:
    Py_XDECREF(keys);
    Py_XDECREF(kinds);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(keys);
    Py_XDECREF(kinds);
    if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    return NULL;
}
