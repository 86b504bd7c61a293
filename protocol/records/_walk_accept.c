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
that is not negative and not more than the bytes left; header keys never null, and strict UTF-8 on the
produce path, as CPython's decoder (which the walk uses) takes it; the varint and UTF-8 readers are
`record_bytes.h`, shared with the Spark reader's decoder; the records filling the
bytes exactly; and the last offset delta matching. tests/unit/protocol/test_walk_accept.py checks
that both give the same verdict and summary on valid, mutated and random batches.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "record_bytes.h"

#define MIN_RECORD_BODY 6

/* A zigzag varint of at most `bits` bits (`record_bytes.h`); 0 on success. */
static int read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int bits, int64_t *out) {
    return zigzag_varint(p, pos, end, bits, out) == VARINT_OK ? 0 : -1;
}

/* A varint length and that many bytes (negative = null); 0 on success, the length in *size. */
static int skip_blob(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *size) {
    if (read_varint(p, pos, end, 32, size) < 0)
        return -1;
    if (*size > end - *pos)
        return -1;
    if (*size > 0)
        *pos += (Py_ssize_t)*size;
    return 0;
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
        if (pos >= end || read_varint(p, &pos, end, 32, &length) < 0)
            goto done;
        if (length < MIN_RECORD_BODY || length > end - pos)
            goto done;
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        if (consecutive && p[pos] != 0)
            goto done;
        pos += 1;
        if (read_varint(p, &pos, record_end, 64, &timestamp_delta) < 0 ||
            read_varint(p, &pos, record_end, 32, &offset_delta) < 0)
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
        if (read_varint(p, &pos, record_end, 32, &header_count) < 0)
            goto done;
        if (header_count < 0 || header_count > record_end - pos)
            goto done;
        for (int64_t h = 0; h < header_count; h++) {
            int64_t hkey, hvalue;
            if (skip_blob(p, &pos, record_end, &hkey) < 0 || hkey < 0)
                goto done;
            if (consecutive && !strict_utf8(p + pos - (Py_ssize_t)hkey, (Py_ssize_t)hkey))
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
