/* What the files of shoal.vector._rows share (_rows.c is the module: its docstring says what the writer does).
 *
 * _rows.c          the RowWriter type, put and put_obs: one env's step results or reset observation in its row
 * rows_agents.c    put_agents: a multi-agent env's agents in their rows, and the padding of the absent ones
 * rows_values.c    one value: where an observation leaf's value comes from (walk, classify) and its writes; rewards
 *                  and flags as the full checks take them
 * rows_lists.c     lists and tuples (of numbers, or of arrays a level above them) as numpy's write reads them
 */
#ifndef SHOAL_ROWS_H
#define SHOAL_ROWS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_19_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shoal_rows_ARRAY_API /* numpy's API table, imported once by _rows.c for all files */
#ifndef ROWS_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
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

/* rows_values.c */
PyObject *walk(PyObject *obs, Leaf *leaf);
int classify(Leaf *leaf, PyObject *value);
void write_cast(Leaf *leaf, char *dst);
int write_strided(Leaf *leaf, char *dst);
int report_overflow(void);
int as_flag(PyObject *value, npy_bool *out);
int as_reward(PyObject *value, double *out);

/* rows_lists.c */
int exact_int64(PyObject *value, long long *out);
int integer_fits(Leaf *leaf, unsigned long long v, int is_signed);
int list_fits(Leaf *leaf, PyObject *list);
void store_integer(char *at, npy_intp size, unsigned long long v);
void write_list(Leaf *leaf, char *dst);

/* _rows.c */
int arguments(RowWriter *self, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t count, const char *usage,
              Py_ssize_t *row);
int take_obs(RowWriter *self, Py_ssize_t row, PyObject *obs);
int write_obs(RowWriter *self, Py_ssize_t row);

/* rows_agents.c */
int agents_ready(void);
PyObject *RowWriter_put_agents(RowWriter *self, PyObject *const *args, Py_ssize_t nargs);

#endif
