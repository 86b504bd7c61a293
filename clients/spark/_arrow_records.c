/* The Spark reader's record decoder: the records of v2 batches straight into Arrow column buffers.

Why C: a Spark task reads hundreds of thousands of records; building a Python object per record (as a
Kafka client does) costs more than everything else in the read. Here each record's fields are copied
from the (decompressed) record bytes into growable native buffers laid out as Arrow wants them
(int64 offsets and timestamps, int32 timestamp types, validity bitmaps, int32 offsets + data for the
binary and string columns, and the list<struct<key, value>> of headers); `finish()` hands the buffers
over as bytes objects, and `arrow_records.py` wraps them with `pyarrow.Array.from_buffers`.

The pure-Python twin is `arrow_records_py.py` (used when this extension is not built); the two give
the same columns for the same bytes, and the same verdict on bad bytes (tests compare them).

Hostile bytes: every varint is bounded (5 bytes for 32 bits, 10 for 64) and every length and count
is checked against the bytes really there before anything is read or copied, as Kafka's
DefaultRecord.readFrom does. A batch is added whole or not at all: on any error the builder is
rolled back to where the batch started, and a ValueError says which record and why.

Spark's Kafka source decodes header keys as Java does (invalid UTF-8 becomes U+FFFD); valid keys are
copied as they are, and the rare invalid one goes through CPython's own "replace" decoder, so both
implementations agree byte for byte.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "record_bytes.h" /* protocol/records: the varint and UTF-8 rules, shared with the record walk's C */

#define MIN_RECORD_BODY 6 /* attributes, timestamp delta, offset delta, key, value, header count */

/* -- growable buffers -------------------------------------------------------------------------- */
typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (extra < 0 || b->len > PY_SSIZE_T_MAX - extra) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    char *grown = PyMem_Realloc(b->data, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = grown;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }
static int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, sizeof v); }

static void buf_free(Buf *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* a validity bitmap: bit i set = slot i is not null (Arrow's LSB order) */
typedef struct {
    Buf buf;
    Py_ssize_t n;
    Py_ssize_t nulls;
} Bits;

static int bits_append(Bits *b, int valid) {
    if ((b->n & 7) == 0) {
        if (buf_reserve(&b->buf, 1) < 0)
            return -1;
        b->buf.data[b->buf.len++] = 0;
    }
    unsigned char *byte = (unsigned char *)&b->buf.data[b->n >> 3];
    unsigned char mask = (unsigned char)(1u << (b->n & 7));
    if (valid) {
        *byte |= mask;
    } else {
        *byte &= (unsigned char)~mask;
        b->nulls++;
    }
    b->n++;
    return 0;
}

/* a binary or string column: validity, n + 1 int32 offsets, data */
typedef struct {
    Bits valid;
    Buf offsets;
    Buf data;
} Bin;

static int bin_init(Bin *c) { return buf_i32(&c->offsets, 0); }

static int bin_append(Bin *c, const char *p, Py_ssize_t n, int valid) {
    if (valid && buf_put(&c->data, p, n) < 0)
        return -1;
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "more than 2 GiB of keys, values or headers in one batch");
        return -1;
    }
    if (buf_i32(&c->offsets, (int32_t)c->data.len) < 0)
        return -1;
    return bits_append(&c->valid, valid);
}

static void bin_free(Bin *c) {
    buf_free(&c->valid.buf);
    buf_free(&c->offsets);
    buf_free(&c->data);
}

/* where a column stood, to roll a failed batch back */
typedef struct {
    Py_ssize_t n, nulls, offsets, data;
} BinMark;

static BinMark bin_mark(const Bin *c) {
    BinMark m = {c->valid.n, c->valid.nulls, c->offsets.len, c->data.len};
    return m;
}

static void bin_rollback(Bin *c, BinMark m) {
    c->valid.n = m.n;
    c->valid.nulls = m.nulls;
    c->valid.buf.len = (m.n + 7) / 8;
    c->offsets.len = m.offsets;
    c->data.len = m.data;
}

/* -- the builder ------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    int headers;          /* build the headers column */
    Py_ssize_t rows;
    Buf offsets;          /* int64 */
    Buf timestamps;       /* int64, microseconds (Spark's timestamps) */
    Buf timestamp_types;  /* int32 */
    Bin key, value;
    Bits header_lists;    /* null for a record without headers */
    Buf header_offsets;   /* int32: n + 1 offsets into the header entries */
    Py_ssize_t header_entries;
    Bin header_key, header_value;
} Builder;

static int builder_start(Builder *self) {
    self->rows = 0;
    self->header_entries = 0;
    if (bin_init(&self->key) < 0 || bin_init(&self->value) < 0)
        return -1;
    if (self->headers) {
        if (buf_i32(&self->header_offsets, 0) < 0 || bin_init(&self->header_key) < 0 ||
            bin_init(&self->header_value) < 0)
            return -1;
    }
    return 0;
}

static void builder_clear(Builder *self) {
    buf_free(&self->offsets);
    buf_free(&self->timestamps);
    buf_free(&self->timestamp_types);
    bin_free(&self->key);
    bin_free(&self->value);
    buf_free(&self->header_lists.buf);
    self->header_lists.n = self->header_lists.nulls = 0;
    buf_free(&self->header_offsets);
    bin_free(&self->header_key);
    bin_free(&self->header_value);
    memset(&self->key.valid, 0, sizeof self->key.valid);
    memset(&self->value.valid, 0, sizeof self->value.valid);
    memset(&self->header_key.valid, 0, sizeof self->header_key.valid);
    memset(&self->header_value.valid, 0, sizeof self->header_value.valid);
}

static int Builder_init(Builder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"headers", NULL};
    int headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "p", kwlist, &headers))
        return -1;
    builder_clear(self);
    self->headers = headers;
    return builder_start(self);
}

static void Builder_dealloc(Builder *self) {
    builder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

typedef struct {
    Py_ssize_t rows, offsets, timestamps, timestamp_types, header_lists_n, header_lists_nulls, header_offsets,
        header_entries;
    BinMark key, value, header_key, header_value;
} Mark;

static Mark builder_mark(const Builder *self) {
    Mark m;
    m.rows = self->rows;
    m.offsets = self->offsets.len;
    m.timestamps = self->timestamps.len;
    m.timestamp_types = self->timestamp_types.len;
    m.header_lists_n = self->header_lists.n;
    m.header_lists_nulls = self->header_lists.nulls;
    m.header_offsets = self->header_offsets.len;
    m.header_entries = self->header_entries;
    m.key = bin_mark(&self->key);
    m.value = bin_mark(&self->value);
    m.header_key = bin_mark(&self->header_key);
    m.header_value = bin_mark(&self->header_value);
    return m;
}

static void builder_rollback(Builder *self, Mark m) {
    self->rows = m.rows;
    self->offsets.len = m.offsets;
    self->timestamps.len = m.timestamps;
    self->timestamp_types.len = m.timestamp_types;
    self->header_lists.n = m.header_lists_n;
    self->header_lists.nulls = m.header_lists_nulls;
    self->header_lists.buf.len = (m.header_lists_n + 7) / 8;
    self->header_offsets.len = m.header_offsets;
    self->header_entries = m.header_entries;
    bin_rollback(&self->key, m.key);
    bin_rollback(&self->value, m.value);
    bin_rollback(&self->header_key, m.header_key);
    bin_rollback(&self->header_value, m.header_value);
}

/* -- reading the record bytes ------------------------------------------------------------------ */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t index; /* the record being read, for messages */
} Reader;

static const char *const FIELD_NAMES[] = {"length", "timestamp delta", "offset delta", "key", "value",
                                          "header count", "header key", "header value"};
enum { F_LENGTH, F_TIMESTAMP_DELTA, F_OFFSET_DELTA, F_KEY, F_VALUE, F_HEADER_COUNT, F_HEADER_KEY, F_HEADER_VALUE };

static int malformed(const Reader *r, int what, const char *problem) {
    PyErr_Format(PyExc_ValueError, "record %zd %s: %s", r->index, FIELD_NAMES[what], problem);
    return -1;
}

/* a zigzag varint of at most `bits` (32 or 64) bits in buf[*pos:end] (`record_bytes.h`), its failure named */
static int read_varint(const Reader *r, Py_ssize_t *pos, Py_ssize_t end, int bits, int what, int64_t *out) {
    switch (zigzag_varint(r->buf, pos, end, bits, out)) {
    case VARINT_OK:
        return 0;
    case VARINT_WIDER:
        return malformed(r, what, bits == 32 ? "varint wider than 32 bits" : "varint wider than 64 bits");
    case VARINT_TRUNCATED:
        return malformed(r, what, "truncated varint");
    default:
        return malformed(r, what, bits == 32 ? "varint longer than 5 bytes" : "varint longer than 10 bytes");
    }
}

/* a varint length and that many bytes: (*start, *size); a negative size is null */
static int read_blob(const Reader *r, Py_ssize_t *pos, Py_ssize_t end, int what, Py_ssize_t *start,
                     Py_ssize_t *size) {
    int64_t n;
    if (read_varint(r, pos, end, 32, what, &n) < 0)
        return -1;
    if (n > end - *pos) {
        PyErr_Format(PyExc_ValueError, "record %zd %s: length %lld overruns the record (%zd bytes left)", r->index,
                     FIELD_NAMES[what], (long long)n, end - *pos);
        return -1;
    }
    *start = *pos;
    *size = (Py_ssize_t)n;
    if (n > 0)
        *pos += (Py_ssize_t)n;
    return 0;
}

/* a header key into the string column: as it is when UTF-8, else through CPython's "replace" decoder */
static int append_header_key(Builder *self, const char *p, Py_ssize_t n) {
    if (strict_utf8((const unsigned char *)p, n))
        return bin_append(&self->header_key, p, n, 1);
    PyObject *text = PyUnicode_DecodeUTF8(p, n, "replace");
    if (text == NULL)
        return -1;
    Py_ssize_t size;
    const char *fixed = PyUnicode_AsUTF8AndSize(text, &size);
    int result = fixed == NULL ? -1 : bin_append(&self->header_key, fixed, size, 1);
    Py_DECREF(text);
    return result;
}

/* one record at buf[*pos:end], appended unless its offset is outside [low, high) */
static int add_record(Builder *self, Reader *r, Py_ssize_t *pos, Py_ssize_t end, int64_t base_offset,
                      int64_t last_offset_delta, int64_t *previous_delta, int64_t base_timestamp,
                      int64_t max_timestamp, int timestamp_type, int64_t low, int64_t high) {
    int64_t length, timestamp_delta, offset_delta, header_count;
    if (read_varint(r, pos, end, 32, F_LENGTH, &length) < 0)
        return -1;
    if (length < MIN_RECORD_BODY) {
        PyErr_Format(PyExc_ValueError, "record %zd length %lld is below the smallest record (%d bytes)", r->index,
                     (long long)length, MIN_RECORD_BODY);
        return -1;
    }
    if (length > end - *pos) {
        PyErr_Format(PyExc_ValueError, "record %zd length %lld overruns the batch (%zd bytes left)", r->index,
                     (long long)length, end - *pos);
        return -1;
    }
    Py_ssize_t record_end = *pos + (Py_ssize_t)length;
    Py_ssize_t p = *pos + 1; /* attributes: unused in v2 records */
    if (read_varint(r, &p, record_end, 64, F_TIMESTAMP_DELTA, &timestamp_delta) < 0 ||
        read_varint(r, &p, record_end, 32, F_OFFSET_DELTA, &offset_delta) < 0)
        return -1;
    if (offset_delta <= *previous_delta || offset_delta > last_offset_delta) {
        PyErr_Format(PyExc_ValueError, "record %zd has offset delta %lld, after %lld and at most %lld", r->index,
                     (long long)offset_delta, (long long)*previous_delta, (long long)last_offset_delta);
        return -1;
    }
    *previous_delta = offset_delta;
    Py_ssize_t key_start, key_size, value_start, value_size;
    if (read_blob(r, &p, record_end, F_KEY, &key_start, &key_size) < 0 ||
        read_blob(r, &p, record_end, F_VALUE, &value_start, &value_size) < 0 ||
        read_varint(r, &p, record_end, 32, F_HEADER_COUNT, &header_count) < 0)
        return -1;
    if (header_count < 0 || header_count > record_end - p) {
        PyErr_Format(PyExc_ValueError, "record %zd header count: %lld is impossible with %zd bytes left in the record",
                     r->index, (long long)header_count, record_end - p);
        return -1;
    }
    /* the offset: base_offset + delta, both checked, so no overflow (base_offset <= INT64_MAX - 2^31) */
    int64_t offset = base_offset + offset_delta;
    int keep = offset >= low && offset < high;
    int64_t timestamp = max_timestamp;
    if (keep && timestamp_type == 0 && __builtin_add_overflow(base_timestamp, timestamp_delta, &timestamp)) {
        PyErr_Format(PyExc_ValueError, "record %zd timestamp: base %lld + delta %lld overflows", r->index,
                     (long long)base_timestamp, (long long)timestamp_delta);
        return -1;
    }
    int64_t micros = 0;
    if (keep && __builtin_mul_overflow(timestamp, (int64_t)1000, &micros)) {
        PyErr_Format(PyExc_ValueError, "record %zd timestamp %lld ms is outside Spark's timestamp range", r->index,
                     (long long)timestamp);
        return -1;
    }
    const char *b = (const char *)r->buf;
    int with_headers = keep && self->headers;
    for (int64_t h = 0; h < header_count; h++) {
        Py_ssize_t hk_start, hk_size, hv_start, hv_size;
        if (read_blob(r, &p, record_end, F_HEADER_KEY, &hk_start, &hk_size) < 0)
            return -1;
        if (hk_size < 0)
            return malformed(r, F_HEADER_KEY, "null");
        if (read_blob(r, &p, record_end, F_HEADER_VALUE, &hv_start, &hv_size) < 0)
            return -1;
        if (with_headers) {
            if (append_header_key(self, b + hk_start, hk_size) < 0 ||
                bin_append(&self->header_value, b + hv_start, hv_size < 0 ? 0 : hv_size, hv_size >= 0) < 0)
                return -1;
            self->header_entries++;
        }
    }
    if (p != record_end) {
        PyErr_Format(PyExc_ValueError, "record %zd fields end %zd bytes before its length says", r->index,
                     record_end - p);
        return -1;
    }
    *pos = record_end;
    if (!keep)
        return 0;
    if (buf_i64(&self->offsets, offset) < 0 || buf_i64(&self->timestamps, micros) < 0 ||
        buf_i32(&self->timestamp_types, timestamp_type) < 0 ||
        bin_append(&self->key, b + key_start, key_size < 0 ? 0 : key_size, key_size >= 0) < 0 ||
        bin_append(&self->value, b + value_start, value_size < 0 ? 0 : value_size, value_size >= 0) < 0)
        return -1;
    if (self->headers) {
        if (self->header_entries > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "more than 2^31 headers in one batch");
            return -1;
        }
        if (buf_i32(&self->header_offsets, (int32_t)self->header_entries) < 0 ||
            bits_append(&self->header_lists, header_count > 0) < 0)
            return -1;
    }
    self->rows++;
    return 0;
}

PyDoc_STRVAR(add_batch_doc,
"add_batch(data, start, end, records_count, base_offset, last_offset_delta, base_timestamp, max_timestamp,\n"
"          timestamp_type, low, high) -> int\n\n"
"Decode the `records_count` records in data[start:end] (uncompressed record bytes of one v2 batch) and\n"
"append those whose offset is in [low, high); returns how many were appended. timestamp_type 1\n"
"(LogAppendTime) gives every record max_timestamp. ValueError (and nothing appended) when the bytes\n"
"do not hold exactly `records_count` well-formed records.");

static PyObject *Builder_add_batch(Builder *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long base_offset, last_offset_delta, base_timestamp, max_timestamp, low, high;
    int timestamp_type;
    if (!PyArg_ParseTuple(args, "y*nnnLLLLiLL", &view, &start, &end, &count, &base_offset, &last_offset_delta,
                          &base_timestamp, &max_timestamp, &timestamp_type, &low, &high))
        return NULL;
    PyObject *result = NULL;
    Mark mark = builder_mark(self);
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "record bytes outside the buffer");
        goto done;
    }
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "records_count %zd is negative", count);
        goto done;
    }
    if (timestamp_type != 0 && timestamp_type != 1) {
        PyErr_Format(PyExc_ValueError, "timestamp type %d is neither 0 nor 1", timestamp_type);
        goto done;
    }
    if (last_offset_delta < -1 || last_offset_delta > INT32_MAX || base_offset < 0 ||
        base_offset > INT64_MAX - INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "base offset %lld with last offset delta %lld is impossible", base_offset,
                     last_offset_delta);
        goto done;
    }
    Reader r = {(const unsigned char *)view.buf, 0};
    Py_ssize_t pos = start;
    int64_t previous_delta = -1;
    for (; r.index < count; r.index++) {
        if (pos >= end) {
            PyErr_Format(PyExc_ValueError, "records_count %zd but the batch holds %zd records", count, r.index);
            goto fail;
        }
        if (add_record(self, &r, &pos, end, base_offset, last_offset_delta, &previous_delta, base_timestamp,
                       max_timestamp, timestamp_type, low, high) < 0)
            goto fail;
    }
    if (pos != end) {
        PyErr_Format(PyExc_ValueError, "%zd bytes after the last of %zd records", end - pos, count);
        goto fail;
    }
    result = PyLong_FromSsize_t(self->rows - mark.rows);
    goto done;
fail:
    builder_rollback(self, mark);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *take(Buf *b) {
    PyObject *out = PyBytes_FromStringAndSize(b->data ? b->data : "", b->len);
    b->len = 0;
    return out;
}

static PyObject *take_bits(Bits *b) {
    if (b->nulls == 0) {
        b->buf.len = 0;
        b->n = 0;
        Py_RETURN_NONE;
    }
    if (b->n & 7) /* clear the bits past the end (rolled-back records may have left some set) */
        b->buf.data[b->buf.len - 1] &= (char)((1u << (b->n & 7)) - 1);
    b->n = 0;
    b->nulls = 0;
    return take(&b->buf);
}

/* (validity or None, null count, offsets, data) of a column, emptied */
static PyObject *take_bin(Bin *c) {
    Py_ssize_t nulls = c->valid.nulls;
    PyObject *valid = take_bits(&c->valid);
    PyObject *offsets = take(&c->offsets);
    PyObject *data = take(&c->data);
    if (valid == NULL || offsets == NULL || data == NULL) {
        Py_XDECREF(valid);
        Py_XDECREF(offsets);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NnNN)", valid, nulls, offsets, data);
}

PyDoc_STRVAR(finish_doc,
"finish() -> tuple\n\n"
"The columns built so far, and an empty builder:\n"
"(rows, offsets, timestamps, timestamp_types, key, value, headers) where offsets, timestamps (int64)\n"
"and timestamp_types (int32) are bytes, key and value are (validity or None, null count, int32 offsets,\n"
"data), and headers is None or (list validity or None, null count, int32 list offsets, header key\n"
"column, header value column).");

static PyObject *Builder_finish(Builder *self, PyObject *Py_UNUSED(ignored)) {
    Py_ssize_t rows = self->rows;
    PyObject *headers;
    if (self->headers) {
        Py_ssize_t list_nulls = self->header_lists.nulls;
        PyObject *lists = take_bits(&self->header_lists);
        PyObject *list_offsets = take(&self->header_offsets);
        PyObject *keys = take_bin(&self->header_key);
        PyObject *values = take_bin(&self->header_value);
        if (lists == NULL || list_offsets == NULL || keys == NULL || values == NULL) {
            Py_XDECREF(lists);
            Py_XDECREF(list_offsets);
            Py_XDECREF(keys);
            Py_XDECREF(values);
            return NULL;
        }
        headers = Py_BuildValue("(NnNNN)", lists, list_nulls, list_offsets, keys, values);
    } else {
        headers = Py_NewRef(Py_None);
    }
    PyObject *offsets = take(&self->offsets);
    PyObject *timestamps = take(&self->timestamps);
    PyObject *types = take(&self->timestamp_types);
    PyObject *key = take_bin(&self->key);
    PyObject *value = take_bin(&self->value);
    if (builder_start(self) < 0 || headers == NULL || offsets == NULL || timestamps == NULL || types == NULL ||
        key == NULL || value == NULL) {
        Py_XDECREF(headers);
        Py_XDECREF(offsets);
        Py_XDECREF(timestamps);
        Py_XDECREF(types);
        Py_XDECREF(key);
        Py_XDECREF(value);
        return NULL;
    }
    return Py_BuildValue("(nNNNNNN)", rows, offsets, timestamps, types, key, value, headers);
}

static PyObject *Builder_get_rows(Builder *self, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(self->rows); }

static PyObject *Builder_get_size(Builder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->key.data.len + self->value.data.len + self->header_key.data.len +
                              self->header_value.data.len + self->rows * 20);
}

static PyMethodDef Builder_methods[] = {
    {"add_batch", (PyCFunction)Builder_add_batch, METH_VARARGS, add_batch_doc},
    {"finish", (PyCFunction)Builder_finish, METH_NOARGS, finish_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Builder_getset[] = {
    {"rows", (getter)Builder_get_rows, NULL, "records appended since the last finish()", NULL},
    {"size", (getter)Builder_get_size, NULL, "about how many bytes the columns hold", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pybroker.clients.spark._arrow_records.ColumnBuilder",
    .tp_doc = PyDoc_STR("ColumnBuilder(headers: bool): Arrow column buffers of Spark's Kafka schema, batch by batch"),
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_arrow_records", "Record batches of Kafka into Arrow column buffers (see arrow_records).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__arrow_records(void) {
    if (PyType_Ready(&BuilderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "ColumnBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
