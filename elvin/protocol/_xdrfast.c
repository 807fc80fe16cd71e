/* The optional compiled fast path of elvin.protocol.xdrprim.read_attrs, and of
 * elvin.protocol.fastpath.decode_notify_emit (the same reader, with the
 * NotifyEmit's usual tail checked in the same call: the router's hot path).
 *
 * Why C and not mypyc: mypyc over xdrprim.py gave no gain (3.3 us against
 * 3.2 us for a six-attribute NameValue array), since the loop's cost is the
 * struct unpacks, slices and dict stores, which mypyc still makes as
 * Python calls. Here they are direct reads of the buffer.
 *
 * Only the happy path is written here. On anything the pure reader would
 * refuse or treat specially (a length past the end, a limit, bad UTF-8, a
 * NUL, an unknown typecode, a read past the data, a buffer that is not
 * exactly bytes, an end past the data) this returns None, and the Python
 * wrapper runs the pure reader from the start, which raises the error with
 * its exact wording. So the compiled path can never accept or refuse
 * differently from the pure one: at worst it gives up and lets it decide.
 *
 * Built by `make accel` (scripts/build_accel.py) as the top-level module
 * elvin_xdrfast; never required (elvin/protocol/_accel.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const unsigned char *p) {
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

#define PADDED(n) (((n) + 3) & ~(Py_ssize_t)3)

/* The NameValue array at buf[o:], none of it past end: a new dict, with
 * *next the offset just after it; NULL without an exception set: give up
 * (the pure reader decides); NULL with one: a real failure (memory). */
static PyObject *
decode_array(const unsigned char *buf, Py_ssize_t size, Py_ssize_t o, Py_ssize_t end,
             const Py_ssize_t lim[4], PyObject *names, Py_ssize_t names_max,
             PyObject *new_int64, Py_ssize_t *next)
{
    Py_ssize_t max_attributes = lim[0], max_name = lim[1];
    Py_ssize_t max_string = lim[2], max_opaque = lim[3];
    if (o < 0 || end > size || o + 4 > size)
        return NULL;
    int32_t count = (int32_t)be32(buf + o);
    if (count < 0 || (Py_ssize_t)count * 12 > end - o - 4 || count > max_attributes)
        return NULL;
    o += 4;
    PyObject *attrs = PyDict_New();
    if (attrs == NULL)
        return NULL;
    for (int32_t i = 0; i < count; i++) {
        /* -- name */
        if (o + 4 > size)
            goto give_up;
        Py_ssize_t ln = be32(buf + o);
        Py_ssize_t s = o + 4;
        if (s + ln > end || ln > max_name)
            goto give_up;
        PyObject *raw = PyBytes_FromStringAndSize((const char *)buf + s, ln);
        if (raw == NULL)
            goto fail;
        PyObject *name = PyDict_GetItemWithError(names, raw);   /* borrowed */
        if (name != NULL) {
            Py_INCREF(name);
        } else if (PyErr_Occurred()) {
            Py_DECREF(raw);
            goto fail;
        } else {
            if (memchr(buf + s, 0, ln) != NULL) {
                Py_DECREF(raw);
                goto give_up;
            }
            name = PyUnicode_DecodeUTF8((const char *)buf + s, ln, "strict");
            if (name == NULL) {
                Py_DECREF(raw);
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    goto fail;
                PyErr_Clear();
                goto give_up;
            }
            if (PyDict_GET_SIZE(names) >= names_max)
                PyDict_Clear(names);
            if (PyDict_SetItem(names, raw, name) < 0) {
                Py_DECREF(raw);
                Py_DECREF(name);
                goto fail;
            }
        }
        Py_DECREF(raw);
        o = s + PADDED(ln);
        /* -- typed value: the typecode and the next word */
        if (o + 8 > size) {
            Py_DECREF(name);
            goto give_up;
        }
        int32_t tc = (int32_t)be32(buf + o);
        int32_t w = (int32_t)be32(buf + o + 4);
        PyObject *value;
        if (tc == 4 || tc == 5) {
            s = o + 8;
            if (w < 0 || s + w > end || w > (tc == 4 ? max_string : max_opaque)) {
                Py_DECREF(name);
                goto give_up;
            }
            if (tc == 4) {
                if (memchr(buf + s, 0, w) != NULL) {
                    Py_DECREF(name);
                    goto give_up;
                }
                value = PyUnicode_DecodeUTF8((const char *)buf + s, w, "strict");
                if (value == NULL) {
                    Py_DECREF(name);
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                        goto fail;
                    PyErr_Clear();
                    goto give_up;
                }
            } else {
                value = PyBytes_FromStringAndSize((const char *)buf + s, w);
            }
            o = s + PADDED((Py_ssize_t)w);
        } else if (tc == 1) {
            value = PyLong_FromLong(w);
            o += 8;
        } else if (tc == 2 || tc == 3) {
            if (o + 12 > size) {
                Py_DECREF(name);
                goto give_up;
            }
            if (tc == 2) {
                PyObject *plain = PyLong_FromLongLong((long long)(int64_t)be64(buf + o + 4));
                value = plain == NULL ? NULL : PyObject_CallOneArg(new_int64, plain);
                Py_XDECREF(plain);
            } else {
                double d = PyFloat_Unpack8((const char *)buf + o + 4, 0);   /* 0: big-endian */
                value = (d == -1.0 && PyErr_Occurred()) ? NULL : PyFloat_FromDouble(d);
            }
            o += 12;
        } else {
            Py_DECREF(name);
            goto give_up;
        }
        if (value == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        int rc = PyDict_SetItem(attrs, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    *next = o;
    return attrs;
give_up:
    Py_DECREF(attrs);
    return NULL;
fail:
    Py_DECREF(attrs);
    return NULL;
}

/* The arguments both entry points share, from args[first:]: max_attributes,
 * max_name, max_string, max_opaque, names, names_max, new_int64. 0: not as
 * expected (the pure path decides). */
static int
shared_args(PyObject *const *args, Py_ssize_t lim[4], PyObject **names,
            Py_ssize_t *names_max, PyObject **new_int64)
{
    for (int i = 0; i < 4; i++)
        lim[i] = PyLong_AsSsize_t(args[i]);
    *names = args[4];
    *names_max = PyLong_AsSsize_t(args[5]);
    *new_int64 = args[6];
    if (PyErr_Occurred()) {       /* not ints, or out of range */
        PyErr_Clear();
        return 0;
    }
    return PyDict_CheckExact(*names);
}

/* read_attrs(data, o, end, max_attributes, max_name, max_string, max_opaque,
 *            names, names_max, new_int64) -> (dict, offset) or None
 * names: the shared cache of decoded names (bytes -> str), as in the pure
 * reader; new_int64: a callable int -> Int64 (int64 values are rare). */
static PyObject *
read_attrs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "read_attrs takes 10 arguments");
        return NULL;
    }
    PyObject *data = args[0];
    Py_ssize_t lim[4], names_max;
    PyObject *names, *new_int64;
    if (!PyBytes_CheckExact(data) || !shared_args(args + 3, lim, &names, &names_max, &new_int64))
        Py_RETURN_NONE;
    Py_ssize_t o = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t next;
    PyObject *attrs = decode_array((const unsigned char *)PyBytes_AS_STRING(data),
                                   PyBytes_GET_SIZE(data), o, end, lim, names, names_max,
                                   new_int64, &next);
    if (attrs == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *offset = PyLong_FromSsize_t(next);
    if (offset == NULL) {
        Py_DECREF(attrs);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, attrs, offset);
    Py_DECREF(attrs);
    Py_DECREF(offset);
    return result;
}

/* read_notify_emit(body, max_attributes, max_name, max_string, max_opaque,
 *                  names, names_max, new_int64)
 *     -> (attrs, end, deliver_insecure, None) or None
 * The happy path of elvin.protocol.fastpath.decode_notify_emit in one call:
 * a NotifyEmit body (pkt_id first, not checked here) whose attributes are
 * followed by exactly a deliver-insecure word of 0 or 1 and an empty key
 * list. Anything else (keys, a bad tail, anything read_attrs gives up on):
 * None, and the pure decoder decides. */
static PyObject *
read_notify_emit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "read_notify_emit takes 8 arguments");
        return NULL;
    }
    PyObject *data = args[0];
    Py_ssize_t lim[4], names_max;
    PyObject *names, *new_int64;
    if (!PyBytes_CheckExact(data) || !shared_args(args + 1, lim, &names, &names_max, &new_int64))
        Py_RETURN_NONE;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    Py_ssize_t next;
    PyObject *attrs = decode_array(buf, size, 4, size, lim, names, names_max, new_int64, &next);
    if (attrs == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    uint32_t insecure;
    if (size - next != 8 || be32(buf + next + 4) != 0
            || ((insecure = be32(buf + next)) != 0 && insecure != 1)) {
        Py_DECREF(attrs);
        Py_RETURN_NONE;
    }
    PyObject *end = PyLong_FromSsize_t(next);
    if (end == NULL) {
        Py_DECREF(attrs);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(4, attrs, end, insecure ? Py_True : Py_False, Py_None);
    Py_DECREF(attrs);
    Py_DECREF(end);
    return result;
}

static PyMethodDef methods[] = {
    {"read_attrs", (PyCFunction)(void (*)(void))read_attrs, METH_FASTCALL,
     "The happy path of xdrprim.read_attrs; None: let the pure reader decide."},
    {"read_notify_emit", (PyCFunction)(void (*)(void))read_notify_emit, METH_FASTCALL,
     "The happy path of fastpath.decode_notify_emit; None: let the pure decoder decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "elvin_xdrfast",
    "Compiled fast path of elvin.protocol.xdrprim (optional; make accel).", -1, methods,
};

PyMODINIT_FUNC
PyInit_elvin_xdrfast(void)
{
    return PyModule_Create(&module);
}
