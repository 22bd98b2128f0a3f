/* Compiled Producer.send: the common case of one record a call, in C.
 *
 * An app that produces record by record pays Producer.send once per record; in Python
 * that is about a microsecond (a dozen bytecode-level steps: serializer checks, the
 * topic's cached partition count and batch budget, the partitioner, a timestamp, the
 * size bound, the producer lock, a future and four list appends), which caps a Python
 * app below a million records a second. This module does exactly the same steps with
 * the same objects (the producer's dicts, its lock, its _Batch and RecordFuture slots),
 * and hands every case that is not the common one to the producer's Python code
 * (`_send_locked`, `_topic_info`, `_new_sticky`, `_bad_partition`, `_ship`): a batch to
 * open or ship, a closed producer, a record over the budget, headers, non-bytes keys.
 * logan_ray/producer.py's `Producer.send` is the pure-Python twin: same partition choice,
 * same batches, same futures (tests/api/test_producer_send_path.py compares them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

#include "murmur2.h" /* storage/murmur2.h */

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

static PyObject *S_acquire, *S_release, *S_closed, *S_topic_info, *S_new_sticky, *S_bad_partition,
    *S_send_locked, *S_ship;

typedef struct {
    PyObject_HEAD
    PyObject *producer;              /* the Producer (callbacks, futures refer to it) */
    PyObject *value_ser, *key_ser;   /* None or callables */
    PyObject *topics, *routes, *sticky, *open; /* the producer's dicts */
    PyObject *lock;                  /* the producer's RLock */
    PyTypeObject *batch_type, *future_type;
    Py_ssize_t b_values, b_keys, b_headers, b_timestamps, b_size; /* _Batch slot offsets */
    Py_ssize_t f_producer, f_batch, f_index;                      /* RecordFuture slot offsets */
    Py_ssize_t overhead;             /* RECORD_OVERHEAD */
} SendPath;

static Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (d == NULL) return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(d);
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", ((PyTypeObject *)cls)->tp_name, name);
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return off;
}

static int sp_traverse(SendPath *s, visitproc visit, void *arg) {
    Py_VISIT(s->producer);
    Py_VISIT(s->value_ser);
    Py_VISIT(s->key_ser);
    Py_VISIT(s->topics);
    Py_VISIT(s->routes);
    Py_VISIT(s->sticky);
    Py_VISIT(s->open);
    Py_VISIT(s->lock);
    Py_VISIT(s->batch_type);
    Py_VISIT(s->future_type);
    return 0;
}

static int sp_clear(SendPath *s) {
    Py_CLEAR(s->producer);
    Py_CLEAR(s->value_ser);
    Py_CLEAR(s->key_ser);
    Py_CLEAR(s->topics);
    Py_CLEAR(s->routes);
    Py_CLEAR(s->sticky);
    Py_CLEAR(s->open);
    Py_CLEAR(s->lock);
    Py_CLEAR(s->batch_type);
    Py_CLEAR(s->future_type);
    return 0;
}

static void sp_dealloc(SendPath *s) {
    PyObject_GC_UnTrack(s);
    sp_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* SendPath(producer, value_ser, key_ser, topics, routes, sticky, open, lock, Batch, RecordFuture, overhead) */
static int sp_init(SendPath *s, PyObject *args, PyObject *kw) {
    PyObject *producer, *vser, *kser, *topics, *routes, *sticky, *open, *lock, *bt, *ft;
    Py_ssize_t overhead;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!O!OO!O!n", &producer, &vser, &kser, &PyDict_Type, &topics, &PyDict_Type,
                          &routes, &PyDict_Type, &sticky, &PyDict_Type, &open, &lock, &PyType_Type, &bt, &PyType_Type,
                          &ft, &overhead))
        return -1;
    if ((s->b_values = slot_offset(bt, "values")) < 0 || (s->b_keys = slot_offset(bt, "keys")) < 0 ||
        (s->b_headers = slot_offset(bt, "headers")) < 0 || (s->b_timestamps = slot_offset(bt, "timestamps")) < 0 ||
        (s->b_size = slot_offset(bt, "size")) < 0 || (s->f_producer = slot_offset(ft, "_producer")) < 0 ||
        (s->f_batch = slot_offset(ft, "_batch")) < 0 || (s->f_index = slot_offset(ft, "_index")) < 0)
        return -1;
    Py_XSETREF(s->producer, Py_NewRef(producer));
    Py_XSETREF(s->value_ser, Py_NewRef(vser));
    Py_XSETREF(s->key_ser, Py_NewRef(kser));
    Py_XSETREF(s->topics, Py_NewRef(topics));
    Py_XSETREF(s->routes, Py_NewRef(routes));
    Py_XSETREF(s->sticky, Py_NewRef(sticky));
    Py_XSETREF(s->open, Py_NewRef(open));
    Py_XSETREF(s->lock, Py_NewRef(lock));
    Py_XSETREF(s->batch_type, (PyTypeObject *)Py_NewRef(bt));
    Py_XSETREF(s->future_type, (PyTypeObject *)Py_NewRef(ft));
    s->overhead = overhead;
    return 0;
}

/* The size of a value or key as `len()` gives it (bytes fast, anything else through len()). */
static inline Py_ssize_t size_of(PyObject *o) {
    if (o == Py_None) return 0;
    if (PyBytes_CheckExact(o)) return PyBytes_GET_SIZE(o);
    return PyObject_Size(o);
}

/* The partition for a record: explicit (checked), by key (murmur2 of a bytes key), or the
 * topic's sticky one. Returns a new reference, or NULL with an exception set. */
static PyObject *choose(SendPath *s, PyObject *topic, PyObject *key, PyObject *partition, Py_ssize_t n) {
    if (partition != Py_None) {
        Py_ssize_t p = PyLong_AsSsize_t(partition);
        if (p == -1 && PyErr_Occurred()) return NULL;
        if (p < 0 || p >= n) {
            PyObject *nn = PyLong_FromSsize_t(n);
            if (nn == NULL) return NULL;
            PyObject *r = PyObject_CallMethodObjArgs(s->producer, S_bad_partition, topic, partition, nn, NULL);
            Py_DECREF(nn);
            Py_XDECREF(r);
            return NULL; /* _bad_partition always raises */
        }
        return Py_NewRef(partition);
    }
    if (key != Py_None) {
        Py_buffer b;
        if (PyObject_GetBuffer(key, &b, PyBUF_SIMPLE) < 0) return NULL; /* as murmur2() of a non-buffer key */
        uint32_t h = kafka_murmur2((const uint8_t *)b.buf, b.len);
        PyBuffer_Release(&b);
        return PyLong_FromSsize_t((Py_ssize_t)((h & 0x7fffffffu) % (uint32_t)n));
    }
    PyObject *p = PyDict_GetItemWithError(s->sticky, topic); /* borrowed */
    if (p == NULL && PyErr_Occurred()) return NULL;
    if (p != NULL) {
        Py_ssize_t v = PyLong_AsSsize_t(p);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < n) return Py_NewRef(p);
    }
    PyObject *nn = PyLong_FromSsize_t(n);
    if (nn == NULL) return NULL;
    PyObject *r = PyObject_CallMethodObjArgs(s->producer, S_new_sticky, topic, nn, NULL);
    Py_DECREF(nn);
    return r;
}

static int append_slot(PyObject *b, Py_ssize_t off, PyObject *item) {
    PyObject *l = SLOT(b, off);
    if (l == NULL || !PyList_CheckExact(l)) {
        PyErr_SetString(PyExc_TypeError, "_Batch list slot is not a list");
        return -1;
    }
    return PyList_Append(l, item);
}

/* The locked part, common case only. Returns the future (new ref), Py_None (borrowed: take
 * the slow path) or NULL (error). The caller holds the producer's lock. */
static PyObject *locked_append(SendPath *s, PyObject *tp, PyObject *value, PyObject *key, PyObject *headers,
                               PyObject *ts, Py_ssize_t bound, Py_ssize_t budget) {
    if (bound > budget) return Py_None;
    PyObject *closed = PyObject_GetAttr(s->producer, S_closed);
    if (closed == NULL) return NULL;
    int is_closed = PyObject_IsTrue(closed);
    Py_DECREF(closed);
    if (is_closed) return is_closed < 0 ? NULL : Py_None;
    PyObject *b = PyDict_GetItemWithError(s->open, tp); /* borrowed */
    if (b == NULL) return PyErr_Occurred() ? NULL : Py_None;
    if (Py_TYPE(b) != s->batch_type) return Py_None;
    PyObject *values = SLOT(b, s->b_values), *size_o = SLOT(b, s->b_size);
    if (values == NULL || !PyList_CheckExact(values) || size_o == NULL || !PyLong_CheckExact(size_o)) return Py_None;
    Py_ssize_t n = PyList_GET_SIZE(values);
    Py_ssize_t size = PyLong_AsSsize_t(size_o);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (n == 0 || size + bound > budget) return Py_None; /* a batch to open or ship: Python does it */

    PyObject *fut = s->future_type->tp_alloc(s->future_type, 0);
    if (fut == NULL) return NULL;
    PyObject *index = PyLong_FromSsize_t(n);
    PyObject *nsize = PyLong_FromSsize_t(size + bound);
    if (index == NULL || nsize == NULL) {
        Py_XDECREF(index);
        Py_XDECREF(nsize);
        Py_DECREF(fut);
        return NULL;
    }
    SLOT(fut, s->f_producer) = Py_NewRef(s->producer);
    SLOT(fut, s->f_batch) = Py_NewRef(b);
    SLOT(fut, s->f_index) = index;
    Py_INCREF(b); /* keep it while appending: nothing below releases the GIL, but be safe */
    if (PyList_Append(values, value) < 0 || append_slot(b, s->b_keys, key) < 0 ||
        append_slot(b, s->b_headers, headers) < 0 || append_slot(b, s->b_timestamps, ts) < 0) {
        Py_DECREF(b);
        Py_DECREF(nsize);
        Py_DECREF(fut);
        return NULL;
    }
    Py_XSETREF(SLOT(b, s->b_size), nsize);
    Py_DECREF(b);
    if (size + bound >= budget) {
        PyObject *r = PyObject_CallMethodOneArg(s->producer, S_ship, tp);
        if (r == NULL) {
            Py_DECREF(fut);
            return NULL;
        }
        Py_DECREF(r);
    }
    return fut;
}

/* send(topic, value=None, key=None, *, headers=None, partition=None, timestamp_ms=None) -> RecordFuture */
static PyObject *sp_send(SendPath *s, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *names[] = {"topic", "value", "key", "headers", "partition", "timestamp_ms"};
    PyObject *a[6] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "send() takes from 2 to 4 positional arguments but %zd were given", nargs + 1);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) a[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = 0;
        for (int j = 0; j < 6; j++) {
            if (PyUnicode_CompareWithASCIIString(name, names[j]) == 0) {
                if (j < nargs) {
                    PyErr_Format(PyExc_TypeError, "send() got multiple values for argument '%s'", names[j]);
                    return NULL;
                }
                a[j] = args[nargs + k];
                found = 1;
                break;
            }
        }
        if (!found) {
            PyErr_Format(PyExc_TypeError, "send() got an unexpected keyword argument '%U'", name);
            return NULL;
        }
    }
    if (a[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "send() missing 1 required positional argument: 'topic'");
        return NULL;
    }
    PyObject *topic = a[0], *headers = a[3], *partition = a[4], *timestamp_ms = a[5];
    PyObject *value = NULL, *key = NULL, *info = NULL, *part = NULL, *ts = NULL, *tp = NULL, *out = NULL;

    value = s->value_ser != Py_None ? PyObject_CallOneArg(s->value_ser, a[1]) : Py_NewRef(a[1]);
    if (value == NULL) goto done;
    key = (a[2] != Py_None && s->key_ser != Py_None) ? PyObject_CallOneArg(s->key_ser, a[2]) : Py_NewRef(a[2]);
    if (key == NULL) goto done;

    info = PyDict_GetItemWithError(s->topics, topic); /* borrowed */
    if (info == NULL && PyErr_Occurred()) goto done;
    if (info != NULL) {
        PyObject *route = PyDict_GetItemWithError(s->routes, topic);
        if (route == NULL && PyErr_Occurred()) goto done;
        if (!PyTuple_CheckExact(info) || PyTuple_GET_SIZE(info) != 3 || PyTuple_GET_ITEM(info, 0) != route)
            info = NULL;
    }
    info = info != NULL ? Py_NewRef(info) : PyObject_CallMethodOneArg(s->producer, S_topic_info, topic);
    if (info == NULL) goto done;
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(info, 1));
    Py_ssize_t budget = PyLong_AsSsize_t(PyTuple_GET_ITEM(info, 2));
    if (PyErr_Occurred()) goto done;

    part = choose(s, topic, key, partition, n);
    if (part == NULL) goto done;

    if (timestamp_ms == Py_None) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        ts = PyLong_FromLongLong((long long)t.tv_sec * 1000 + t.tv_nsec / 1000000);
    } else {
        ts = Py_NewRef(timestamp_ms);
    }
    if (ts == NULL) goto done;

    Py_ssize_t bound = -1;
    int has_headers = PyObject_IsTrue(headers);
    if (has_headers < 0) goto done;
    if (!has_headers) {
        Py_ssize_t vl = size_of(value), kl = size_of(key);
        if (vl < 0 || kl < 0) goto done;
        bound = s->overhead + vl + kl;
    }
    tp = PyTuple_Pack(2, topic, part);
    if (tp == NULL) goto done;

    if (bound >= 0) {
        PyObject *r = PyObject_CallMethodNoArgs(s->lock, S_acquire);
        if (r == NULL) goto done;
        Py_DECREF(r);
        out = locked_append(s, tp, value, key, headers, ts, bound, budget);
        PyObject *et, *ev, *etb;
        PyErr_Fetch(&et, &ev, &etb);
        r = PyObject_CallMethodNoArgs(s->lock, S_release);
        if (r == NULL) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(etb);
            if (out != Py_None) Py_XDECREF(out);
            out = NULL;
            goto done;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, etb);
        if (out != Py_None) goto done; /* the future, or NULL with the error */
    }
    /* Everything else (headers, a batch to open or ship, too large, closed): Python's path. */
    PyObject *bo = PyLong_FromSsize_t(bound);
    PyObject *bu = PyLong_FromSsize_t(budget);
    if (bo == NULL || bu == NULL) {
        Py_XDECREF(bo);
        Py_XDECREF(bu);
        out = NULL;
        goto done;
    }
    out = PyObject_CallMethodObjArgs(s->producer, S_send_locked, topic, part, value, key, headers, ts, bo, bu,
                                     NULL);
    Py_DECREF(bo);
    Py_DECREF(bu);
done:
    Py_XDECREF(value);
    Py_XDECREF(key);
    Py_XDECREF(info);
    Py_XDECREF(part);
    Py_XDECREF(ts);
    Py_XDECREF(tp);
    return out;
}

static PyMethodDef sp_methods[] = {
    {"send", (PyCFunction)(void (*)(void))sp_send, METH_FASTCALL | METH_KEYWORDS,
     "send(topic, value=None, key=None, *, headers=None, partition=None, timestamp_ms=None): Producer.send"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SendPathType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logan_ray._send_path.SendPath",
    .tp_basicsize = sizeof(SendPath),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Producer.send's common case in C (see the module's docstring)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sp_init,
    .tp_dealloc = (destructor)sp_dealloc,
    .tp_traverse = (traverseproc)sp_traverse,
    .tp_clear = (inquiry)sp_clear,
    .tp_methods = sp_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_send_path", "Compiled Producer.send", -1, NULL};

PyMODINIT_FUNC PyInit__send_path(void) {
#define INTERN(var, s) if ((var = PyUnicode_InternFromString(s)) == NULL) return NULL
    INTERN(S_acquire, "acquire");
    INTERN(S_release, "release");
    INTERN(S_closed, "_closed");
    INTERN(S_topic_info, "_topic_info");
    INTERN(S_new_sticky, "_new_sticky");
    INTERN(S_bad_partition, "_bad_partition");
    INTERN(S_send_locked, "_send_locked");
    INTERN(S_ship, "_ship");
#undef INTERN
    if (PyType_Ready(&SendPathType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "SendPath", (PyObject *)&SendPathType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
