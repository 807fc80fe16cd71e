/* The optional compiled fast path of elvin.protocol.xdrprim.read_attrs.
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
    PyObject *names = args[7];
    PyObject *new_int64 = args[9];
    if (!PyBytes_CheckExact(data) || !PyDict_CheckExact(names))
        Py_RETURN_NONE;
    Py_ssize_t o = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t max_attributes = PyLong_AsSsize_t(args[3]);
    Py_ssize_t max_name = PyLong_AsSsize_t(args[4]);
    Py_ssize_t max_string = PyLong_AsSsize_t(args[5]);
    Py_ssize_t max_opaque = PyLong_AsSsize_t(args[6]);
    Py_ssize_t names_max = PyLong_AsSsize_t(args[8]);
    if (PyErr_Occurred()) {       /* not ints, or out of range: the pure path decides */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    if (o < 0 || end > size || o + 4 > size)
        Py_RETURN_NONE;
    int32_t count = (int32_t)be32(buf + o);
    if (count < 0 || (Py_ssize_t)count * 12 > end - o - 4 || count > max_attributes)
        Py_RETURN_NONE;
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
    PyObject *offset = PyLong_FromSsize_t(o);
    if (offset == NULL)
        goto fail;
    PyObject *result = PyTuple_Pack(2, attrs, offset);
    Py_DECREF(attrs);
    Py_DECREF(offset);
    return result;
give_up:
    Py_DECREF(attrs);
    Py_RETURN_NONE;
fail:
    Py_DECREF(attrs);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_attrs", (PyCFunction)(void (*)(void))read_attrs, METH_FASTCALL,
     "The happy path of xdrprim.read_attrs; None: let the pure reader decide."},
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
