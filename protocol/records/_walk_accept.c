/* The record walk's fast path: accept a batch's records in place, without copying them.

Why: on the produce path every uncompressed batch is walked record by record (`record_walk`). The
mypyc-compiled walk reads single bytes fast only from `bytes`, so each batch was first copied out of the
request's bytearray (the frame, which the append patches in place) into a new bytes object: under a
1 KiB produce load that copy cost as much as the walk itself. This module reads the frame's own buffer
(any object with the buffer protocol) and answers only "these records are well formed": it returns the
summary the walk would return, or None for anything the walk would refuse. The caller then runs the
walk itself (`record_walk`, compiled or pure) on a copy to get the exact refusal and its message, so
every message still has one author and the two can only disagree in speed.

The rules are `record_walk`'s, read strictly (its docstring has Kafka's layout): zigzag varints of at
most 5 bytes for 32 bits and 10 for 64, whose value must fit those bits; each record's length at least
6 and inside the batch; attributes 0 and offset deltas 0..n-1 on the produce path, growing up to the
last offset delta otherwise; key and value lengths (negative = null) inside the record; a header count
that is not negative and not more than the bytes left; header keys never null, and UTF-8 on the
produce path (checked by CPython's own strict decoder, as the walk does); the records filling the
bytes exactly; and the last offset delta matching. tests/unit/protocol/test_walk_accept.py checks
that both give the same verdict and summary on valid, mutated and random batches.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MIN_RECORD_BODY 6

/* One zigzag varint of at most `max_bytes` bytes whose raw value fits `bits` bits; 0 on success. */
static int read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int bits,
                       int64_t *out) {
    Py_ssize_t at = *pos;
    if (at < end && p[at] < 0x80) { /* one byte: the common case */
        uint64_t raw = p[at];
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        *pos = at + 1;
        return 0;
    }
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (at >= end)
            return -1;
        unsigned char byte = p[at++];
        uint64_t part = (uint64_t)(byte & 0x7F);
        if (shift > 0 && (part >> (64 - shift)) != 0)
            return -1; /* bits beyond 64: wider than any allowed width */
        raw |= part << shift;
        if (byte < 0x80) {
            if (bits < 64 && (raw >> bits) != 0)
                return -1;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = at;
            return 0;
        }
        shift += 7;
    }
    return -1; /* longer than max_bytes */
}

/* A varint length and that many bytes (negative = null); 0 on success, the length in *size. */
static int skip_blob(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *size) {
    if (read_varint(p, pos, end, 5, 32, size) < 0)
        return -1;
    if (*size > end - *pos)
        return -1;
    if (*size > 0)
        *pos += (Py_ssize_t)*size;
    return 0;
}

static int is_utf8(const unsigned char *p, Py_ssize_t start, Py_ssize_t size) {
    for (Py_ssize_t i = 0; i < size; i++) {
        if (p[start + i] >= 0x80) {
            PyObject *decoded = PyUnicode_DecodeUTF8((const char *)p + start, size, "strict");
            if (decoded == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(decoded);
            return 1;
        }
    }
    return 1;
}

/* accept(buffer, start, end, records_count, last_offset_delta, consecutive)
   -> (min_timestamp_delta, max_timestamp_delta, first_keyless), or None when the walk would refuse. */
static PyObject *accept(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, records_count;
    long long last_offset_delta;
    int consecutive;
    if (!PyArg_ParseTuple(args, "y*nnnLp", &view, &start, &end, &records_count, &last_offset_delta, &consecutive))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    int ok = 0;
    int64_t min_delta = 0, max_delta = 0;
    Py_ssize_t first_keyless = -1;
    if (start < 0 || end > view.len || start > end || records_count < 0)
        goto done;
    Py_ssize_t pos = start;
    int64_t previous_offset = -1;
    for (Py_ssize_t index = 0; index < records_count; index++) {
        int64_t length, timestamp_delta, offset_delta, key_size, value_size, header_count;
        if (pos >= end || read_varint(p, &pos, end, 5, 32, &length) < 0)
            goto done;
        if (length < MIN_RECORD_BODY || length > end - pos)
            goto done;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        if (consecutive && p[pos] != 0)
            goto done;
        pos += 1;
        if (read_varint(p, &pos, record_end, 10, 64, &timestamp_delta) < 0 ||
            read_varint(p, &pos, record_end, 5, 32, &offset_delta) < 0)
            goto done;
        if (consecutive ? offset_delta != index
                        : (offset_delta <= previous_offset || offset_delta > last_offset_delta))
            goto done;
        previous_offset = offset_delta;
        if (skip_blob(p, &pos, record_end, &key_size) < 0)
            goto done;
        if (key_size < 0 && first_keyless < 0)
            first_keyless = index;
        if (skip_blob(p, &pos, record_end, &value_size) < 0)
            goto done;
        if (read_varint(p, &pos, record_end, 5, 32, &header_count) < 0)
            goto done;
        if (header_count < 0 || header_count > record_end - pos)
            goto done;
        for (int64_t h = 0; h < header_count; h++) {
            int64_t hkey, hvalue;
            if (skip_blob(p, &pos, record_end, &hkey) < 0 || hkey < 0)
                goto done;
            if (consecutive && !is_utf8(p, pos - (Py_ssize_t)hkey, (Py_ssize_t)hkey))
                goto done;
            if (skip_blob(p, &pos, record_end, &hvalue) < 0)
                goto done;
        }
        if (pos != record_end)
            goto done;
        if (index == 0) {
            min_delta = max_delta = timestamp_delta;
        } else if (timestamp_delta > max_delta) {
            max_delta = timestamp_delta;
        } else if (timestamp_delta < min_delta) {
            min_delta = timestamp_delta;
        }
    }
    if (pos != end)
        goto done;
    if (consecutive && records_count > 0 && previous_offset != last_offset_delta)
        goto done;
    ok = 1;
done:
    PyBuffer_Release(&view);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("LLn", (long long)min_delta, (long long)max_delta, first_keyless);
}

/* uninitialized_bytearray(size): a bytearray whose bytes are not zeroed first, for a buffer that is
   filled whole before anyone reads it (a request frame being received); `bytearray(size)` writes every
   byte twice. */
static PyObject *uninitialized_bytearray(PyObject *self, PyObject *arg) {
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef methods[] = {
    {"accept", accept, METH_VARARGS,
     "accept(buffer, start, end, records_count, last_offset_delta, consecutive): the walk's summary "
     "(min_timestamp_delta, max_timestamp_delta, first_keyless) of well-formed records, else None"},
    {"uninitialized_bytearray", uninitialized_bytearray, METH_O,
     "uninitialized_bytearray(size): a bytearray of that size whose bytes are not zeroed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk_accept",
                                    "The record walk's copy-free fast path (see the C source's comment).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__walk_accept(void) { return PyModule_Create(&module); }
