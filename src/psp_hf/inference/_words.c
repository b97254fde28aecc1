/* The text side of encode in C, each call with the GIL released where it touches no Python object:
 * - first_bad_sentence: encode's input check, one pass over the list's items;
 * - look_up: one batch's words found, lowercased, hashed, looked up in the word cache's hash indexes and checked
 *   byte for byte (what psp_hf.inference.batch_words does with numpy: _split_words, _hash_words, verified_ids);
 * - gather_pieces: the cached pieces of a batch whose words are all cached;
 * - join_plain: a batch's sentences as one UTF-8 byte string, checked for what the cache cannot read.
 * They give the same arrays as the numpy code, which remains for installs without a C compiler; tests compare the
 * two. numpy's look-up is about twenty calls a batch with the GIL held between them: two encode threads tokenizing
 * side by side spent much of their time waiting for each other.
 *
 * Only the buffer protocol is used (no numpy headers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include <stdint.h>
#include <string.h>

#define NEWLINE 10

/* One of the cache's hash indexes (see _HashIndex): sorted hashes, their word ids, bucket starts over the top bits. */
typedef struct {
    const uint64_t *hashes;
    const int64_t *ids;
    const int64_t *buckets;
    Py_ssize_t size;
    int shift;
} HashIndex;

/* The word id of `hash` in `index`, -1 if absent: the first equal hash of its bucket. */
static inline int64_t find(const HashIndex *index, uint64_t hash) {
    if (index->size == 0) return -1;
    uint64_t bucket = hash >> index->shift;
    for (int64_t k = index->buckets[bucket]; k < index->buckets[bucket + 1]; k++)
        if (index->hashes[k] == hash) return index->ids[k];
    return -1;
}

/* Arguments in the order psp_hf.inference.batch_words.look_up passes them; see look_up's docstring below. */
enum {
    RAW, HASH_TABLE, MAIN_HASHES, MAIN_IDS, MAIN_BUCKETS, RECENT_HASHES, RECENT_IDS, RECENT_BUCKETS, BYTE_BOUNDS,
    WORD_BYTES, TEXT, CHARS, STARTS, ENDS, HASHES, IDS, SENTENCE_BOUNDS, N_BUFFERS
};
static const char *const NAMES[N_BUFFERS] = {
    "raw", "hash_table", "main_hashes", "main_ids", "main_buckets", "recent_hashes", "recent_ids", "recent_buckets",
    "byte_bounds", "word_bytes", "text", "chars", "starts", "ends", "hashes", "ids", "sentence_bounds"};
static const Py_ssize_t ITEMSIZES[N_BUFFERS] = {1, 8, 8, 8, 8, 8, 8, 8, 8, 1, 1, 1, 8, 8, 8, 8, 8};

typedef struct {
    Py_ssize_t n_words;  /* words found */
    Py_ssize_t n_chars;  /* their bytes */
    Py_ssize_t longest;  /* bytes of the longest word, for a hash table too short */
    int newlines_wrong;  /* the bytes do not hold n - 1 newlines */
} Outcome;

static Outcome split_and_look_up(Py_buffer *b, Py_ssize_t n_sentences, const HashIndex *main_index,
                                 const HashIndex *recent_index) {
    const uint8_t *raw = b[RAW].buf;
    Py_ssize_t n_raw = b[RAW].shape[0];
    const uint64_t *table = b[HASH_TABLE].buf;
    Py_ssize_t positions = b[HASH_TABLE].shape[0] / 256;
    const int64_t *byte_bounds = b[BYTE_BOUNDS].buf;
    const uint8_t *word_bytes = b[WORD_BYTES].buf;
    uint8_t *text = b[TEXT].buf, *chars = b[CHARS].buf;
    int64_t *starts = b[STARTS].buf, *ends = b[ENDS].buf, *ids = b[IDS].buf, *bounds = b[SENTENCE_BOUNDS].buf;
    uint64_t *hashes = b[HASHES].buf;
    Outcome outcome = {0, 0, 0, 0};
    Py_ssize_t n_words = 0, n_chars = 0, sentence = 0;
    bounds[0] = 0;
    for (Py_ssize_t i = 0; i < n_raw;) {
        uint8_t byte = raw[i];
        if (byte <= 32) { /* between words: a newline ends a sentence */
            text[i] = byte;
            if (byte == NEWLINE) {
                if (++sentence >= n_sentences) {
                    outcome.newlines_wrong = 1;
                    return outcome;
                }
                bounds[sentence] = n_words;
            }
            i++;
            continue;
        }
        Py_ssize_t start = i;
        uint64_t hash = 0;
        for (; i < n_raw && raw[i] > 32; i++) {
            uint8_t low = raw[i] >= 'A' && raw[i] <= 'Z' ? raw[i] | 0x20 : raw[i];
            text[i] = chars[n_chars++] = low;
            if (i - start < positions) hash += table[256 * (i - start) + low]; /* wraps, as numpy's uint64 sum */
        }
        Py_ssize_t length = i - start;
        if (length > outcome.longest) outcome.longest = length;
        int64_t id = find(main_index, hash);
        if (id < 0) id = find(recent_index, hash);
        if (id >= 0 && (byte_bounds[id + 1] - byte_bounds[id] != length ||
                        memcmp(word_bytes + byte_bounds[id], text + start, (size_t)length) != 0))
            id = -1; /* another word with the same hash */
        starts[n_words] = start;
        ends[n_words] = i;
        hashes[n_words] = hash;
        ids[n_words] = id;
        n_words++;
    }
    if (sentence != n_sentences - 1) outcome.newlines_wrong = 1;
    bounds[n_sentences] = n_words;
    outcome.n_words = n_words;
    outcome.n_chars = n_chars;
    return outcome;
}

static PyObject *look_up(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[N_BUFFERS];
    Py_ssize_t n_sentences;
    int main_shift, recent_shift;
    if (!PyArg_ParseTuple(args, "OnOOOOiOOOiOOOOOOOOO", &objects[RAW], &n_sentences, &objects[HASH_TABLE],
                          &objects[MAIN_HASHES], &objects[MAIN_IDS], &objects[MAIN_BUCKETS], &main_shift,
                          &objects[RECENT_HASHES], &objects[RECENT_IDS], &objects[RECENT_BUCKETS], &recent_shift,
                          &objects[BYTE_BOUNDS], &objects[WORD_BYTES], &objects[TEXT], &objects[CHARS],
                          &objects[STARTS], &objects[ENDS], &objects[HASHES], &objects[IDS],
                          &objects[SENTENCE_BOUNDS]))
        return NULL;
    Py_buffer b[N_BUFFERS];
    int got = 0;
    PyObject *result = NULL;
    for (; got < N_BUFFERS; got++)
        if (get_vector(objects[got], &b[got], ITEMSIZES[got], got >= TEXT, NAMES[got]) != 0) goto release;
    Py_ssize_t n_raw = b[RAW].shape[0], capacity = n_raw / 2 + 1; /* a word and a separator: two bytes at least */
    if (n_sentences < 1 || b[TEXT].shape[0] < n_raw || b[CHARS].shape[0] < n_raw || b[STARTS].shape[0] < capacity ||
        b[ENDS].shape[0] < capacity || b[HASHES].shape[0] < capacity || b[IDS].shape[0] < capacity ||
        b[SENTENCE_BOUNDS].shape[0] < n_sentences + 1 || main_shift < 1 || main_shift > 63 || recent_shift < 1 ||
        recent_shift > 63) {
        PyErr_SetString(PyExc_ValueError, "look_up: output arrays too small or bad index shifts");
        goto release;
    }
    HashIndex main_index = {b[MAIN_HASHES].buf, b[MAIN_IDS].buf, b[MAIN_BUCKETS].buf, b[MAIN_HASHES].shape[0],
                            main_shift};
    HashIndex recent_index = {b[RECENT_HASHES].buf, b[RECENT_IDS].buf, b[RECENT_BUCKETS].buf,
                              b[RECENT_HASHES].shape[0], recent_shift};
    Outcome outcome;
    Py_BEGIN_ALLOW_THREADS
    outcome = split_and_look_up(b, n_sentences, &main_index, &recent_index);
    Py_END_ALLOW_THREADS
    if (outcome.newlines_wrong)
        PyErr_Format(PyExc_ValueError, "look_up: the bytes must hold %zd sentences joined by newlines", n_sentences);
    else
        result = Py_BuildValue("nnn", outcome.n_words, outcome.n_chars, outcome.longest);
release:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

/* The pieces of each sentence from its words' cached pieces: with flat == NULL only the count per sentence (into
 * lengths) and the total; else the pieces themselves, back to back, into flat. */
static int64_t gather(const int64_t *ids, const int64_t *bounds, Py_ssize_t n_sentences, const int64_t *piece_bounds,
                      const int64_t *pieces, int64_t *lengths, int64_t *flat) {
    int64_t total = 0;
    for (Py_ssize_t sentence = 0; sentence < n_sentences; sentence++) {
        int64_t count = 0;
        for (int64_t w = bounds[sentence]; w < bounds[sentence + 1]; w++) {
            int64_t first = piece_bounds[ids[w]], stop = piece_bounds[ids[w] + 1];
            if (flat != NULL) memcpy(flat + total + count, pieces + first, (size_t)(stop - first) * sizeof(int64_t));
            count += stop - first;
        }
        if (flat == NULL) lengths[sentence] = count;
        total += count;
    }
    return total;
}

static PyObject *gather_pieces(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5]))
        return NULL;
    static const char *const names[6] = {"ids", "sentence_bounds", "piece_bounds", "pieces", "lengths", "flat"};
    int with_flat = objects[5] != Py_None, needed = with_flat ? 6 : 5, got = 0;
    Py_buffer b[6];
    PyObject *result = NULL;
    for (; got < needed; got++)
        if (get_vector(objects[got], &b[got], 8, got >= 4, names[got]) != 0) goto release;
    Py_ssize_t n_words = b[0].shape[0], n_sentences = b[1].shape[0] - 1, n_words_cached = b[2].shape[0] - 1;
    const int64_t *ids = b[0].buf, *bounds = b[1].buf;
    if (n_sentences < 0 || b[4].shape[0] < n_sentences || bounds[n_sentences] > n_words) {
        PyErr_SetString(PyExc_ValueError, "gather_pieces: sentence_bounds and lengths do not fit the words");
        goto release;
    }
    int64_t total = 0;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS /* the check too: a batch has thousands of words */
    for (Py_ssize_t w = 0; w < n_words && bad < 0; w++)
        if (ids[w] < 0 || ids[w] >= n_words_cached) bad = w;
    if (bad < 0) total = gather(ids, bounds, n_sentences, b[2].buf, b[3].buf, b[4].buf, NULL);
    if (bad < 0 && with_flat && b[5].shape[0] >= total)
        gather(ids, bounds, n_sentences, b[2].buf, b[3].buf, b[4].buf, b[5].buf);
    Py_END_ALLOW_THREADS
    if (bad >= 0)
        PyErr_Format(PyExc_ValueError, "gather_pieces: word %zd has id %lld, not a cached word", bad,
                     (long long)ids[bad]);
    else if (with_flat && b[5].shape[0] < total)
        PyErr_Format(PyExc_ValueError, "gather_pieces: flat holds %zd pieces, %lld needed", b[5].shape[0],
                     (long long)total);
    else
        result = PyLong_FromLongLong(total);
release:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

/* Whether a string holds a lone surrogate (which UTF-8 cannot encode): only 2- and 4-byte strings can. */
static int has_surrogate(PyObject *text) {
    int kind = PyUnicode_KIND(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) return 0;
    for (Py_ssize_t k = 0; k < length; k++) {
        Py_UCS4 character = PyUnicode_READ(kind, data, k);
        if (character >= 0xD800 && character <= 0xDFFF) return 1;
    }
    return 0;
}

static PyObject *first_bad_sentence(PyObject *Py_UNUSED(self), PyObject *sentences) {
    if (!PyList_Check(sentences) && !PyTuple_Check(sentences)) {
        PyErr_SetString(PyExc_TypeError, "first_bad_sentence takes a list or a tuple");
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sentences);
    PyObject **items = PySequence_Fast_ITEMS(sentences);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = items[k];
        if (!PyUnicode_Check(item) || (!PyUnicode_IS_ASCII(item) && has_surrogate(item))) return PyLong_FromSsize_t(k);
    }
    return PyLong_FromLong(-1);
}

/* Copies the strings into out, joined by newlines; returns the bytes written, or -1 when one is not plain. Touches
 * only the strings' data, which `items` keeps alive and nobody can change (str is immutable): safe without the GIL. */
static Py_ssize_t copy_plain(PyObject *const *items, Py_ssize_t n, Py_ssize_t max_word, uint8_t *out) {
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *text = items[k];
        if (k > 0) out[at++] = NEWLINE;
        Py_ssize_t run = 0, length = PyUnicode_GET_LENGTH(text);
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        if (PyUnicode_IS_ASCII(text)) { /* the usual sentence: byte for byte */
            const uint8_t *bytes = data;
            for (Py_ssize_t c = 0; c < length; c++) {
                uint8_t byte = bytes[c];
                run = byte == 32 ? 0 : run + 1;
                if (byte < 32 || byte == 127 || run > max_word) return -1;
                out[at++] = byte;
            }
            continue;
        }
        for (Py_ssize_t c = 0; c < length; c++) {
            Py_UCS4 character = PyUnicode_READ(kind, data, c);
            if (character < 0x80) {
                if (character < 32 || character == 127) return -1;
                out[at++] = (uint8_t)character;
                run = character == 32 ? 0 : run + 1;
            } else if (character < 0x800) {
                out[at++] = (uint8_t)(0xC0 | (character >> 6));
                out[at++] = (uint8_t)(0x80 | (character & 0x3F));
                run += 2;
            } else if (character < 0x10000) {
                out[at++] = (uint8_t)(0xE0 | (character >> 12));
                out[at++] = (uint8_t)(0x80 | ((character >> 6) & 0x3F));
                out[at++] = (uint8_t)(0x80 | (character & 0x3F));
                run += 3;
            } else {
                out[at++] = (uint8_t)(0xF0 | (character >> 18));
                out[at++] = (uint8_t)(0x80 | ((character >> 12) & 0x3F));
                out[at++] = (uint8_t)(0x80 | ((character >> 6) & 0x3F));
                out[at++] = (uint8_t)(0x80 | (character & 0x3F));
                run += 4;
            }
            if (run > max_word) return -1;
        }
    }
    return at;
}

/* join_plain(sentences, max_word) -> bytes or None: the sentences' UTF-8 bytes joined by newlines (lone surrogates
 * as three bytes, as Python's "surrogatepass" writes them), or None when one of them is not plain: not a str, or
 * holding a control character (below 32, or 127) or a word (a run of bytes above 32) of more than max_word bytes.
 * What split_plain does with a join, an encode and three passes of numpy, in one pass without the GIL; the caller
 * falls back to those steps on None, to find which sentences are not plain. */
static PyObject *join_plain(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *sentences;
    Py_ssize_t max_word;
    if (!PyArg_ParseTuple(args, "On", &sentences, &max_word)) return NULL;
    if (!PyList_Check(sentences) && !PyTuple_Check(sentences)) {
        PyErr_SetString(PyExc_TypeError, "join_plain takes a list or a tuple");
        return NULL;
    }
    /* A tuple of our own holds every string while the GIL is released, whatever another thread does to the list. */
    PyObject *held = PySequence_Tuple(sentences);
    if (held == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    PyObject **items = &PyTuple_GET_ITEM(held, 0);
    Py_ssize_t capacity = n > 0 ? n - 1 : 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!PyUnicode_Check(items[k])) {
            Py_DECREF(held);
            Py_RETURN_NONE;
        }
        int kind = PyUnicode_KIND(items[k]);
        /* UTF-8 bytes a character at most: 1 for ASCII, 2 up to U+00FF, 3 up to U+FFFF, else 4. */
        Py_ssize_t width = PyUnicode_IS_ASCII(items[k])           ? 1
                           : kind == PyUnicode_1BYTE_KIND ? 2
                           : kind == PyUnicode_2BYTE_KIND ? 3
                                                          : 4;
        capacity += width * PyUnicode_GET_LENGTH(items[k]);
    }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, capacity);
    if (joined == NULL) {
        Py_DECREF(held);
        return NULL;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(joined);
    Py_ssize_t written;
    Py_BEGIN_ALLOW_THREADS;
    written = copy_plain(items, n, max_word, out);
    Py_END_ALLOW_THREADS;
    Py_DECREF(held);
    if (written < 0) {
        Py_DECREF(joined);
        Py_RETURN_NONE;
    }
    if (written < capacity && _PyBytes_Resize(&joined, written) != 0) return NULL;
    return joined;
}

static PyMethodDef methods[] = {
    {"look_up", look_up, METH_VARARGS,
     "look_up(raw, n, hash_table, main_hashes, main_ids, main_buckets, main_shift, recent_hashes, recent_ids,\n"
     "        recent_buckets, recent_shift, byte_bounds, word_bytes, text, chars, starts, ends, hashes, ids,\n"
     "        sentence_bounds) -> (n_words, n_chars, longest)\n\n"
     "Splits `raw` (n sentences joined by newlines) into words, writes the lowercased bytes (text), the words'\n"
     "bytes back to back (chars), each word's span, hash and cached id (-1 where not cached) and each sentence's\n"
     "first word. A word longer than hash_table has positions for gets a wrong hash: the caller checks `longest`\n"
     "and calls again with a longer table. Releases the GIL while it works."},
    {"first_bad_sentence", first_bad_sentence, METH_O,
     "first_bad_sentence(sentences) -> index\n\n"
     "The index of the first item of a list or tuple that is not a str or holds a lone surrogate (not valid\n"
     "Unicode text), -1 when there is none: encode's input check in one pass over the items (ASCII strings are\n"
     "known at once)."},
    {"join_plain", join_plain, METH_VARARGS,
     "join_plain(sentences, max_word) -> bytes or None\n\n"
     "The sentences' UTF-8 bytes joined by newlines, or None when one is not a str or holds a control character\n"
     "or a word of more than max_word bytes (split_plain's rule). Releases the GIL while it copies."},
    {"gather_pieces", gather_pieces, METH_VARARGS,
     "gather_pieces(ids, sentence_bounds, piece_bounds, pieces, lengths, flat) -> total\n\n"
     "The pieces of each sentence whose words all have cached ids: their number per sentence into lengths, and\n"
     "(unless flat is None) the pieces back to back into flat. Returns the number of pieces. Releases the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_words",
    .m_doc = "The word cache's look-up of a batch of sentences.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
