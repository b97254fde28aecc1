/* Buffer helpers shared by the kernels of _words.c and _unigram.c: 1-D arrays through the buffer protocol (no
 * numpy headers). The Python callers make every array themselves, so a wrong kind is a bug, reported as TypeError. */
#ifndef PSP_BUFFERS_H
#define PSP_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A C-contiguous 1-D buffer of items of `itemsize` bytes, writable if asked. */
static inline int get_vector(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *name) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s array", name, writable ? " writable" : "");
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must be a 1-D array of %zd-byte items", name, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Releases the first `count` buffers of `views`. */
static inline void release_all(Py_buffer *views, int count) {
    for (int k = 0; k < count; k++) PyBuffer_Release(&views[k]);
}

#endif
