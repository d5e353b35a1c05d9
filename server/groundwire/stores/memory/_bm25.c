/* The memory store's BM25 top k in one call (stores/memory/search.py).
 *
 * The numpy path scores a query with ~30 numpy calls (an array over the tenant's
 * rows, one scatter-add per term, nonzero, gathers, the published check, a
 * partition); served among grpc.aio's work each call meets numpy's dispatch code
 * cold, which cost a lexical Retrieve ~0.1 ms of server CPU (bench_grpc_retrieve.py
 * with the scoring memoized: 61-63% of Health's QPS against 51-52%). This is the
 * same arithmetic in one pass: the weighted contributions of each term, in query
 * order, added from 0.0 into a sum per position (the additions, in their order, of
 * the numpy path, so the sums are bit-identical; compiled with
 * -ffp-contract=off so no addition is fused), then the k best positions whose row
 * is published (below n and live), with every position tied with the k-th.
 *
 * top_k(positions, contributions, tenant_rows, live, n, k) -> (rows, scores)
 *   positions:     tuple of C-contiguous int64 buffers, a term's positions among
 *                  the tenant's rows (distinct within a term)
 *   contributions: tuple of C-contiguous float64 buffers, the same lengths
 *   tenant_rows:   C-contiguous int64 buffer, the tenant's rows
 *   live:          C-contiguous bool/uint8 buffer, one byte a row of the index
 *   n:             rows below n are published if live
 *   k:             how many (>= 1)
 * Returns two lists, the rows and their sums, the largest sum first (then the
 * smaller position: the caller still orders equal sums by document). Every
 * index is checked; a bad argument raises TypeError or ValueError. The GIL is
 * released while it scores (the buffers are read-only views the store never
 * modifies once handed out). The per-position sums live in a scratch array per
 * thread, kept between calls and cleared where a call wrote (zeroing an array
 * over the tenant's rows for every query would cost more than the scoring).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

typedef struct {
    int64_t position;
    double sum;
} Pair;

enum { UNSEEN = 0, SEEN = 1, CANDIDATE = 2 };

/* This thread's scratch: a sum and a mark per position, all zero between calls. */
static _Thread_local double *scratch_sums = NULL;
static _Thread_local unsigned char *scratch_marks = NULL;
static _Thread_local Py_ssize_t scratch_size = 0;

static int ensure_scratch(Py_ssize_t size) {
    if (size <= scratch_size) return 0;
    double *sums = PyMem_RawCalloc((size_t)size, sizeof(double));
    unsigned char *marks = PyMem_RawCalloc((size_t)size, 1);
    if (sums == NULL || marks == NULL) {
        PyMem_RawFree(sums);
        PyMem_RawFree(marks);
        return -1;
    }
    PyMem_RawFree(scratch_sums);
    PyMem_RawFree(scratch_marks);
    scratch_sums = sums;
    scratch_marks = marks;
    scratch_size = size;
    return 0;
}

static int get_buffer(PyObject *obj, Buf *buf, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, &buf->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        return -1;
    }
    buf->held = 1;
    if (buf->view.itemsize != itemsize || buf->view.ndim > 1) {
        PyErr_Format(PyExc_TypeError, "%s: expected a one-dimensional array of %zd-byte items",
                     what, itemsize);
        return -1;
    }
    return 0;
}

static void release(Buf *bufs, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
    }
}

/* Sift down in a min-heap of doubles. */
static void sift(double *heap, Py_ssize_t size, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t smallest = i, l = 2 * i + 1, r = l + 1;
        if (l < size && heap[l] < heap[smallest]) smallest = l;
        if (r < size && heap[r] < heap[smallest]) smallest = r;
        if (smallest == i) return;
        double t = heap[i];
        heap[i] = heap[smallest];
        heap[smallest] = t;
        i = smallest;
    }
}

/* Best first: the larger sum, then the smaller position. */
static int best_first(const void *a, const void *b) {
    const Pair *x = a, *y = b;
    if (x->sum != y->sum) return x->sum < y->sum ? 1 : -1;
    return (x->position > y->position) - (x->position < y->position);
}

static PyObject *top_k(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *positions, *contributions, *rows_obj, *live_obj;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "O!O!OOnn", &PyTuple_Type, &positions, &PyTuple_Type,
                          &contributions, &rows_obj, &live_obj, &n, &k)) {
        return NULL;
    }
    Py_ssize_t terms = PyTuple_GET_SIZE(positions);
    if (PyTuple_GET_SIZE(contributions) != terms) {
        PyErr_SetString(PyExc_ValueError, "one contributions array per positions array");
        return NULL;
    }
    if (k < 1) {
        PyErr_SetString(PyExc_ValueError, "k must be at least 1");
        return NULL;
    }
    Py_ssize_t nbufs = 2 * terms + 2;
    Buf *bufs = PyMem_Calloc((size_t)nbufs, sizeof(Buf));
    if (bufs == NULL) return PyErr_NoMemory();
    PyObject *result = NULL, *out_rows = NULL, *out_sums = NULL;
    int64_t *touched = NULL;
    double *heap = NULL;
    Pair *best = NULL;
    Py_ssize_t total = 0;

    Buf *rows = &bufs[2 * terms], *live = &bufs[2 * terms + 1];
    if (get_buffer(rows_obj, rows, 8, "tenant_rows") || get_buffer(live_obj, live, 1, "live")) {
        goto done;
    }
    for (Py_ssize_t t = 0; t < terms; t++) {
        Buf *p = &bufs[2 * t], *c = &bufs[2 * t + 1];
        if (get_buffer(PyTuple_GET_ITEM(positions, t), p, 8, "positions") ||
            get_buffer(PyTuple_GET_ITEM(contributions, t), c, 8, "contributions")) {
            goto done;
        }
        if (p->view.len != c->view.len) {
            PyErr_SetString(PyExc_ValueError,
                            "a term's positions and contributions differ in length");
            goto done;
        }
        total += p->view.len / 8;
    }
    const Py_ssize_t size = rows->view.len / 8, live_len = live->view.len;
    const int64_t *tenant_rows = rows->view.buf;
    const unsigned char *alive = live->view.buf;
    touched = PyMem_RawMalloc((size_t)(total ? total : 1) * sizeof(int64_t));
    heap = PyMem_RawMalloc((size_t)k * sizeof(double));
    if (touched == NULL || heap == NULL || ensure_scratch(size) != 0) {
        PyErr_NoMemory();
        goto done;
    }
    double *sums = scratch_sums;
    unsigned char *marks = scratch_marks;
    Py_ssize_t matched = 0, filled = 0, kept = 0;
    const char *bad = NULL;
    int no_memory = 0;

    Py_BEGIN_ALLOW_THREADS
    /* Query order, each sum from 0.0: the numpy path's additions. */
    for (Py_ssize_t t = 0; t < terms && bad == NULL; t++) {
        const int64_t *pos = bufs[2 * t].view.buf;
        const double *con = bufs[2 * t + 1].view.buf;
        const Py_ssize_t len = bufs[2 * t].view.len / 8;
        for (Py_ssize_t i = 0; i < len; i++) {
            const int64_t p = pos[i];
            if (p < 0 || p >= size) {
                bad = "a position is outside the tenant's rows";
                break;
            }
            if (marks[p] == UNSEEN) {
                marks[p] = SEEN;
                touched[matched++] = p;
            }
            sums[p] += con[i];
        }
    }
    /* Published rows only; the k best sums in a min-heap, its root the k-th. */
    for (Py_ssize_t i = 0; i < matched && bad == NULL; i++) {
        const int64_t p = touched[i], row = tenant_rows[p];
        if (row < 0 || (row < n && row >= live_len)) {
            bad = "a tenant row is outside the live array";
            break;
        }
        if (row >= n || !alive[row]) continue;
        marks[p] = CANDIDATE;
        const double v = sums[p];
        if (filled < k) {
            heap[filled++] = v;
            if (filled == k) {
                for (Py_ssize_t j = k / 2; j-- > 0;) sift(heap, k, j);
            }
        } else if (v > heap[0]) {
            heap[0] = v;
            sift(heap, k, 0);
        }
    }
    /* Every candidate at or above the k-th (all of them when fewer than k). */
    if (bad == NULL && filled > 0) {
        const double kth = heap[0];
        best = PyMem_RawMalloc((size_t)matched * sizeof(Pair));
        if (best == NULL) {
            no_memory = 1;
        } else {
            for (Py_ssize_t i = 0; i < matched; i++) {
                const int64_t p = touched[i];
                if (marks[p] == CANDIDATE && (filled < k || sums[p] >= kth)) {
                    best[kept].position = p;
                    best[kept].sum = sums[p];
                    kept++;
                }
            }
            qsort(best, (size_t)kept, sizeof(Pair), best_first);
        }
    }
    /* Back to all zeros for the thread's next call, wherever this one wrote. */
    for (Py_ssize_t i = 0; i < matched; i++) {
        sums[touched[i]] = 0.0;
        marks[touched[i]] = UNSEEN;
    }
    Py_END_ALLOW_THREADS

    if (bad != NULL) {
        PyErr_SetString(PyExc_ValueError, bad);
        goto done;
    }
    if (no_memory) {
        PyErr_NoMemory();
        goto done;
    }
    out_rows = PyList_New(kept);
    out_sums = PyList_New(kept);
    if (out_rows == NULL || out_sums == NULL) goto done;
    for (Py_ssize_t i = 0; i < kept; i++) {
        PyObject *r = PyLong_FromLongLong(tenant_rows[best[i].position]);
        PyObject *v = PyFloat_FromDouble(best[i].sum);
        if (r == NULL || v == NULL) {
            Py_XDECREF(r);
            Py_XDECREF(v);
            goto done;
        }
        PyList_SET_ITEM(out_rows, i, r);
        PyList_SET_ITEM(out_sums, i, v);
    }
    result = PyTuple_Pack(2, out_rows, out_sums);

done:
    Py_XDECREF(out_rows);
    Py_XDECREF(out_sums);
    PyMem_RawFree(touched);
    PyMem_RawFree(heap);
    PyMem_RawFree(best);
    release(bufs, nbufs);
    PyMem_Free(bufs);
    return result;
}

static PyMethodDef methods[] = {
    {"top_k", top_k, METH_VARARGS, "The k best published rows of a BM25 query and their sums."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bm25", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bm25(void) { return PyModule_Create(&module); }
