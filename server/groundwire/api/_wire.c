/* A Retrieve response's results encoded in one call (api/convert.py).
 *
 * convert._fill_result writes a result with ~30 protobuf field writes (the ids,
 * rank, score, a provenance entry and its score, content, span, title, section,
 * metadata), each a call into upb's Python binding: ~34 us for a lexical
 * Retrieve's 10 results in process, the largest part of the handler after the
 * search (bench/bench_retrieve_breakdown.py). This reads the same values from the
 * domain's RankedResult objects and writes the wire form of RetrieveResponse's
 * `results` field (1) in one pass; the caller merges it into the response (upb
 * parses it in C). The encoding is retriever.proto's and common.proto's, whose
 * field numbers a published v1 API never changes:
 *
 *   RetrievalResult: 1 document_id, 2 chunk_id, 3 rank (uint32), 4 score,
 *                    5 provenance (repeated LegProvenance), 6 content,
 *                    7 span (CharSpan), 8 title, 9 section,
 *                    10 metadata (map<string, string>: entries of 1 key, 2 value)
 *   Score:           1 raw_score (double), 2 metric (enum), 3 higher_is_better,
 *                    4 relevance (optional double)
 *   LegProvenance:   1 leg (enum), 2 rank (uint32), 3 score
 *   CharSpan:        1 start (uint32), 2 end (uint32)
 *
 * As upb writes what _fill_result sets: a proto3 scalar is left out when it is
 * its default (an empty string, 0, false, a double whose bits are all zero), the
 * score, span and each provenance entry's score are always present (_fill_result
 * writes into them), relevance is present when not None. Tests hold the two
 * equal on random results (tests/unit/test_wire_results.py).
 *
 * results(results, metrics, legs) -> bytes
 *   results: a sequence of RankedResult (hit, rank, score, provenance)
 *   metrics: dict ScoreMetric -> its wire number
 *   legs:    dict Leg -> its wire number
 * leg_results(hits, leg, metrics, legs) -> bytes
 *   hits:    a sequence of ChunkHit, one leg's in rank order: each written as the
 *            RankedResult fusion.single_leg makes of it (rank its position from 1,
 *            its own score, provenance that leg with the same rank and score)
 * record_results(records, raws, metric, higher_is_better, leg) -> bytes
 *   records: a sequence of objects with a hit's fields but its score (a store's
 *            rows, domain.retrieval.ScoredHits), one leg's in rank order
 *   raws:    their raw scores (floats), of the metric numbered `metric` (an int),
 *            which has no relevance; `leg` the leg's number: each written as
 *            leg_results writes the hit ScoredHits makes of it
 * A value upb would refuse is refused the same way: a rank or offset outside
 * uint32 raises ValueError, a string that cannot be UTF-8 UnicodeEncodeError, a
 * metric or leg missing from its dict KeyError; a string field that is not a str
 * raises TypeError (upb would take UTF-8 bytes, which the domain never holds).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *s_hit, *s_rank, *s_score, *s_provenance, *s_document_id, *s_chunk_id,
    *s_content, *s_start, *s_end, *s_title, *s_section, *s_metadata, *s_raw, *s_metric,
    *s_higher_is_better, *s_relevance, *s_leg;

typedef struct {
    char *data;
    size_t len;
    size_t cap;
} Out;

static int out_reserve(Out *out, size_t more) {
    if (out->len + more <= out->cap) return 0;
    size_t cap = out->cap ? out->cap : 4096;
    while (cap < out->len + more) cap *= 2;
    char *data = PyMem_Realloc(out->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->data = data;
    out->cap = cap;
    return 0;
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static char *put_varint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static char *put_double(char *p, uint64_t bits) {
    for (int i = 0; i < 8; i++) {
        *p++ = (char)(bits & 0xff);
        bits >>= 8;
    }
    return p;
}

/* A length-delimited field's size (tag, length, bytes). */
static size_t delimited_size(size_t len) { return 1 + varint_size(len) + len; }

static char *put_delimited(char *p, int field, const char *data, size_t len) {
    *p++ = (char)((field << 3) | 2);
    p = put_varint(p, len);
    memcpy(p, data, len);
    return p + len;
}

typedef struct {
    const char *data;
    Py_ssize_t len;
} Str;

/* A str attribute's UTF-8 (owned by the str, which its object keeps alive). */
static int get_str(PyObject *obj, PyObject *name, PyObject **held, Str *s) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    *held = v;
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%U must be a str", name);
        return -1;
    }
    s->data = PyUnicode_AsUTF8AndSize(v, &s->len);
    return s->data == NULL ? -1 : 0;
}

static int get_uint32(PyObject *obj, PyObject *name, uint32_t *value) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    if (!PyLong_Check(v)) {
        Py_DECREF(v);
        PyErr_Format(PyExc_TypeError, "%U must be an int", name);
        return -1;
    }
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (overflow || n < 0 || n > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%U out of the uint32 range", name);
        return -1;
    }
    *value = (uint32_t)n;
    return 0;
}

/* An enum member's wire number from its dict (as a sign-extended varint). */
static int get_enum(PyObject *obj, PyObject *name, PyObject *numbers, uint64_t *value) {
    PyObject *member = PyObject_GetAttr(obj, name);
    if (member == NULL) return -1;
    PyObject *number = PyDict_GetItemWithError(numbers, member);
    if (number == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, member);
        Py_DECREF(member);
        return -1;
    }
    Py_DECREF(member);
    long n = PyLong_AsLong(number);
    if (n == -1 && PyErr_Occurred()) return -1;
    *value = (uint64_t)(int64_t)n;
    return 0;
}

typedef struct {
    uint64_t raw_bits;
    uint64_t metric;
    int higher;
    int has_relevance;
    uint64_t relevance_bits;
    size_t size;
} ScoreV;

static int get_double_bits(PyObject *v, uint64_t *bits) {
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    memcpy(bits, &d, sizeof d);
    return 0;
}

static int read_score(PyObject *score, PyObject *metrics, ScoreV *s) {
    PyObject *raw = PyObject_GetAttr(score, s_raw);
    if (raw == NULL) return -1;
    int bad = get_double_bits(raw, &s->raw_bits);
    Py_DECREF(raw);
    if (bad || get_enum(score, s_metric, metrics, &s->metric)) return -1;
    PyObject *higher = PyObject_GetAttr(score, s_higher_is_better);
    if (higher == NULL) return -1;
    s->higher = PyObject_IsTrue(higher);
    Py_DECREF(higher);
    if (s->higher < 0) return -1;
    PyObject *relevance = PyObject_GetAttr(score, s_relevance);
    if (relevance == NULL) return -1;
    s->has_relevance = relevance != Py_None;
    bad = s->has_relevance ? get_double_bits(relevance, &s->relevance_bits) : 0;
    Py_DECREF(relevance);
    if (bad) return -1;
    s->size = (s->raw_bits ? 9 : 0) + (s->metric ? 1 + varint_size(s->metric) : 0) +
              (s->higher ? 2 : 0) + (s->has_relevance ? 9 : 0);
    return 0;
}

static char *put_score(char *p, int field, const ScoreV *s) {
    *p++ = (char)((field << 3) | 2);
    p = put_varint(p, s->size);
    if (s->raw_bits) {
        *p++ = (1 << 3) | 1;
        p = put_double(p, s->raw_bits);
    }
    if (s->metric) {
        *p++ = 2 << 3;
        p = put_varint(p, s->metric);
    }
    if (s->higher) {
        *p++ = 3 << 3;
        *p++ = 1;
    }
    if (s->has_relevance) {
        *p++ = (4 << 3) | 1;
        p = put_double(p, s->relevance_bits);
    }
    return p;
}

typedef struct {
    uint64_t leg;
    uint32_t rank;
    ScoreV score;
    size_t size;
} LegV;

/* A provenance entry's encoded size, once its leg, rank and score are read. */
static size_t leg_size(const LegV *l) {
    return (l->leg ? 1 + varint_size(l->leg) : 0) + (l->rank ? 1 + varint_size(l->rank) : 0) +
           delimited_size(l->score.size);
}

static int read_leg(PyObject *entry, PyObject *metrics, PyObject *legs, LegV *l) {
    if (get_enum(entry, s_leg, legs, &l->leg) || get_uint32(entry, s_rank, &l->rank)) return -1;
    PyObject *score = PyObject_GetAttr(entry, s_score);
    if (score == NULL) return -1;
    int bad = read_score(score, metrics, &l->score);
    Py_DECREF(score);
    if (bad) return -1;
    l->size = leg_size(l);
    return 0;
}

enum { DOCUMENT_ID, CHUNK_ID, CONTENT, TITLE, SECTION, STRINGS };
static const int string_fields[STRINGS] = {1, 2, 6, 8, 9};
enum { INLINE_LEGS = 4 };

typedef struct {
    PyObject *held[STRINGS]; /* the str attributes, referenced while written */
    Str strings[STRINGS];
    uint32_t rank, start, end;
    ScoreV score;
    LegV inline_legs[INLINE_LEGS];
    LegV *legs;
    Py_ssize_t leg_count;
    PyObject *items; /* the metadata's (key, value) pairs, or NULL */
    size_t span_size, size;
} ResultV;

static void release_result(ResultV *r) {
    for (int i = 0; i < STRINGS; i++) Py_CLEAR(r->held[i]);
    Py_CLEAR(r->items);
    if (r->legs != r->inline_legs) PyMem_Free(r->legs);
    r->legs = NULL;
}

static size_t string_size(const Str *s) { return s->len ? delimited_size((size_t)s->len) : 0; }

/* The metadata's pairs (NULL when it is empty) and their encoded size. */
static int read_metadata(PyObject *hit, ResultV *r) {
    PyObject *mapping = PyObject_GetAttr(hit, s_metadata);
    if (mapping == NULL) return -1;
    Py_ssize_t n = PyObject_Length(mapping);
    if (n <= 0) {
        Py_DECREF(mapping);
        return n < 0 ? -1 : 0;
    }
    r->items = PyMapping_Items(mapping);
    Py_DECREF(mapping);
    if (r->items == NULL) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(r->items); i++) {
        PyObject *pair = PyList_GET_ITEM(r->items, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "metadata items must be pairs");
            return -1;
        }
        size_t entry = 0;
        for (int j = 0; j < 2; j++) {
            PyObject *s = PyTuple_GET_ITEM(pair, j);
            if (!PyUnicode_Check(s)) {
                PyErr_SetString(PyExc_TypeError, "metadata keys and values must be str");
                return -1;
            }
            Py_ssize_t len;
            if (PyUnicode_AsUTF8AndSize(s, &len) == NULL) return -1;
            entry += delimited_size((size_t)len);
        }
        r->size += delimited_size(entry);
    }
    return 0;
}

static char *put_metadata(char *p, PyObject *items) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        Py_ssize_t klen, vlen;
        const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen);
        const char *v = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 1), &vlen);
        *p++ = (10 << 3) | 2;
        p = put_varint(p, delimited_size((size_t)klen) + delimited_size((size_t)vlen));
        p = put_delimited(p, 1, k, (size_t)klen);
        p = put_delimited(p, 2, v, (size_t)vlen);
    }
    return p;
}

static int read_legs(PyObject *result, PyObject *metrics, PyObject *legs, ResultV *r) {
    PyObject *provenance = PyObject_GetAttr(result, s_provenance);
    if (provenance == NULL) return -1;
    PyObject *seq = PySequence_Fast(provenance, "provenance must be a sequence");
    Py_DECREF(provenance);
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    r->legs = r->inline_legs;
    if (n > INLINE_LEGS) {
        r->legs = PyMem_Malloc((size_t)n * sizeof(LegV));
        if (r->legs == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
    }
    r->leg_count = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (read_leg(PySequence_Fast_GET_ITEM(seq, i), metrics, legs, &r->legs[i])) {
            Py_DECREF(seq);
            return -1;
        }
        r->size += delimited_size(r->legs[i].size);
    }
    Py_DECREF(seq);
    return 0;
}

/* Where the results come from (one encode call's). */
enum { RESULTS, HITS, RECORDS };
typedef struct {
    int mode;
    PyObject *metrics, *legs; /* RESULTS, HITS: the enums' wire numbers */
    uint64_t leg;             /* HITS, RECORDS: the one leg's wire number */
    PyObject *raws;           /* RECORDS: the scores (a list or tuple of floats) */
    uint64_t metric;          /* RECORDS: their metric's wire number */
    int higher;               /* RECORDS: whether a larger score ranks better */
} Source;

/* The score a RECORDS result has: the raw value of its metric, no relevance. */
static int record_score(const Source *src, Py_ssize_t i, ScoreV *s) {
    memset(s, 0, sizeof *s);
    if (get_double_bits(PySequence_Fast_GET_ITEM(src->raws, i), &s->raw_bits)) return -1;
    s->metric = src->metric;
    s->higher = src->higher;
    s->size = (s->raw_bits ? 9 : 0) + (s->metric ? 1 + varint_size(s->metric) : 0) +
              (s->higher ? 2 : 0);
    return 0;
}

/* The i-th result's values: from a RankedResult (RESULTS); from a ChunkHit (HITS)
 * or a record with a hit's fields and its raw score (RECORDS) ranked i + 1 by that
 * score, with the one leg's provenance at the same rank and score. */
static int read_result(PyObject *item, const Source *src, Py_ssize_t i, ResultV *r) {
    static PyObject **const names[STRINGS] = {&s_document_id, &s_chunk_id, &s_content, &s_title,
                                              &s_section};
    PyObject *hit = src->mode != RESULTS ? Py_NewRef(item) : PyObject_GetAttr(item, s_hit);
    if (hit == NULL) return -1;
    int bad = 0;
    for (int j = 0; j < STRINGS && !bad; j++) {
        bad = get_str(hit, *names[j], &r->held[j], &r->strings[j]);
        if (!bad) r->size += string_size(&r->strings[j]);
    }
    bad = bad || get_uint32(hit, s_start, &r->start) || get_uint32(hit, s_end, &r->end) ||
          read_metadata(hit, r);
    Py_DECREF(hit);
    if (bad) return -1;
    if (src->mode == RECORDS) {
        if (record_score(src, i, &r->score)) return -1;
    } else {
        PyObject *score = PyObject_GetAttr(item, s_score);
        if (score == NULL) return -1;
        bad = read_score(score, src->metrics, &r->score);
        Py_DECREF(score);
        if (bad) return -1;
    }
    if (src->mode == RESULTS) {
        if (get_uint32(item, s_rank, &r->rank) || read_legs(item, src->metrics, src->legs, r))
            return -1;
    } else {
        /* One provenance entry: the leg, the same rank and score. */
        r->rank = (uint32_t)(i + 1);
        LegV *l = r->legs = r->inline_legs;
        r->leg_count = 1;
        l->leg = src->leg;
        l->rank = r->rank;
        l->score = r->score;
        l->size = leg_size(l);
        r->size += delimited_size(l->size);
    }
    r->span_size = (r->start ? 1 + varint_size(r->start) : 0) +
                   (r->end ? 1 + varint_size(r->end) : 0);
    r->size += (r->rank ? 1 + varint_size(r->rank) : 0) + delimited_size(r->score.size) +
               delimited_size(r->span_size);
    return 0;
}

static char *put_string(char *p, ResultV *r, int which) {
    const Str *s = &r->strings[which];
    return s->len ? put_delimited(p, string_fields[which], s->data, (size_t)s->len) : p;
}

/* The result as RetrieveResponse's field 1, in field order. */
static char *put_result(char *p, ResultV *r) {
    *p++ = (1 << 3) | 2;
    p = put_varint(p, r->size);
    p = put_string(p, r, DOCUMENT_ID);
    p = put_string(p, r, CHUNK_ID);
    if (r->rank) {
        *p++ = 3 << 3;
        p = put_varint(p, r->rank);
    }
    p = put_score(p, 4, &r->score);
    for (Py_ssize_t i = 0; i < r->leg_count; i++) {
        const LegV *l = &r->legs[i];
        *p++ = (5 << 3) | 2;
        p = put_varint(p, l->size);
        if (l->leg) {
            *p++ = 1 << 3;
            p = put_varint(p, l->leg);
        }
        if (l->rank) {
            *p++ = 2 << 3;
            p = put_varint(p, l->rank);
        }
        p = put_score(p, 3, &l->score);
    }
    p = put_string(p, r, CONTENT);
    *p++ = (7 << 3) | 2;
    p = put_varint(p, r->span_size);
    if (r->start) {
        *p++ = 1 << 3;
        p = put_varint(p, r->start);
    }
    if (r->end) {
        *p++ = 2 << 3;
        p = put_varint(p, r->end);
    }
    p = put_string(p, r, TITLE);
    p = put_string(p, r, SECTION);
    if (r->items != NULL) p = put_metadata(p, r->items);
    return p;
}

static PyObject *encode(PyObject *items, const Source *src) {
    PyObject *seq = PySequence_Fast(items, "results must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (src->mode != RESULTS && n > UINT32_MAX) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many hits to rank in uint32");
        return NULL;
    }
    if (src->mode == RECORDS && PySequence_Fast_GET_SIZE(src->raws) != n) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "one score a record");
        return NULL;
    }
    Out out = {NULL, 0, 0};
    PyObject *encoded = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        ResultV r;
        memset(&r, 0, sizeof r);
        int bad = read_result(PySequence_Fast_GET_ITEM(seq, i), src, i, &r);
        if (!bad) bad = out_reserve(&out, 1 + varint_size(r.size) + r.size);
        if (!bad) {
            char *end = put_result(out.data + out.len, &r);
            out.len = (size_t)(end - out.data);
        }
        release_result(&r);
        if (bad) goto done;
    }
    encoded = PyBytes_FromStringAndSize(out.data, (Py_ssize_t)out.len);
done:
    PyMem_Free(out.data);
    Py_DECREF(seq);
    return encoded;
}

/* An enum's wire number from a Python int (a sign-extended varint). */
static int wire_number(PyObject *value, uint64_t *number) {
    long n = PyLong_AsLong(value);
    if (n == -1 && PyErr_Occurred()) return -1;
    *number = (uint64_t)(int64_t)n;
    return 0;
}

static PyObject *results(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyDict_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "results(results, metrics: dict, legs: dict)");
        return NULL;
    }
    Source src = {RESULTS, args[1], args[2], 0, NULL, 0, 0};
    return encode(args[0], &src);
}

static PyObject *leg_results(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || !PyDict_Check(args[2]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "leg_results(hits, leg, metrics: dict, legs: dict)");
        return NULL;
    }
    Source src = {HITS, args[2], args[3], 0, NULL, 0, 0};
    PyObject *number = PyDict_GetItemWithError(args[3], args[1]);
    if (number == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, args[1]);
        return NULL;
    }
    if (wire_number(number, &src.leg)) return NULL;
    return encode(args[0], &src);
}

static PyObject *record_results(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyLong_Check(args[2]) || !PyLong_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "record_results(records, raws, metric: int, higher_is_better, leg: int)");
        return NULL;
    }
    Source src = {RECORDS, NULL, NULL, 0, NULL, 0, 0};
    if (wire_number(args[2], &src.metric) || wire_number(args[4], &src.leg)) return NULL;
    src.higher = PyObject_IsTrue(args[3]);
    if (src.higher < 0) return NULL;
    src.raws = PySequence_Fast(args[1], "raws must be a sequence");
    if (src.raws == NULL) return NULL;
    PyObject *encoded = encode(args[0], &src);
    Py_DECREF(src.raws);
    return encoded;
}

static PyMethodDef methods[] = {
    {"results", (PyCFunction)(void (*)(void))results, METH_FASTCALL,
     "results(results, metrics, legs) -> bytes: RetrieveResponse.results encoded."},
    {"leg_results", (PyCFunction)(void (*)(void))leg_results, METH_FASTCALL,
     "leg_results(hits, leg, metrics, legs) -> bytes: one leg's hits as results."},
    {"record_results", (PyCFunction)(void (*)(void))record_results, METH_FASTCALL,
     "record_results(records, raws, metric, higher_is_better, leg) -> bytes: scored records "
     "as one leg's results."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wire(void) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_hit, "hit"},         {&s_rank, "rank"},
        {&s_score, "score"},     {&s_provenance, "provenance"},
        {&s_document_id, "document_id"}, {&s_chunk_id, "chunk_id"},
        {&s_content, "content"}, {&s_start, "start"},
        {&s_end, "end"},         {&s_title, "title"},
        {&s_section, "section"}, {&s_metadata, "metadata"},
        {&s_raw, "raw"},         {&s_metric, "metric"},
        {&s_higher_is_better, "higher_is_better"}, {&s_relevance, "relevance"},
        {&s_leg, "leg"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (*names[i].slot == NULL) {
            *names[i].slot = PyUnicode_InternFromString(names[i].name);
            if (*names[i].slot == NULL) return NULL;
        }
    }
    return PyModule_Create(&module);
}
