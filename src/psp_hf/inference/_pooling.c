/* Fused gather-and-pool of sentence bags: each piece's row is added where it is read, as torch's embedding_bag
 * does, instead of numpy's copy of every row before the sum (bench/pooling.py measured that copy-then-add at 4x
 * embedding_bag). One call pools a whole batch on the calling thread with the GIL released, so encode's threads
 * overlap and torch is not needed to pool fast.
 *
 * Same numbers as psp_hf.inference.pooling.pool_bags (and embedding_bag) for mean, sum and max: each bag's rows
 * are added one after another in float32, in order, and a mean divides the sum by the bag's length. A weighted
 * mean adds weight * row in order and divides by the sum of the weights (at least 1e-12). Floating-point
 * contraction is switched off at build time (setup.py) so that weight * row + sum is never fused into an FMA.
 *
 * Only the buffer protocol is used (no numpy headers): building needs a C compiler and Python's headers alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { MODE_MEAN = 0, MODE_SUM = 1, MODE_MAX = 2 };

/* Four floats as one value: GCC's and clang's vector extension, compiled to SSE on x86-64 (NEON on arm64, plain
 * floats elsewhere). Adding vectors adds each lane on its own, so the order of a dimension's additions, and thus its
 * rounding, is the same as adding float by float. Written out because the auto-vectoriser mixed scalar and vector
 * code in the loops below (half the speed). */
typedef float vec4 __attribute__((vector_size(16)));
typedef int32_t mask4 __attribute__((vector_size(16)));

static inline vec4 load4(const float *p) {
    vec4 v;
    memcpy(&v, p, sizeof v); /* rows need not be 16-byte aligned */
    return v;
}

static inline void store4(float *p, vec4 v) { memcpy(p, &v, sizeof v); }

/* As np.maximum, lane by lane: a NaN on either side wins. */
static inline vec4 maximum4(vec4 a, vec4 b) {
    mask4 keep = (a >= b) | (a != a);
    return (vec4)((keep & (mask4)a) | (~keep & (mask4)b));
}

static inline float maximum(float a, float b) { return (a >= b || a != a) ? a : b; }

static int is_format(const char *format, const char *accepted) {
    if (format == NULL) return 0;
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') format++;
    return format[0] != '\0' && format[1] == '\0' && strchr(accepted, format[0]) != NULL;
}

/* A C-contiguous buffer of `ndim` dimensions whose items are float32 ("f") or int64 ("q"/"l"). */
static int get_buffer(PyObject *object, Py_buffer *view, int ndim, int want_float, int writable, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous%s array", name, writable ? " writable" : "");
        return -1;
    }
    int format_ok = want_float ? is_format(view->format, "f") : is_format(view->format, "ql");
    if (view->ndim != ndim || !format_ok || view->itemsize != (want_float ? 4 : 8)) {
        PyErr_Format(PyExc_TypeError, "%s must be a %d-D %s array", name, ndim, want_float ? "float32" : "int64");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The bounds of bag `bag`: pieces start..stop-1, pooled into target. */
#define BAG_BOUNDS(bag)                                                                                              \
    Py_ssize_t start = (Py_ssize_t)offsets[bag];                                                                     \
    Py_ssize_t stop = (bag) + 1 < n_bags ? (Py_ssize_t)offsets[(bag) + 1] : n_ids;                                   \
    float *target = out + (bag) * dim

/* A bag's rows are pooled sixteen dimensions at a time, in four vectors that stay in registers while all of the bag's
 * rows are added into them (each partial result is stored once per bag, not once per piece), then four at a time,
 * then one: models' widths are multiples of 16 or 4 but need not be. */
#define ROW(k) (table + ids[k] * dim + j0)

/* Sum (divide by 1, which is exact) or mean (divide by the length) of each bag. */
static void pool_sums(const float *table, Py_ssize_t dim, const int64_t *ids, Py_ssize_t n_ids,
                      const int64_t *offsets, Py_ssize_t n_bags, int mean, float *out) {
    for (Py_ssize_t bag = 0; bag < n_bags; bag++) {
        BAG_BOUNDS(bag);
        if (stop <= start) { /* an empty bag pools to zeros, as in embedding_bag */
            memset(target, 0, (size_t)dim * sizeof(float));
            continue;
        }
        float divisor = mean ? (float)(stop - start) : 1.0f;
        Py_ssize_t j0 = 0;
        for (; j0 + 16 <= dim; j0 += 16) {
            const float *first = ROW(start);
            vec4 a = load4(first), b = load4(first + 4), c = load4(first + 8), d = load4(first + 12);
            for (Py_ssize_t k = start + 1; k < stop; k++) {
                const float *row = ROW(k);
                a += load4(row);
                b += load4(row + 4);
                c += load4(row + 8);
                d += load4(row + 12);
            }
            store4(target + j0, a / divisor);
            store4(target + j0 + 4, b / divisor);
            store4(target + j0 + 8, c / divisor);
            store4(target + j0 + 12, d / divisor);
        }
        for (; j0 + 4 <= dim; j0 += 4) {
            vec4 a = load4(ROW(start));
            for (Py_ssize_t k = start + 1; k < stop; k++) a += load4(ROW(k));
            store4(target + j0, a / divisor);
        }
        for (; j0 < dim; j0++) {
            float a = *ROW(start);
            for (Py_ssize_t k = start + 1; k < stop; k++) a += *ROW(k);
            target[j0] = a / divisor;
        }
    }
}

/* Largest value of each dimension in each bag. */
static void pool_maxima(const float *table, Py_ssize_t dim, const int64_t *ids, Py_ssize_t n_ids,
                        const int64_t *offsets, Py_ssize_t n_bags, float *out) {
    for (Py_ssize_t bag = 0; bag < n_bags; bag++) {
        BAG_BOUNDS(bag);
        if (stop <= start) {
            memset(target, 0, (size_t)dim * sizeof(float));
            continue;
        }
        Py_ssize_t j0 = 0;
        for (; j0 + 4 <= dim; j0 += 4) {
            vec4 a = load4(ROW(start));
            for (Py_ssize_t k = start + 1; k < stop; k++) a = maximum4(a, load4(ROW(k)));
            store4(target + j0, a);
        }
        for (; j0 < dim; j0++) {
            float a = *ROW(start);
            for (Py_ssize_t k = start + 1; k < stop; k++) a = maximum(a, *ROW(k));
            target[j0] = a;
        }
    }
}

/* Weighted mean of each bag: the sum of weight * row, divided by the sum of the weights (at least 1e-12). */
static void pool_weighted(const float *table, Py_ssize_t dim, const int64_t *ids, Py_ssize_t n_ids,
                          const int64_t *offsets, Py_ssize_t n_bags, const float *weights, float *out) {
    for (Py_ssize_t bag = 0; bag < n_bags; bag++) {
        BAG_BOUNDS(bag);
        if (stop <= start) {
            memset(target, 0, (size_t)dim * sizeof(float));
            continue;
        }
        float total = weights[start];
        for (Py_ssize_t k = start + 1; k < stop; k++) total += weights[k];
        float divisor = maximum(total, 1e-12f);
        Py_ssize_t j0 = 0;
        for (; j0 + 16 <= dim; j0 += 16) {
            const float *first = ROW(start);
            float w = weights[start];
            vec4 a = w * load4(first), b = w * load4(first + 4), c = w * load4(first + 8), d = w * load4(first + 12);
            for (Py_ssize_t k = start + 1; k < stop; k++) {
                const float *row = ROW(k);
                w = weights[k];
                a += w * load4(row);
                b += w * load4(row + 4);
                c += w * load4(row + 8);
                d += w * load4(row + 12);
            }
            store4(target + j0, a / divisor);
            store4(target + j0 + 4, b / divisor);
            store4(target + j0 + 8, c / divisor);
            store4(target + j0 + 12, d / divisor);
        }
        for (; j0 + 4 <= dim; j0 += 4) {
            vec4 a = weights[start] * load4(ROW(start));
            for (Py_ssize_t k = start + 1; k < stop; k++) a += weights[k] * load4(ROW(k));
            store4(target + j0, a / divisor);
        }
        for (; j0 < dim; j0++) {
            float a = weights[start] * *ROW(start);
            for (Py_ssize_t k = start + 1; k < stop; k++) a += weights[k] * *ROW(k);
            target[j0] = a / divisor;
        }
    }
}

/* Pools every bag into `out`; the ids and offsets were checked by the caller. */
static void pool_all(const float *table, Py_ssize_t dim, const int64_t *ids, Py_ssize_t n_ids,
                     const int64_t *offsets, Py_ssize_t n_bags, const float *weights, int mode, float *out) {
    if (weights != NULL)
        pool_weighted(table, dim, ids, n_ids, offsets, n_bags, weights, out);
    else if (mode == MODE_MAX)
        pool_maxima(table, dim, ids, n_ids, offsets, n_bags, out);
    else
        pool_sums(table, dim, ids, n_ids, offsets, n_bags, mode == MODE_MEAN, out);
}

/* The first problem with the bags, written into `message`, or 0 when they can be pooled. */
static int check_bags(const int64_t *ids, Py_ssize_t n_ids, const int64_t *offsets, Py_ssize_t n_bags,
                      Py_ssize_t n_rows, char *message, size_t size) {
    int64_t previous = 0;
    for (Py_ssize_t bag = 0; bag < n_bags; bag++) {
        if (offsets[bag] < previous || offsets[bag] > n_ids || (bag == 0 && offsets[0] != 0)) {
            snprintf(message, size, "offsets must start at 0 and rise to at most %zd, got %lld at position %zd",
                     n_ids, (long long)offsets[bag], bag);
            return 1;
        }
        previous = offsets[bag];
    }
    int64_t low = 0, high = 0;
    for (Py_ssize_t k = 0; k < n_ids; k++) {
        if (ids[k] < low) low = ids[k];
        if (ids[k] > high) high = ids[k];
    }
    if (n_ids && (low < 0 || high >= n_rows)) {
        snprintf(message, size, "piece ids must be in [0, %zd), got %lld..%lld", n_rows, (long long)low,
                 (long long)high);
        return 2;
    }
    return 0;
}

static PyObject *pool(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *table_object, *ids_object, *offsets_object, *out_object, *weights_object, *result = NULL;
    int mode;
    if (!PyArg_ParseTuple(args, "OOOOiO", &table_object, &ids_object, &offsets_object, &out_object, &mode,
                          &weights_object))
        return NULL;
    if (mode != MODE_MEAN && mode != MODE_SUM && mode != MODE_MAX) {
        PyErr_Format(PyExc_ValueError, "mode must be 0 (mean), 1 (sum) or 2 (max), got %d", mode);
        return NULL;
    }
    Py_buffer table, ids, offsets, out, weights = {0};
    int have_weights = weights_object != Py_None;
    if (get_buffer(table_object, &table, 2, 1, 0, "table") != 0) return NULL;
    if (get_buffer(ids_object, &ids, 1, 0, 0, "flat_ids") != 0) goto release_table;
    if (get_buffer(offsets_object, &offsets, 1, 0, 0, "offsets") != 0) goto release_ids;
    if (get_buffer(out_object, &out, 2, 1, 1, "out") != 0) goto release_offsets;
    if (have_weights && get_buffer(weights_object, &weights, 1, 1, 0, "piece_weights") != 0) goto release_out;

    Py_ssize_t n_rows = table.shape[0], dim = table.shape[1];
    Py_ssize_t n_ids = ids.shape[0], n_bags = offsets.shape[0];
    char message[200];
    if (out.shape[0] != n_bags || out.shape[1] != dim) {
        PyErr_Format(PyExc_ValueError, "out must have shape (%zd, %zd), got (%zd, %zd)", n_bags, dim, out.shape[0],
                     out.shape[1]);
        goto release_weights;
    }
    if (have_weights && weights.shape[0] != n_ids) {
        PyErr_Format(PyExc_ValueError, "piece_weights must have one weight per id (%zd), got %zd", n_ids,
                     weights.shape[0]);
        goto release_weights;
    }
    int problem;
    Py_BEGIN_ALLOW_THREADS
    problem = check_bags(ids.buf, n_ids, offsets.buf, n_bags, n_rows, message, sizeof(message));
    if (problem == 0)
        pool_all(table.buf, dim, ids.buf, n_ids, offsets.buf, n_bags, have_weights ? weights.buf : NULL, mode,
                 out.buf);
    Py_END_ALLOW_THREADS
    if (problem == 1)
        PyErr_SetString(PyExc_ValueError, message);
    else if (problem == 2)
        PyErr_SetString(PyExc_IndexError, message);
    else
        result = Py_NewRef(out_object);

release_weights:
    if (have_weights) PyBuffer_Release(&weights);
release_out:
    PyBuffer_Release(&out);
release_offsets:
    PyBuffer_Release(&offsets);
release_ids:
    PyBuffer_Release(&ids);
release_table:
    PyBuffer_Release(&table);
    return result;
}

/* The unknown-piece rule (psp_hf.modeling.apply_unknown_rule): a bag with content (a piece that is neither the
 * unknown one nor the bare word-boundary one; boundary < 0: there is none) keeps its pieces but the unknown ones; a
 * bag without becomes one unknown piece. Writes the new bags into out_ids and out_offsets and returns how many ids
 * they hold; -1 for offsets that do not rise from 0 within the ids. */
static Py_ssize_t unknown_rule(const int64_t *ids, Py_ssize_t n_ids, const int64_t *offsets, Py_ssize_t n_bags,
                               int64_t unknown, int64_t boundary, int64_t *out_ids, int64_t *out_offsets) {
    Py_ssize_t n_out = 0;
    for (Py_ssize_t bag = 0; bag < n_bags; bag++) {
        int64_t start = offsets[bag], stop = bag + 1 < n_bags ? offsets[bag + 1] : n_ids;
        if ((bag == 0 && start != 0) || start > stop || stop > n_ids) return -1;
        int content = 0;
        for (int64_t k = start; k < stop && !content; k++) content = ids[k] != unknown && ids[k] != boundary;
        out_offsets[bag] = n_out;
        if (!content) {
            out_ids[n_out++] = unknown;
            continue;
        }
        for (int64_t k = start; k < stop; k++)
            if (ids[k] != unknown) out_ids[n_out++] = ids[k];
    }
    return n_out;
}

static PyObject *apply_unknown_rule(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[4];
    long long unknown, boundary;
    if (!PyArg_ParseTuple(args, "OOLLOO", &objects[0], &objects[1], &unknown, &boundary, &objects[2], &objects[3]))
        return NULL;
    static const char *const names[4] = {"flat_ids", "offsets", "out_ids", "out_offsets"};
    Py_buffer b[4];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 4; got++)
        if (get_buffer(objects[got], &b[got], 1, 0, got >= 2, names[got]) != 0) goto release;
    Py_ssize_t n_ids = b[0].shape[0], n_bags = b[1].shape[0];
    if (b[2].shape[0] < n_ids + n_bags || b[3].shape[0] < n_bags) {
        PyErr_SetString(PyExc_ValueError, "out_ids must hold len(flat_ids) + len(offsets) ids, out_offsets one a bag");
        goto release;
    }
    Py_ssize_t n_out;
    Py_BEGIN_ALLOW_THREADS
    n_out = unknown_rule(b[0].buf, n_ids, b[1].buf, n_bags, unknown, boundary < 0 ? -1 : boundary, b[2].buf, b[3].buf);
    Py_END_ALLOW_THREADS
    if (n_out < 0)
        PyErr_Format(PyExc_ValueError, "offsets must start at 0 and rise to at most %zd", n_ids);
    else
        result = PyLong_FromSsize_t(n_out);
release:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"pool", pool, METH_VARARGS,
     "pool(table, flat_ids, offsets, out, mode, piece_weights) -> out\n\n"
     "Pools table[flat_ids] per bag into out (float32, (len(offsets), dim)): mode 0 mean, 1 sum, 2 max; with\n"
     "piece_weights (float32, one per id) their weighted mean. Releases the GIL while it pools."},
    {"apply_unknown_rule", apply_unknown_rule, METH_VARARGS,
     "apply_unknown_rule(flat_ids, offsets, unknown_id, boundary_id, out_ids, out_offsets) -> n\n\n"
     "The unknown-piece rule (boundary_id -1: no boundary piece) into out_ids (room for len(flat_ids) +\n"
     "len(offsets)) and out_offsets; returns how many ids it wrote. Releases the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_pooling",
    .m_doc = "Fused gather-and-pool of sentence bags.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__pooling(void) { return PyModule_Create(&module); }
