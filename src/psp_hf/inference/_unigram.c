/* Unigram segmentation of the word cache's new words in C (psp_hf.inference.unigram has the Python side):
 * - build_trie: the model's pieces as a trie, each edge (node, byte) -> child in an open-addressing table;
 * - segment: each word, as the tokenizer sees it after the Metaspace pre-tokenizer ("\u2581" + word), cut by the
 *   Viterbi search of the `tokenizers` library's Unigram model (Unigram::encode_optimized), with the GIL released.
 *
 * The search is that of the library step for step, so the pieces are the same: positions are visited from the left
 * at character boundaries; at each, the pieces that start there are tried shortest first, and a piece replaces
 * the best path into its end only when its score is strictly higher; where no piece is exactly one character
 * long, the unknown piece covers that character at the lowest score less 10 (K_UNK_PENALTY). The best path is read
 * from the end; runs of unknown pieces are fused into one where the model fuses them (fuse_unk), and a fused run
 * that spells a piece takes that piece's id, as the library's token-to-id step does. Tests compare every distinct
 * word of the Wikipedia text with the library.
 *
 * The Python side calls it only for words of printable ASCII that the model's normalizer leaves as they are, so
 * that the pieces of the word alone are its pieces in a sentence (see psp_hf.inference.word_tokenizer).
 *
 * Only the buffer protocol is used (no numpy headers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_buffers.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* "\u2581" (LOWER ONE EIGHTH BLOCK), Metaspace's word mark, in UTF-8. */
static const uint8_t MARK[3] = {0xE2, 0x96, 0x81};

/* The trie: node 0 is the root; edge (node, byte) is key node * 256 + byte + 1 (0: an empty slot; fewer than 2^24
 * nodes, so a key fits 32 bits), its child in `children`; node_piece[node] is the piece that ends at the node (-1:
 * none). */
typedef struct {
    const uint32_t *keys;
    const int32_t *children;
    uint64_t mask;
    const int32_t *node_piece;
} Trie;

static inline uint64_t slot_of(uint32_t key, uint64_t mask) {
    return ((uint64_t)key * 0x9E3779B97F4A7C15ull >> 17) & mask; /* Fibonacci hashing: spreads consecutive keys */
}

static inline int32_t child(const Trie *trie, int32_t node, uint8_t byte) {
    uint32_t key = (uint32_t)node * 256 + byte + 1;
    for (uint64_t slot = slot_of(key, trie->mask);; slot = (slot + 1) & trie->mask) {
        uint32_t found = trie->keys[slot];
        if (found == key) return trie->children[slot];
        if (found == 0) return -1;
    }
}

/* build_trie(blob, offsets, keys, children, node_piece) -> nodes: piece k is blob[offsets[k]:offsets[k + 1]]
 * (empty pieces are skipped; under 2^24 bytes in all); keys (zeroed uint32, a power of two long, at least twice the
 * bytes) and children receive the edges, node_piece (one entry per byte + 1, filled with -1) the piece of each
 * node. */
static PyObject *build_trie(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4]))
        return NULL;
    static const char *const names[5] = {"blob", "offsets", "keys", "children", "node_piece"};
    static const Py_ssize_t sizes[5] = {1, 8, 4, 4, 4};
    static const int writable[5] = {0, 0, 1, 1, 1};
    Py_buffer views[5];
    for (int k = 0; k < 5; k++)
        if (get_vector(objects[k], &views[k], sizes[k], writable[k], names[k]) != 0) {
            release_all(views, k);
            return NULL;
        }
    const uint8_t *blob = views[0].buf;
    const int64_t *offsets = views[1].buf;
    uint32_t *keys = views[2].buf;
    int32_t *children = views[3].buf, *node_piece = views[4].buf;
    Py_ssize_t n_pieces = views[1].shape[0] - 1, capacity = views[2].shape[0], max_nodes = views[4].shape[0];
    int ok = capacity > 0 && (capacity & (capacity - 1)) == 0 && views[3].shape[0] == capacity && n_pieces >= 0 &&
             offsets[n_pieces] <= views[0].shape[0] && 2 * offsets[n_pieces] <= capacity &&
             offsets[n_pieces] + 1 <= max_nodes && offsets[n_pieces] < (1 << 24);
    Py_ssize_t nodes = 1;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS;
        uint64_t mask = (uint64_t)capacity - 1;
        for (Py_ssize_t k = 0; k < n_pieces; k++) {
            int32_t node = 0;
            for (int64_t at = offsets[k]; at < offsets[k + 1]; at++) {
                uint32_t key = (uint32_t)node * 256 + blob[at] + 1;
                uint64_t slot = slot_of(key, mask);
                while (keys[slot] != 0 && keys[slot] != key) slot = (slot + 1) & mask;
                if (keys[slot] == 0) {
                    keys[slot] = key;
                    children[slot] = (int32_t)nodes++;
                }
                node = children[slot];
            }
            if (offsets[k + 1] > offsets[k] && node_piece[node] < 0) node_piece[node] = (int32_t)k;
        }
        Py_END_ALLOW_THREADS;
    }
    release_all(views, 5);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "build_trie: arrays of the wrong sizes");
        return NULL;
    }
    return PyLong_FromSsize_t(nodes);
}

/* The id of the piece spelled by text[0:length], -1 if none. */
static int32_t piece_of(const Trie *trie, const uint8_t *text, Py_ssize_t length) {
    int32_t node = 0;
    for (Py_ssize_t k = 0; k < length && node >= 0; k++) node = child(trie, node, text[k]);
    return node >= 0 ? trie->node_piece[node] : -1;
}

typedef struct {
    double *score;
    int64_t *start;
    int32_t *id;
    uint8_t *text;
    int32_t *reversed;
} Scratch;

/* The pieces of one word (text = MARK + the word's bytes, `size` bytes) into out; returns how many. */
static Py_ssize_t viterbi(const Trie *trie, const double *scores, const Scratch *s, Py_ssize_t size, int32_t unk_id,
                          double unk_score, int fuse_unk, int64_t *out) {
    const uint8_t *text = s->text;
    for (Py_ssize_t k = 0; k <= size; k++) s->start[k] = -1;
    s->score[0] = 0.0;
    for (Py_ssize_t at = 0; at < size;) {
        Py_ssize_t width = at == 0 ? 3 : 1; /* the mark is one character of three bytes, the rest ASCII */
        double here = s->score[at];
        int single = 0;
        int32_t node = 0;
        for (Py_ssize_t end = at; end < size;) {
            node = child(trie, node, text[end++]);
            if (node < 0) break;
            int32_t piece = trie->node_piece[node];
            if (piece < 0) continue;
            double candidate = here + scores[piece];
            if (s->start[end] < 0 || candidate > s->score[end]) {
                s->score[end] = candidate;
                s->start[end] = at;
                s->id[end] = piece;
            }
            if (end - at == width) single = 1;
        }
        if (!single) {
            double candidate = here + unk_score;
            if (s->start[at + width] < 0 || candidate > s->score[at + width]) {
                s->score[at + width] = candidate;
                s->start[at + width] = at;
                s->id[at + width] = unk_id;
            }
        }
        at += width;
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t end = size; end > 0;) {
        Py_ssize_t begin = s->start[end];
        int32_t id = s->id[end];
        if (fuse_unk && id == unk_id) {
            while (begin > 0 && s->id[begin] == unk_id) begin = s->start[begin];
            int32_t spelled = piece_of(trie, text + begin, end - begin);
            id = spelled >= 0 ? spelled : unk_id;
        }
        s->reversed[count++] = id;
        end = begin;
    }
    for (Py_ssize_t k = 0; k < count; k++) out[k] = s->reversed[count - 1 - k];
    return count;
}

/* segment(keys, children, node_piece, scores, words, word_offsets, unk_id, unk_score, fuse_unk, lengths, pieces)
 * -> total pieces: word k is words[word_offsets[k]:word_offsets[k + 1]] (without the mark); its pieces go to
 * `pieces` word after word, their number to lengths[k]. `pieces` holds at least the words' bytes + their count. */
static PyObject *segment(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *objects[8];
    int unk_id, fuse_unk;
    double unk_score;
    if (!PyArg_ParseTuple(args, "OOOOOOidpOO", &objects[0], &objects[1], &objects[2], &objects[3], &objects[4],
                          &objects[5], &unk_id, &unk_score, &fuse_unk, &objects[6], &objects[7]))
        return NULL;
    static const char *const names[8] = {"keys", "children", "node_piece", "scores",
                                         "words", "word_offsets", "lengths", "pieces"};
    static const Py_ssize_t sizes[8] = {4, 4, 4, 8, 1, 8, 8, 8};
    static const int writable[8] = {0, 0, 0, 0, 0, 0, 1, 1};
    Py_buffer views[8];
    for (int k = 0; k < 8; k++)
        if (get_vector(objects[k], &views[k], sizes[k], writable[k], names[k]) != 0) {
            release_all(views, k);
            return NULL;
        }
    Py_ssize_t capacity = views[0].shape[0], n_words = views[5].shape[0] - 1;
    const int64_t *offsets = views[5].buf;
    const uint8_t *words = views[4].buf;
    int ok = capacity > 0 && (capacity & (capacity - 1)) == 0 && views[1].shape[0] == capacity && n_words >= 0 &&
             views[6].shape[0] >= n_words && offsets[n_words] <= views[4].shape[0] &&
             views[7].shape[0] >= offsets[n_words] + n_words && unk_id >= 0 && unk_id < views[3].shape[0];
    Py_ssize_t longest = 0;
    for (Py_ssize_t k = 0; ok && k < n_words; k++) {
        if (offsets[k + 1] < offsets[k]) ok = 0;
        else if (offsets[k + 1] - offsets[k] > longest) longest = offsets[k + 1] - offsets[k];
    }
    if (!ok) {
        release_all(views, 8);
        PyErr_SetString(PyExc_ValueError, "segment: arrays of the wrong sizes");
        return NULL;
    }
    Trie trie = {views[0].buf, views[1].buf, (uint64_t)capacity - 1, views[2].buf};
    const double *scores = views[3].buf;
    Py_ssize_t size = longest + 3;
    Scratch s = {malloc((size + 1) * sizeof(double)), malloc((size + 1) * sizeof(int64_t)),
                 malloc((size + 1) * sizeof(int32_t)), malloc(size + 1), malloc((size + 1) * sizeof(int32_t))};
    Py_ssize_t total = 0;
    if (s.score && s.start && s.id && s.text && s.reversed) {
        int64_t *lengths = views[6].buf, *pieces = views[7].buf;
        Py_BEGIN_ALLOW_THREADS;
        memcpy(s.text, MARK, 3);
        for (Py_ssize_t k = 0; k < n_words; k++) {
            Py_ssize_t length = offsets[k + 1] - offsets[k];
            memcpy(s.text + 3, words + offsets[k], length);
            lengths[k] = viterbi(&trie, scores, &s, length + 3, unk_id, unk_score, fuse_unk, pieces + total);
            total += lengths[k];
        }
        Py_END_ALLOW_THREADS;
    } else {
        ok = 0;
    }
    free(s.score);
    free(s.start);
    free(s.id);
    free(s.text);
    free(s.reversed);
    release_all(views, 8);
    if (!ok) return PyErr_NoMemory();
    return PyLong_FromSsize_t(total);
}

static PyMethodDef methods[] = {
    {"build_trie", build_trie, METH_VARARGS, "The pieces as a trie (see the file's header)."},
    {"segment", segment, METH_VARARGS, "Words cut into pieces by the Unigram model (see the file's header)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_unigram",
    .m_doc = "Unigram segmentation of words for the word cache (see psp_hf.inference.unigram).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__unigram(void) { return PyModule_Create(&module); }
