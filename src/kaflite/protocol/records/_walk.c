/* The broker's record walker: checks every record of a batch's records section
 * (Kafka's LogValidator, record level) without building a Python object per
 * record. The pure-Python decoders in _decode.py and _stride.py do the same
 * checks and remain the fallback where this module is not built; _native.py
 * loads it and tests/protocol/records/test_walk.py holds the two to agreement.
 *
 * A record (magic v2):
 *   length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
 *   | keyLength varint | key | valueLength varint | value
 *   | headerCount varint | (keyLength varint | key | valueLength varint | value)*
 * All varints are zigzag-encoded.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos;
    Py_ssize_t end;     /* reads stop here: the record's end, or the section's */
    const char *error;  /* set on the first failure */
} cursor;

/* Zigzag varint of at most 10 bytes; sets c->error on a short read or a longer one. */
static inline int64_t read_varint(cursor *c) {
    uint64_t z = 0;
    int shift = 0;
    while (c->pos < c->end) {
        uint8_t b = c->buf[c->pos++];
        z |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        shift += 7;
        if (shift > 63) {
            c->error = "varint longer than 10 bytes";
            return 0;
        }
    }
    c->error = "truncated record";
    return 0;
}

/* Skip a length-prefixed field: -1 is null when nullable, other negatives are invalid. */
static inline int skip_field(cursor *c, int nullable, const char *what) {
    int64_t n = read_varint(c);
    if (c->error)
        return -1;
    if (n < 0) {
        if (n == -1 && nullable)
            return 1;
        c->error = what;
        return -1;
    }
    if (n > c->end - c->pos) {
        c->error = what;
        return -1;
    }
    c->pos += (Py_ssize_t)n;
    return 0;
}

/* walk(records, count, base_timestamp) -> (end, offsets_sequential, null_key, newest, oldest)
 *
 * Raises ValueError naming the first malformed record. ``newest`` is the largest
 * timestamp (base_timestamp + delta), ``oldest`` the smallest that is not -1
 * (Kafka's "no timestamp"); both are -1 when there is none. ``end`` is the byte
 * after the last record, for the caller's check that the section is filled. */
static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "y*nL", &view, &count, &base_ts))
        return NULL;
    cursor c = {(const uint8_t *)view.buf, 0, view.len, NULL};
    int sequential = 1, null_key = 0, any = 0, any_real = 0;
    int64_t newest = -1, oldest = -1;
    char message[160];
    message[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        c.end = view.len;
        int64_t length = read_varint(&c);
        if (c.error)
            break;
        if (length < 6 || length > view.len - c.pos) {
            snprintf(message, sizeof message, "record length %lld at byte %zd is invalid",
                     (long long)length, c.pos);
            break;
        }
        Py_ssize_t record_end = c.pos + (Py_ssize_t)length;
        c.end = record_end;
        c.pos += 1; /* attributes */
        int64_t delta = read_varint(&c);
        int64_t offset_delta = c.error ? 0 : read_varint(&c);
        if (c.error)
            break;
        if (offset_delta != (int64_t)i)
            sequential = 0;
        int64_t ts;
        if (__builtin_add_overflow((int64_t)base_ts, delta, &ts)) {
            snprintf(message, sizeof message, "record timestamp delta %lld overflows",
                     (long long)delta);
            break;
        }
        if (!any || ts > newest)
            newest = ts;
        any = 1;
        if (ts != -1 && (!any_real || ts < oldest)) {
            oldest = ts;
            any_real = 1;
        }
        int key = skip_field(&c, 1, "invalid record key length");
        if (key < 0)
            break;
        null_key |= key;
        if (skip_field(&c, 1, "invalid record value length") < 0)
            break;
        int64_t headers = read_varint(&c);
        if (c.error)
            break;
        if (headers < 0 || headers > c.end - c.pos) {
            snprintf(message, sizeof message, "invalid record header count %lld",
                     (long long)headers);
            break;
        }
        for (int64_t h = 0; h < headers && !c.error; h++) {
            if (skip_field(&c, 0, "invalid record header key length") < 0)
                break;
            if (skip_field(&c, 1, "invalid record header value length") < 0)
                break;
        }
        if (c.error)
            break;
        if (c.pos != record_end) {
            snprintf(message, sizeof message, "record ends at byte %zd but its length says %zd",
                     c.pos, record_end);
            break;
        }
    }
    Py_ssize_t end = c.pos;
    PyBuffer_Release(&view);
    if (c.error || message[0]) {
        PyErr_SetString(PyExc_ValueError, message[0] ? message : c.error);
        return NULL;
    }
    return Py_BuildValue("nNNLL", end, PyBool_FromLong(sequential), PyBool_FromLong(null_key),
                         (long long)newest, (long long)oldest);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(records, count, base_timestamp) -> (end, offsets_sequential, null_key, newest, oldest)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__walk(void) { return PyModule_Create(&module); }
