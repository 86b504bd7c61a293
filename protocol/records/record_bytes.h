/* Reading v2 record bytes in C: the zigzag varint and the strict UTF-8 check, written once.

Included by both hand-written extensions that read records: the record walk's fast path
(`protocol/records/_walk_accept.c`) and the Spark reader's decoder (`clients/spark/_arrow_records.c`).
Each turns a failure into its own answer (None, or a ValueError naming the record and field), so these
only say what went wrong. The rules are `record_walk`'s: a varint has at most 5 bytes for 32 bits and
10 for 64, and its value must fit those bits; UTF-8 is strict as CPython's decoder is (no overlong
forms, no surrogates, nothing above U+10FFFF).
*/
#ifndef PYBROKER_RECORD_BYTES_H
#define PYBROKER_RECORD_BYTES_H

#include <Python.h>
#include <stdint.h>

enum { VARINT_OK = 0, VARINT_WIDER, VARINT_TRUNCATED, VARINT_LONGER };

/* A zigzag varint of at most `bits` (32 or 64) bits in buf[*pos:end]: VARINT_OK with the value in *out
   and *pos moved past it, or why not (VARINT_WIDER: more bits than allowed; VARINT_TRUNCATED: the bytes
   ran out; VARINT_LONGER: more bytes than a varint of that width has). */
static inline int zigzag_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int bits, int64_t *out) {
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) { /* one byte: the common case for lengths and deltas */
        uint64_t raw = buf[p];
        *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
        *pos = p + 1;
        return VARINT_OK;
    }
    int max_bytes = bits == 32 ? 5 : 10;
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t limit = end - p < max_bytes ? end : p + max_bytes;
    while (p < limit) {
        unsigned char byte = buf[p++];
        if (shift == 63 && (byte & 0x7F) > 1)
            return VARINT_WIDER;
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            if (bits == 32 && (raw >> 32) != 0)
                return VARINT_WIDER;
            *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
            *pos = p;
            return VARINT_OK;
        }
        shift += 7;
    }
    return shift < 7 * max_bytes ? VARINT_TRUNCATED : VARINT_LONGER;
}

/* 1 when s[0:n] is strict UTF-8, as CPython's decoder takes it; 0 otherwise. */
static inline int strict_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i - 1 < need)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (Py_ssize_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += need + 1;
    }
    return 1;
}

#endif
