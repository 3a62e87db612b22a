/* What the two files of shoal.vector._infos share (_infos.c is the module: its docstring says what each call does).
 *
 * _infos.c        add_info: one env's info added to Gymnasium's vector form
 * info_table.c    the info table (shoal.vector.info_table): fill_words in the worker, add_columns and column_entries
 *                 in the calling process
 */
#ifndef SHOAL_INFOS_H
#define SHOAL_INFOS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_19_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL shoal_infos_ARRAY_API /* numpy's API table, imported once by _infos.c for both files */
#ifndef INFOS_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

extern PyObject *FinalObs; /* "final_obs" (_infos.c) */

/* info_table.c */
PyObject *column_entries(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *add_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *fill_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
