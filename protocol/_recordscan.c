/* The record walk of protocol/recordscan.py at memory speed (same arguments, same answers).
 *
 * Validating every produced record in Python costs about a microsecond a record, more than the
 * rest of the append; this reads the buffer in place (no copy) and holds no Python objects per
 * record.  Built by setup.py; recordscan.py falls back to its Python walk when it is absent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *ScanError;

#define NO_KEY 1
#define BAD_TIMESTAMP 2
#define CHECK_KEYS 1
#define CHECK_TIMESTAMPS 2
#define CHECK_OFFSETS 4

/* 1: read, 0: ran past end, -1: too long (error set). */
static int read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int max_bytes,
                       int64_t *out)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end)
            return 0;
        unsigned char b = buf[p++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            if (max_bytes == 5)
                result &= 0xFFFFFFFFu;
            *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            if (max_bytes == 5)
                *out = (int32_t)*out;
            *pos = p;
            return 1;
        }
        shift += 7;
    }
    PyErr_Format(ScanError, "varint is longer than %d bytes", max_bytes);
    return -1;
}

/* A field inside a record: running past `limit` is an error, not "need more bytes". */
static int field(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes,
                 int64_t *out)
{
    int rc = read_varint(buf, pos, limit, max_bytes, out);
    if (rc == 0)
        PyErr_SetString(ScanError, "record runs past its declared size");
    return rc == 1 ? 0 : -1;
}

static int skip_bytes(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t limit,
                      const char *what, int64_t *length)
{
    if (field(buf, pos, limit, 5, length) < 0)
        return -1;
    if (*length < -1) {
        PyErr_Format(ScanError, "invalid negative %s size %lld", what, (long long)*length);
        return -1;
    }
    if (*length > 0) {
        if (*length > limit - *pos) {
            PyErr_Format(ScanError, "%s runs past the record's declared size", what);
            return -1;
        }
        *pos += *length;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, index, count;
    long long base_timestamp, low, high;
    int flags;
    if (!PyArg_ParseTuple(args, "y*nnnLLLi", &view, &pos, &index, &count, &base_timestamp, &low,
                          &high, &flags))
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    int64_t max_timestamp = -1;   /* Kafka's NO_TIMESTAMP: where its max starts */
    PyObject *errors = PyList_New(0);
    if (errors == NULL)
        goto fail;
    while (index < count) {
        int64_t length, ts_delta, offset_delta, key_length, value_length, headers, hkey, hvalue;
        Py_ssize_t body = pos;
        int rc = read_varint(buf, &body, end, 5, &length);
        if (rc < 0)
            goto fail;
        if (rc == 0)
            break;
        if (length < 0) {
            PyErr_Format(ScanError, "invalid record size %lld", (long long)length);
            goto fail;
        }
        if (length > end - body)
            break;
        if (length < 1) {
            PyErr_SetString(ScanError, "empty record");
            goto fail;
        }
        Py_ssize_t limit = body + length;
        Py_ssize_t p = body + 1;
        if (field(buf, &p, limit, 10, &ts_delta) < 0 || field(buf, &p, limit, 5, &offset_delta) < 0
            || skip_bytes(buf, &p, limit, "key", &key_length) < 0
            || skip_bytes(buf, &p, limit, "value", &value_length) < 0
            || field(buf, &p, limit, 5, &headers) < 0)
            goto fail;
        if (headers < 0) {
            PyErr_Format(ScanError, "invalid negative header count %lld", (long long)headers);
            goto fail;
        }
        for (int64_t h = 0; h < headers; h++) {
            if (skip_bytes(buf, &p, limit, "header key", &hkey) < 0)
                goto fail;
            if (hkey < 0) {
                PyErr_SetString(ScanError, "invalid negative header key size");
                goto fail;
            }
            if (skip_bytes(buf, &p, limit, "header value", &hvalue) < 0)
                goto fail;
        }
        if (p != limit) {
            PyErr_Format(ScanError,
                         "invalid record size: expected to read %lld bytes in record payload, "
                         "but instead read %lld", (long long)length, (long long)(p - body));
            goto fail;
        }
        if ((flags & CHECK_OFFSETS) && offset_delta != index) {
            PyErr_Format(ScanError, "inner record offset delta %lld of record %zd is not %zd",
                         (long long)offset_delta, index, index);
            goto fail;
        }
        int64_t record_timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)ts_delta);
        if (record_timestamp > max_timestamp)
            max_timestamp = record_timestamp;
        int kind = 0;
        int64_t timestamp = 0;
        if ((flags & CHECK_KEYS) && key_length < 0) {
            kind = NO_KEY;
        } else if (flags & CHECK_TIMESTAMPS) {
            timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)ts_delta);
            if (timestamp != -1 && (timestamp < low || timestamp > high))
                kind = BAD_TIMESTAMP;
        }
        if (kind) {
            PyObject *item = Py_BuildValue("(niLL)", index, kind, (long long)timestamp,
                                           (long long)offset_delta);
            if (item == NULL || PyList_Append(errors, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
        }
        pos = limit;
        index++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nnNL)", pos, index, errors, (long long)max_timestamp);
fail:
    Py_XDECREF(errors);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Walk whole records in a buffer; see protocol/recordscan.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recordscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__recordscan(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    ScanError = PyErr_NewException("protocol._recordscan.ScanError", PyExc_ValueError, NULL);
    /* ABI 2: scan() also returns the records' largest timestamp (recordscan.py checks this, so a
       stale build from before is not used) */
    if (ScanError == NULL || PyModule_AddObjectRef(m, "ScanError", ScanError) < 0
        || PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
