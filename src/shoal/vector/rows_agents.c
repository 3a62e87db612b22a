/* shoal.vector._rows: put_agents, a multi-agent env's agents in their rows (rows.h; _rows.c says what it does). */
#include "rows.h"

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

/* Find collections.defaultdict (kept for good): 0, or -1 with an error set. */
int agents_ready(void) {
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL) {
        return -1;
    }
    DefaultDict = (PyTypeObject *)PyObject_GetAttrString(collections, "defaultdict");
    Py_DECREF(collections);
    return DefaultDict == NULL ? -1 : 0;
}

/* Whether `obj` is a dict whose items are read as a dict's: a dict, an OrderedDict or a defaultdict (the items it
 * has; a missing one leaves the fast path, as does any other subclass, which may read its items its own way). */
static int plain_dict(PyObject *obj) {
    return PyDict_CheckExact(obj) || PyODict_CheckExact(obj) || Py_TYPE(obj) == DefaultDict;
}

/* The writer of agent `k`'s observations: its own among self's agent writers, or self. */
static RowWriter *agent_writer(RowWriter *self, Py_ssize_t k) {
    return self->agent_writers != NULL ? (RowWriter *)PyTuple_GET_ITEM(self->agent_writers, k) : self;
}

PyObject *RowWriter_put_agents(RowWriter *self, PyObject *const *args, Py_ssize_t nargs) {
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

