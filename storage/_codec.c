/* Compiled inside of the Kafka v2 record codec (storage/records.py).
 *
 * Why this exists: the record codec is the only per-record work in logan-ray
 * (producers build records, consumers, Ray Data, the group coordinator's replay
 * and compaction decode them). In Python each record costs ~4 us; here it costs
 * tens of ns. storage/records.py keeps a pure-Python implementation of every
 * function below that gives identical results (tests run both) and is used when
 * this module was not built.
 *
 * Nothing here does I/O, CRC checks or decompression: records.py validates and
 * decompresses whole batches, then hands one decompressed records blob to these
 * functions. Every read is bounds-checked; malformed input raises the
 * CorruptRecordError class registered by setup().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "murmur2.h"
#include <structmember.h>
#include <stdint.h>
#include <string.h>

static PyObject *Corrupt = NULL;      /* storage.errors.CorruptRecordError */
static PyTypeObject *RecordType = NULL; /* storage.records.Record (slots dataclass) */
static PyObject *ColumnType = NULL;   /* storage.records.Column: (starts, lengths, data) buffers */
static Py_ssize_t OFF_OFFSET, OFF_TS, OFF_KEY, OFF_VALUE, OFF_HEADERS;
static PyObject *EMPTY = NULL;         /* () */

/* ------------------------------------------------------------------ errors */

static void *bad(Py_ssize_t where, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyErr_Format(Corrupt ? Corrupt : PyExc_ValueError, "corrupt record at byte %zd of the records: %s", where, msg);
    return NULL;
}

/* ------------------------------------------------------------------ varints */

/* Zigzag varint of at most max_bytes bytes at *p (< end). 0 on success, -1 (error set) otherwise. */
static inline int rd_var(const uint8_t *buf, Py_ssize_t *p, Py_ssize_t end, int max_bytes, int64_t *out,
                         Py_ssize_t rec) {
    Py_ssize_t q = *p;
    if (q < end && buf[q] < 0x80) {
        uint8_t b = buf[q];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *p = q + 1;
        return 0;
    }
    uint64_t u = 0;
    int shift = 0;
    for (int i = 0;; i++) {
        if (q >= end) {
            bad(rec, "records truncated");
            return -1;
        }
        if (i >= max_bytes) {
            bad(rec, "varint too long: more than %d bytes", max_bytes);
            return -1;
        }
        uint8_t b = buf[q++];
        u |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
        shift += 7;
    }
    if (max_bytes == 5 && u > 0xFFFFFFFFull) {
        bad(rec, "varint exceeds 32 bits");
        return -1;
    }
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    *p = q;
    return 0;
}

static inline Py_ssize_t var_size(uint64_t z) {
    Py_ssize_t n = 1;
    while (z >= 0x80) { z >>= 7; n++; }
    return n;
}

static inline uint64_t zz32(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline uint8_t *wr_var(uint8_t *o, uint64_t z) {
    while (z >= 0x80) { *o++ = (uint8_t)(z | 0x80); z >>= 7; }
    *o++ = (uint8_t)z;
    return o;
}

/* ------------------------------------------------------------------ setup */

static Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *d = PyObject_GetAttrString(cls, name);
    if (d == NULL) return -1;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        Py_DECREF(d);
        PyErr_Format(PyExc_TypeError, "Record.%s is not an object slot", name);
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return off;
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *rec, *exc, *col;
    if (!PyArg_ParseTuple(args, "O!OO!", &PyType_Type, &rec, &exc, &PyType_Type, &col)) return NULL;
    if ((OFF_OFFSET = slot_offset(rec, "offset")) < 0 || (OFF_TS = slot_offset(rec, "timestamp")) < 0 ||
        (OFF_KEY = slot_offset(rec, "key")) < 0 || (OFF_VALUE = slot_offset(rec, "value")) < 0 ||
        (OFF_HEADERS = slot_offset(rec, "headers")) < 0)
        return NULL;
    Py_XSETREF(RecordType, (PyTypeObject *)Py_NewRef(rec));
    Py_XSETREF(Corrupt, Py_NewRef(exc));
    Py_XSETREF(ColumnType, Py_NewRef(col));
    Py_RETURN_NONE;
}

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* Records hold only ints, bytes, str and tuples of those: they can never be part of a
 * reference cycle, so the cyclic GC need not track them. Without this, decoding a
 * million records makes the GC's full collections walk every record again and again
 * (it measured 8x slower). Only objects the GC tracks are untracked. */
static inline void untrack(PyObject *o) {
    if (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o)) PyObject_GC_UnTrack(o);
}

/* ------------------------------------------------------------------ decoding */

/* Headers of one record starting after its header count. Returns a new tuple or NULL. */
static PyObject *read_headers(const uint8_t *d, Py_ssize_t *pp, Py_ssize_t end, int64_t hc, Py_ssize_t rec) {
    if (hc < 0) return bad(rec, "negative header count %lld", (long long)hc);
    if (hc > end - *pp) return bad(rec, "header count %lld overruns the record", (long long)hc);
    PyObject *out = PyTuple_New((Py_ssize_t)hc);
    if (out == NULL) return NULL;
    Py_ssize_t p = *pp;
    for (Py_ssize_t i = 0; i < hc; i++) {
        int64_t kl, vl;
        if (rd_var(d, &p, end, 5, &kl, rec) < 0) goto fail;
        if (kl < 0) { bad(rec, "header key length %lld", (long long)kl); goto fail; }
        if (kl > end - p) { bad(rec, "header key overruns the records"); goto fail; }
        PyObject *k = PyUnicode_DecodeUTF8((const char *)d + p, (Py_ssize_t)kl, "strict");
        if (k == NULL) {
            PyErr_Clear();
            bad(rec, "header key is not UTF-8");
            goto fail;
        }
        p += kl;
        if (rd_var(d, &p, end, 5, &vl, rec) < 0) { Py_DECREF(k); goto fail; }
        PyObject *v;
        if (vl >= 0) {
            if (vl > end - p) { Py_DECREF(k); bad(rec, "header value overruns the records"); goto fail; }
            v = PyBytes_FromStringAndSize((const char *)d + p, (Py_ssize_t)vl);
            p += vl;
        } else if (vl == -1) {
            v = Py_NewRef(Py_None);
        } else {
            Py_DECREF(k);
            bad(rec, "header value length %lld", (long long)vl);
            goto fail;
        }
        if (v == NULL) { Py_DECREF(k); goto fail; }
        PyObject *pair = PyTuple_Pack(2, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (pair == NULL) goto fail;
        PyObject_GC_UnTrack(pair);
        PyTuple_SET_ITEM(out, i, pair);
    }
    *pp = p;
    PyObject_GC_UnTrack(out);
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* The fields of one record; key/value positions with length -1 for null. */
typedef struct {
    Py_ssize_t start, end;       /* whole record incl. its length prefix */
    int64_t ts_delta, off_delta;
    Py_ssize_t kpos, vpos;
    int64_t klen, vlen;
    Py_ssize_t hpos;              /* just after the header count */
    int64_t hcount;
} rec_t;

/* Parse the record at *pp (bounded by n); the caller reads headers from r->hpos.
 * raw: stop after the value length (what compaction's scan checks), skip to the record's end. */
static int parse_record(const uint8_t *d, Py_ssize_t *pp, Py_ssize_t n, rec_t *r, int raw) {
    Py_ssize_t p = *pp;
    int64_t ln;
    r->start = p;
    if (rd_var(d, &p, n, 5, &ln, p) < 0) return -1;
    if (ln < 0 || ln > n - p) { bad(r->start, "records truncated: record length %lld overruns the %zd bytes left", (long long)ln, n - p); return -1; }
    Py_ssize_t end = p + (Py_ssize_t)ln;
    r->end = end;
    if (p >= end) { bad(r->start, "records truncated"); return -1; }
    p++; /* attributes */
    if (rd_var(d, &p, end, 10, &r->ts_delta, r->start) < 0) return -1;
    if (rd_var(d, &p, end, 5, &r->off_delta, r->start) < 0) return -1;
    if (rd_var(d, &p, end, 5, &r->klen, r->start) < 0) return -1;
    if (r->klen < -1) { bad(r->start, "key length %lld", (long long)r->klen); return -1; }
    r->kpos = p;
    if (r->klen > 0) {
        if (r->klen > end - p) { bad(r->start, "records truncated: key overruns its record"); return -1; }
        p += r->klen;
    }
    if (rd_var(d, &p, end, 5, &r->vlen, r->start) < 0) return -1;
    if (r->vlen < -1) { bad(r->start, "value length %lld", (long long)r->vlen); return -1; }
    r->vpos = p;
    if (r->vlen > 0) {
        if (r->vlen > end - p) { bad(r->start, "records truncated: value overruns its record"); return -1; }
        p += r->vlen;
    }
    if (raw) {
        r->hcount = 0;
        *pp = end;
        return 0;
    }
    if (rd_var(d, &p, end, 5, &r->hcount, r->start) < 0) return -1;
    r->hpos = p;
    if (r->hcount == 0 && p != end) {
        bad(r->start, "record length %lld does not match its fields", (long long)ln);
        return -1;
    }
    *pp = end;
    return 0;
}

static PyObject *bytes_or_none(const uint8_t *d, Py_ssize_t pos, int64_t len) {
    if (len < 0) return Py_NewRef(Py_None);
    return PyBytes_FromStringAndSize((const char *)d + pos, (Py_ssize_t)len);
}

/* Headers of a parsed record (empty tuple when it has none); checks the record length. */
static PyObject *record_headers(const uint8_t *d, rec_t *r) {
    if (r->hcount == 0) return Py_NewRef(EMPTY);
    Py_ssize_t p = r->hpos;
    PyObject *h = read_headers(d, &p, r->end, r->hcount, r->start);
    if (h == NULL) return NULL;
    if (p != r->end) {
        Py_DECREF(h);
        return bad(r->start, "record length does not match its fields");
    }
    return h;
}

/* decode_blob(data, base_offset, base_ts, max_ts, log_append_time, count) -> list[Record] */
static PyObject *decode_blob(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long base_off, base_ts, max_ts;
    int lat;
    Py_ssize_t count;
    if (RecordType == NULL) return PyErr_Format(PyExc_RuntimeError, "_codec.setup() was not called");
    if (!PyArg_ParseTuple(args, "y*LLLpn", &buf, &base_off, &base_ts, &max_ts, &lat, &count)) return NULL;
    const uint8_t *d = buf.buf;
    Py_ssize_t n = buf.len, p = 0;
    if (count < 0) { PyBuffer_Release(&buf); return bad(0, "negative record count %zd", count); }
    PyObject *out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_t r;
        if (p >= n) { bad(p, "records truncated (%zd bytes for %zd records)", n, count); goto fail; }
        if (parse_record(d, &p, n, &r, 0) < 0) goto fail;
        PyObject *hdrs = record_headers(d, &r);
        if (hdrs == NULL) goto fail;
        PyObject *o = RecordType->tp_alloc(RecordType, 0);
        if (o == NULL) { Py_DECREF(hdrs); goto fail; }
        SLOT(o, OFF_HEADERS) = hdrs;
        if ((SLOT(o, OFF_OFFSET) = PyLong_FromLongLong(base_off + r.off_delta)) == NULL ||
            (SLOT(o, OFF_TS) = PyLong_FromLongLong(lat ? max_ts : base_ts + r.ts_delta)) == NULL ||
            (SLOT(o, OFF_KEY) = bytes_or_none(d, r.kpos, r.klen)) == NULL ||
            (SLOT(o, OFF_VALUE) = bytes_or_none(d, r.vpos, r.vlen)) == NULL) {
            Py_DECREF(o);
            goto fail;
        }
        untrack(o);
        int rc = PyList_Append(out, o);
        Py_DECREF(o);
        if (rc < 0) goto fail;
    }
    if (p != n) { bad(p, "%zd trailing bytes after %zd records", n - p, count); goto fail; }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&buf);
    return out;
}

/* decode_tuples(data, base_offset, base_ts, max_ts, lat, count, tuple_type, topic, partition, min_offset)
 *   -> list of tuple_type(topic, partition, offset, timestamp, key, value, headers) for offset >= min_offset.
 * The consumer's records, made in one step instead of via Record. */
static PyObject *decode_tuples(PyObject *self, PyObject *args) {
    Py_buffer buf;
    long long base_off, base_ts, max_ts, min_off;
    int lat;
    Py_ssize_t count;
    PyTypeObject *tt;
    PyObject *topic, *partition;
    if (!PyArg_ParseTuple(args, "y*LLLpnO!OOL", &buf, &base_off, &base_ts, &max_ts, &lat, &count, &PyType_Type, &tt,
                          &topic, &partition, &min_off))
        return NULL;
    const uint8_t *d = buf.buf;
    Py_ssize_t n = buf.len, p = 0;
    PyObject *out = NULL;
    if (!PyType_IsSubtype(tt, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "tuple_type must be a tuple subclass");
        goto done;
    }
    if (count < 0) { bad(0, "negative record count %zd", count); goto done; }
    out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_t r;
        if (p >= n) { bad(p, "records truncated (%zd bytes for %zd records)", n, count); goto fail; }
        if (parse_record(d, &p, n, &r, 0) < 0) goto fail;
        PyObject *hdrs = record_headers(d, &r);
        if (hdrs == NULL) goto fail;
        if (base_off + r.off_delta < min_off) { Py_DECREF(hdrs); continue; }
        PyObject *o = tt->tp_alloc(tt, 7);
        if (o == NULL) { Py_DECREF(hdrs); goto fail; }
        PyTuple_SET_ITEM(o, 0, Py_NewRef(topic));
        PyTuple_SET_ITEM(o, 1, Py_NewRef(partition));
        PyTuple_SET_ITEM(o, 6, hdrs);
        PyObject *a, *b, *c, *e;
        if ((a = PyLong_FromLongLong(base_off + r.off_delta)) == NULL) { Py_DECREF(o); goto fail; }
        PyTuple_SET_ITEM(o, 2, a);
        if ((b = PyLong_FromLongLong(lat ? max_ts : base_ts + r.ts_delta)) == NULL) { Py_DECREF(o); goto fail; }
        PyTuple_SET_ITEM(o, 3, b);
        if ((c = bytes_or_none(d, r.kpos, r.klen)) == NULL) { Py_DECREF(o); goto fail; }
        PyTuple_SET_ITEM(o, 4, c);
        if ((e = bytes_or_none(d, r.vpos, r.vlen)) == NULL) { Py_DECREF(o); goto fail; }
        PyTuple_SET_ITEM(o, 5, e);
        untrack(o);
        int rc = PyList_Append(out, o);
        Py_DECREF(o);
        if (rc < 0) goto fail;
    }
    if (p != n) { bad(p, "%zd trailing bytes after %zd records", n - p, count); goto fail; }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&buf);
    return out;
}

/* scan_raw(data, pos, stop, count) -> (keys, offset_deltas, ts_deltas, value_is_null, starts + [end])
 * What compaction and scan_batch_raw need: no value bytes are copied. */
static PyObject *scan_raw(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, stop, count;
    if (!PyArg_ParseTuple(args, "y*nnn", &buf, &pos, &stop, &count)) return NULL;
    PyObject *keys = NULL, *ods = NULL, *tsds = NULL, *nulls = NULL, *starts = NULL, *res = NULL;
    const uint8_t *d = buf.buf;
    if (pos < 0 || stop > buf.len || pos > stop || count < 0) {
        PyErr_SetString(PyExc_ValueError, "scan_raw: bad range");
        goto done;
    }
    if (!(keys = PyList_New(count)) || !(ods = PyList_New(count)) || !(tsds = PyList_New(count)) ||
        !(nulls = PyList_New(count)) || !(starts = PyList_New(count + 1)))
        goto done;
    Py_ssize_t p = pos;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_t r;
        if (p >= stop) { bad(p - pos, "records truncated (%zd bytes for %zd records)", stop - pos, count); goto done; }
        if (parse_record(d, &p, stop, &r, 1) < 0) goto done;
        PyObject *k = bytes_or_none(d, r.kpos, r.klen);
        PyObject *od = PyLong_FromLongLong(r.off_delta);
        PyObject *td = PyLong_FromLongLong(r.ts_delta);
        PyObject *st = PyLong_FromSsize_t(r.start);
        PyList_SET_ITEM(keys, i, k);
        PyList_SET_ITEM(ods, i, od);
        PyList_SET_ITEM(tsds, i, td);
        PyList_SET_ITEM(nulls, i, Py_NewRef(r.vlen == -1 ? Py_True : Py_False));
        PyList_SET_ITEM(starts, i, st);
        if (!k || !od || !td || !st) goto done;
    }
    if (p != stop) { bad(p - pos, "%zd trailing bytes after %zd records", stop - p, count); goto done; }
    PyObject *e = PyLong_FromSsize_t(p);
    if (e == NULL) goto done;
    PyList_SET_ITEM(starts, count, e);
    res = PyTuple_Pack(5, keys, ods, tsds, nulls, starts);
done:
    Py_XDECREF(keys);
    Py_XDECREF(ods);
    Py_XDECREF(tsds);
    Py_XDECREF(nulls);
    Py_XDECREF(starts);
    PyBuffer_Release(&buf);
    return res;
}

/* ------------------------------------------------------------------ columns */

/* A new output buffer of n bytes and its address: bytes, or ``alloc(n)`` when given.
 * ``alloc`` (e.g. pyarrow.allocate_buffer) lets the caller take memory from a pool that
 * reuses pages: a fresh 8 MiB bytes object costs ~2000 page faults, more than decoding
 * into it. The address stays valid while the object lives and is not resized. */
static PyObject *out_new(PyObject *alloc, Py_ssize_t n, char **ptr) {
    if (alloc == NULL) {
        PyObject *o = PyBytes_FromStringAndSize(NULL, n);
        if (o != NULL) *ptr = PyBytes_AS_STRING(o);
        return o;
    }
    PyObject *o = PyObject_CallFunction(alloc, "n", n);
    if (o == NULL) return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_WRITABLE) < 0) {
        Py_DECREF(o);
        return NULL;
    }
    int short_buffer = v.len < n;
    *ptr = v.buf;
    PyBuffer_Release(&v);
    if (short_buffer) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_ValueError, "columns: alloc returned a buffer shorter than asked");
        return NULL;
    }
    return o;
}

/* Shrinks an output to n bytes: bytes in place, an alloc'd buffer by its resize(n, True)
 * (pyarrow.ResizableBuffer's, which gives the pool back the rest). */
static int out_trim(PyObject **o, Py_ssize_t n) {
    if (PyBytes_CheckExact(*o)) return _PyBytes_Resize(o, n);
    PyObject *r = PyObject_CallMethod(*o, "resize", "nO", n, Py_True);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* A growable binary column: offsets (int32 or int64) + data + one validity byte per row. */
typedef struct {
    PyObject *offsets, *data, *valid;
    char *off, *dat, *val;
    Py_ssize_t used, nulls;
    int wide;
} col_t;

static int col_init(col_t *c, Py_ssize_t rows, Py_ssize_t cap, int wide, PyObject *alloc) {
    c->wide = wide;
    c->used = 0;
    c->nulls = 0;
    c->offsets = out_new(alloc, (rows + 1) * (wide ? 8 : 4), &c->off);
    c->data = c->offsets ? out_new(alloc, cap, &c->dat) : NULL;
    c->valid = c->data ? out_new(alloc, rows, &c->val) : NULL;
    return (c->offsets && c->data && c->valid) ? 0 : -1;
}

static void col_free(col_t *c) {
    Py_CLEAR(c->offsets);
    Py_CLEAR(c->data);
    Py_CLEAR(c->valid);
}

static inline void col_put(col_t *c, Py_ssize_t row, const uint8_t *src, int64_t len) {
    char *off = c->off;
    if (c->wide) ((int64_t *)off)[row] = c->used; else ((int32_t *)off)[row] = (int32_t)c->used;
    if (len < 0) {
        c->val[row] = 0;
        c->nulls++;
    } else {
        c->val[row] = 1;
        memcpy(c->dat + c->used, src, (size_t)len);
        c->used += len;
    }
}

static PyObject *col_finish(col_t *c, Py_ssize_t rows) {
    char *off = c->off;
    if (c->wide) ((int64_t *)off)[rows] = c->used; else ((int32_t *)off)[rows] = (int32_t)c->used;
    if (out_trim(&c->offsets, (rows + 1) * (c->wide ? 8 : 4)) < 0 || out_trim(&c->data, c->used) < 0 ||
        out_trim(&c->valid, rows) < 0)
        return NULL;
    return Py_BuildValue("(OOOn)", c->offsets, c->data, c->valid, c->nulls);
}

/* columns(blob, batches, start, end, want_key, want_value[, alloc])
 *   batches: sequence of (pos, stop, count, base_offset, base_ts, max_ts, log_append_time)
 *   Records with start <= offset < end (end < 0: no end), in order.
 * -> (rows, offsets int64, timestamps int64, ts_type int32, key col or None, value col or None, headers)
 *    col = (offsets int32|int64 bytes, data bytes, validity bytes (1 byte/row), null count),
 *    headers = list of (row, headers tuple) for the rows that carry headers.
 *    With ``alloc`` (a callable n -> writable buffer of >= n bytes with a resize(n, shrink)
 *    method, e.g. pyarrow.allocate_buffer(n, resizable=True)) every buffer comes from it.
 * Every record is fully validated whatever columns are wanted. */
static PyObject *columns(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *batches, *alloc = Py_None;
    long long lo, hi;
    int want_key, want_value;
    if (!PyArg_ParseTuple(args, "y*OLLpp|O", &buf, &batches, &lo, &hi, &want_key, &want_value, &alloc)) return NULL;
    if (alloc == Py_None) alloc = NULL;
    const uint8_t *d = buf.buf;
    PyObject *seq = NULL, *offs = NULL, *tss = NULL, *tts = NULL, *hdrs = NULL, *res = NULL, *kc = NULL, *vc = NULL;
    col_t kcol = {0}, vcol = {0};
    seq = PySequence_Fast(batches, "batches must be a sequence");
    if (seq == NULL) goto done;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(seq), total = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, b);
        Py_ssize_t pos, stop, cnt;
        long long bo, bt, mt;
        int lat;
        if (!PyArg_ParseTuple(t, "nnnLLLp", &pos, &stop, &cnt, &bo, &bt, &mt, &lat)) goto done;
        if (pos < 0 || stop > buf.len || pos > stop || cnt < 0) {
            PyErr_SetString(PyExc_ValueError, "columns: bad batch range");
            goto done;
        }
        total += cnt;
    }
    int wide = buf.len >= 0x7FFFFFFF;
    char *op, *tp, *ttp;
    if (!(offs = out_new(alloc, total * 8, &op)) || !(tss = out_new(alloc, total * 8, &tp)) ||
        !(tts = out_new(alloc, total * 4, &ttp)) || !(hdrs = PyList_New(0)))
        goto done;
    if (want_key && col_init(&kcol, total, buf.len, wide, alloc) < 0) goto done;
    if (want_value && col_init(&vcol, total, buf.len, wide, alloc) < 0) goto done;
    int64_t *O = (int64_t *)op, *T = (int64_t *)tp;
    int32_t *TT = (int32_t *)ttp;
    Py_ssize_t row = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        Py_ssize_t pos, stop, cnt;
        long long bo, bt, mt;
        int lat;
        PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, b), "nnnLLLp", &pos, &stop, &cnt, &bo, &bt, &mt, &lat);
        Py_ssize_t p = pos;
        for (Py_ssize_t i = 0; i < cnt; i++) {
            rec_t r;
            if (p >= stop) { bad(p - pos, "records truncated (%zd bytes for %zd records)", stop - pos, cnt); goto done; }
            if (parse_record(d, &p, stop, &r, 0) < 0) goto done;
            PyObject *h = record_headers(d, &r);
            if (h == NULL) goto done;
            int64_t off = bo + r.off_delta;
            if (off < lo || (hi >= 0 && off >= hi)) { Py_DECREF(h); continue; }
            if (r.hcount != 0) {
                PyObject *pair = Py_BuildValue("(nN)", row, h);
                if (pair == NULL || PyList_Append(hdrs, pair) < 0) { Py_XDECREF(pair); goto done; }
                Py_DECREF(pair);
            } else {
                Py_DECREF(h);
            }
            O[row] = off;
            T[row] = lat ? mt : bt + r.ts_delta;
            TT[row] = lat ? 1 : 0;
            if (want_key) col_put(&kcol, row, d + r.kpos, r.klen);
            if (want_value) col_put(&vcol, row, d + r.vpos, r.vlen);
            row++;
        }
        if (p != stop) { bad(p - pos, "%zd trailing bytes after %zd records", stop - p, cnt); goto done; }
    }
    if (out_trim(&offs, row * 8) < 0 || out_trim(&tss, row * 8) < 0 || out_trim(&tts, row * 4) < 0)
        goto done;
    if (want_key && (kc = col_finish(&kcol, row)) == NULL) goto done;
    if (want_value && (vc = col_finish(&vcol, row)) == NULL) goto done;
    res = Py_BuildValue("(nOOOOOO)", row, offs, tss, tts, kc ? kc : Py_None, vc ? vc : Py_None, hdrs);
done:
    Py_XDECREF(seq);
    Py_XDECREF(offs);
    Py_XDECREF(tss);
    Py_XDECREF(tts);
    Py_XDECREF(hdrs);
    Py_XDECREF(kc);
    Py_XDECREF(vc);
    col_free(&kcol);
    col_free(&vcol);
    PyBuffer_Release(&buf);
    return res;
}

/* ------------------------------------------------------------------ building */

/* One field source: either a Python sequence of bytes-like/None, or column buffers
 * (starts int64[n], lengths int64[n] with -1 = null, data). */
typedef struct {
    PyObject *fast;        /* PySequence_Fast or NULL */
    Py_buffer starts, lens, data;
    int is_col;
    int present;
} src_t;

static int src_open(src_t *s, PyObject *obj, Py_ssize_t n, const char *what) {
    memset(s, 0, sizeof *s);
    if (obj == Py_None) return 0;
    s->present = 1;
    if ((PyObject *)Py_TYPE(obj) == ColumnType && PyTuple_GET_SIZE(obj) == 3) {
        s->is_col = 1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 0), &s->starts, PyBUF_SIMPLE) < 0) return -1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 1), &s->lens, PyBUF_SIMPLE) < 0) return -1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 2), &s->data, PyBUF_SIMPLE) < 0) return -1;
        if (s->starts.len != n * 8 || s->lens.len != n * 8) {
            PyErr_Format(PyExc_ValueError, "%s column: starts/lengths need %zd int64s", what, n);
            return -1;
        }
        const int64_t *st = s->starts.buf, *ln = s->lens.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (ln[i] < -1 || (ln[i] >= 0 && (st[i] < 0 || st[i] + ln[i] > s->data.len))) {
                PyErr_Format(PyExc_ValueError, "%s column: row %zd lies outside its data", what, i);
                return -1;
            }
        }
        return 0;
    }
    s->fast = PySequence_Fast(obj, "keys/values must be a sequence");
    if (s->fast == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(s->fast) != n) {
        PyErr_Format(PyExc_ValueError, "%zd %s for %zd values", PySequence_Fast_GET_SIZE(s->fast), what, n);
        return -1;
    }
    return 0;
}

static void src_close(src_t *s) {
    Py_CLEAR(s->fast);
    if (s->starts.obj) PyBuffer_Release(&s->starts);
    if (s->lens.obj) PyBuffer_Release(&s->lens);
    if (s->data.obj) PyBuffer_Release(&s->data);
}

/* Pointer and length (-1: null) of row i. For a bytes-like object that is not
 * bytes, *view gets a buffer the caller releases. */
static int src_get(src_t *s, Py_ssize_t i, const char **ptr, int64_t *len, Py_buffer *view) {
    view->obj = NULL;
    if (!s->present) { *len = -1; *ptr = NULL; return 0; }
    if (s->is_col) {
        *len = ((const int64_t *)s->lens.buf)[i];
        *ptr = (const char *)s->data.buf + (*len >= 0 ? ((const int64_t *)s->starts.buf)[i] : 0);
        return 0;
    }
    PyObject *o = PySequence_Fast_GET_ITEM(s->fast, i);
    if (o == Py_None) { *len = -1; *ptr = NULL; return 0; }
    if (PyBytes_Check(o)) { *len = PyBytes_GET_SIZE(o); *ptr = PyBytes_AS_STRING(o); return 0; }
    if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "sequence item %zd: expected a bytes-like object or None, %.80s found", i,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *len = view->len;
    *ptr = view->buf;
    return 0;
}

/* Header bytes of record i (a sequence of (str, bytes|None) pairs); appended to *out (malloc'd). */
static int enc_headers(PyObject *hs, char **out, Py_ssize_t *olen) {
    *out = NULL;
    *olen = 0;
    if (hs == Py_None) return 0;
    PyObject *f = PySequence_Fast(hs, "record headers must be a sequence of (str, bytes) pairs");
    if (f == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f), cap = 5;
    PyObject **items = PySequence_Fast_ITEMS(f);
    /* first pass: size */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = items[i];
        if (!PyTuple_Check(pair) && !PyList_Check(pair)) goto badpair;
        if (PySequence_Size(pair) != 2) goto badpair;
        PyObject *k = PySequence_GetItem(pair, 0), *v = PySequence_GetItem(pair, 1);
        Py_ssize_t kl;
        if (!PyUnicode_Check(k)) {
            PyErr_Format(PyExc_TypeError, "record header key must be str, got %.80s", Py_TYPE(k)->tp_name);
            Py_DECREF(k);
            Py_DECREF(v);
            Py_DECREF(f);
            return -1;
        }
        if (PyUnicode_AsUTF8AndSize(k, &kl) == NULL) { Py_DECREF(k); Py_DECREF(v); Py_DECREF(f); return -1; }
        cap += 10 + kl;
        if (v != Py_None) {
            Py_buffer vb;
            if (PyObject_GetBuffer(v, &vb, PyBUF_SIMPLE) < 0) { Py_DECREF(k); Py_DECREF(v); Py_DECREF(f); return -1; }
            cap += vb.len;
            PyBuffer_Release(&vb);
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    uint8_t *o = PyMem_Malloc(cap), *w = o;
    if (o == NULL) { Py_DECREF(f); PyErr_NoMemory(); return -1; }
    w = wr_var(w, zz32(n));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PySequence_GetItem(items[i], 0), *v = PySequence_GetItem(items[i], 1);
        Py_ssize_t kl;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kl);
        w = wr_var(w, zz32(kl));
        memcpy(w, ks, kl);
        w += kl;
        if (v == Py_None) {
            w = wr_var(w, 1);
        } else {
            Py_buffer vb;
            PyObject_GetBuffer(v, &vb, PyBUF_SIMPLE);
            w = wr_var(w, zz32(vb.len));
            memcpy(w, vb.buf, vb.len);
            w += vb.len;
            PyBuffer_Release(&vb);
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    Py_DECREF(f);
    *out = (char *)o;
    *olen = w - o;
    return 0;
badpair:
    Py_DECREF(f);
    PyErr_SetString(PyExc_TypeError, "record headers must be a sequence of (str, bytes) pairs");
    return -1;
}

/* build_records(count, values, keys, headers, ts_deltas) -> bytes: the records part of a batch.
 * values/keys: None (all null), a sequence of bytes-like/None, or (starts, lengths, data) column buffers;
 * headers: None or a sequence of header lists/None; ts_deltas: None (all 0) or a sequence of ints. */
static PyObject *build_records(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *vals, *keys, *headers, *tsd;
    if (!PyArg_ParseTuple(args, "nOOOO", &n, &vals, &keys, &headers, &tsd)) return NULL;
    src_t V, K;
    PyObject *H = NULL, *TS = NULL, *out = NULL;
    char **hbuf = NULL;
    Py_ssize_t *hlen = NULL;
    int64_t *tsv = NULL;
    if (src_open(&V, vals, n, "values") < 0 || src_open(&K, keys, n, "keys") < 0) goto done;
    if (headers != Py_None) {
        if (!(H = PySequence_Fast(headers, "headers must be a sequence"))) goto done;
        if (PySequence_Fast_GET_SIZE(H) != n) { PyErr_Format(PyExc_ValueError, "header lists do not match values"); goto done; }
        hbuf = PyMem_Calloc(n ? n : 1, sizeof(char *));
        hlen = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
        if (!hbuf || !hlen) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *hs = PySequence_Fast_GET_ITEM(H, i);
            if (hs != Py_None && PyObject_IsTrue(hs) != 1) continue;
            if (enc_headers(hs, &hbuf[i], &hlen[i]) < 0) goto done;
        }
    }
    if (tsd != Py_None) {
        if (!(TS = PySequence_Fast(tsd, "ts_deltas must be a sequence"))) goto done;
        if (PySequence_Fast_GET_SIZE(TS) != n) { PyErr_Format(PyExc_ValueError, "timestamps do not match values"); goto done; }
        tsv = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
        if (!tsv) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < n; i++) {
            tsv[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(TS, i));
            if (tsv[i] == -1 && PyErr_Occurred()) goto done;
        }
    }
    /* pass 1: total size */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *pv, *pk;
        int64_t lv, lk;
        Py_buffer bv, bk;
        if (src_get(&V, i, &pv, &lv, &bv) < 0) goto done;
        if (bv.obj) PyBuffer_Release(&bv);
        if (src_get(&K, i, &pk, &lk, &bk) < 0) goto done;
        if (bk.obj) PyBuffer_Release(&bk);
        if (lv > 0x7FFFFFFF || lk > 0x7FFFFFFF || i > 0x7FFFFFFF) {
            PyErr_SetString(PyExc_ValueError, "record too large for a varint length");
            goto done;
        }
        int64_t body = 1 + var_size(tsv ? zz32(tsv[i]) : 0) + var_size(zz32(i)) + var_size(zz32(lk)) + (lk > 0 ? lk : 0) +
                       var_size(zz32(lv)) + (lv > 0 ? lv : 0) + (hbuf && hbuf[i] ? hlen[i] : 1);
        if (body > 0x7FFFFFFF) { PyErr_SetString(PyExc_ValueError, "record too large"); goto done; }
        total += var_size(zz32(body)) + body;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) goto done;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *pv, *pk;
        int64_t lv, lk;
        Py_buffer bv, bk;
        if (src_get(&V, i, &pv, &lv, &bv) < 0) { Py_CLEAR(out); goto done; }
        if (src_get(&K, i, &pk, &lk, &bk) < 0) { if (bv.obj) PyBuffer_Release(&bv); Py_CLEAR(out); goto done; }
        uint64_t zt = tsv ? zz32(tsv[i]) : 0;
        int64_t body = 1 + var_size(zt) + var_size(zz32(i)) + var_size(zz32(lk)) + (lk > 0 ? lk : 0) +
                       var_size(zz32(lv)) + (lv > 0 ? lv : 0) + (hbuf && hbuf[i] ? hlen[i] : 1);
        w = wr_var(w, zz32(body));
        *w++ = 0;
        w = wr_var(w, zt);
        w = wr_var(w, zz32(i));
        w = wr_var(w, zz32(lk));
        if (lk > 0) { memcpy(w, pk, lk); w += lk; }
        w = wr_var(w, zz32(lv));
        if (lv > 0) { memcpy(w, pv, lv); w += lv; }
        if (hbuf && hbuf[i]) { memcpy(w, hbuf[i], hlen[i]); w += hlen[i]; } else { *w++ = 0; }
        if (bv.obj) PyBuffer_Release(&bv);
        if (bk.obj) PyBuffer_Release(&bk);
    }
    if ((char *)w != PyBytes_AS_STRING(out) + total) {
        Py_CLEAR(out);
        PyErr_SetString(PyExc_RuntimeError, "record sizes changed while building (mutated input?)");
    }
done:
    src_close(&V);
    src_close(&K);
    if (hbuf) {
        for (Py_ssize_t i = 0; i < n; i++) PyMem_Free(hbuf[i]);
        PyMem_Free(hbuf);
    }
    PyMem_Free(hlen);
    PyMem_Free(tsv);
    Py_XDECREF(H);
    Py_XDECREF(TS);
    return out;
}

/* ---------------------------------------------------------------- murmur2 */

/* murmur2(key: bytes-like) -> int: Kafka's Utils.murmur2 as an unsigned 32-bit value (seed 0x9747b28c).
 * The keyed producer hashes every record's key; in Python that costs about a microsecond per key. */
static PyObject *murmur2(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t h = kafka_murmur2((const uint8_t *)b.buf, b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(h);
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Record, CorruptRecordError, Column): register the types the codec uses"},
    {"decode_blob", decode_blob, METH_VARARGS, "Records of one decompressed records blob"},
    {"decode_tuples", decode_tuples, METH_VARARGS, "Consumer records of one blob as 7-field tuples"},
    {"scan_raw", scan_raw, METH_VARARGS, "Keys, deltas, tombstone flags and record starts of one blob"},
    {"columns", columns, METH_VARARGS, "Column buffers of the records of many blobs"},
    {"build_records", build_records, METH_VARARGS, "The records part of a batch"},
    {"murmur2", murmur2, METH_O, "Kafka's murmur2 of a key, unsigned 32-bit"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codec", "Compiled Kafka v2 record codec", -1, methods};

PyMODINIT_FUNC PyInit__codec(void) {
    EMPTY = PyTuple_New(0);
    if (EMPTY == NULL) return NULL;
    return PyModule_Create(&module);
}
