"""Reading a psp model folder with numpy, safetensors and tokenizers only, checking every file on the way.

Loading for inference must not need torch or transformers, and must never read a pickle: a folder is
`config.json` + `model.safetensors` + `tokenizer.json`. Every problem is a `PSPInputError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PSPInputError, native_panics
from ..io.reading import read_json

PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.ckpt")
TABLE_KEY = "embeddings.weight"
WEIGHTS_KEY = "piece_weights"
SCALES_KEY = "table_scales"  # int8 tables: one float scale per row (see PSPConfig.table_dtype)


# What a psp model folder holds; the rest of a Hub repo (cards, plots) is not needed to load it.
MODEL_FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "configuration_psp.py",
    "modeling_psp.py",
    "encoders_psp.py",
]


def resolve_model_path(id_or_path: str | os.PathLike, revision: str | None = None, token=None) -> Path:
    """A local folder as it is; anything else is a Hub repo id, downloaded (or found in the HF cache)."""
    path = Path(id_or_path)
    if path.is_dir():
        return path
    if path.exists():
        raise FileNotFoundError(f"{path} is a file; expected a model folder or a Hub repo id")
    from ..io.reading import cannot_be_hub_id

    if cannot_be_hub_id(os.fspath(id_or_path)):  # a mistyped local path, not a Hub id to look up
        raise FileNotFoundError(f"{id_or_path}: no such model folder")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(
            snapshot_download(repo_id=os.fspath(id_or_path), revision=revision, token=token, allow_patterns=MODEL_FILES)
        )
    except (HfHubHTTPError, LocalEntryNotFoundError, ValueError) as error:
        raise FileNotFoundError(
            f"{id_or_path}: not a local model folder, and the Hub could not provide it ({error.__class__.__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''})"
        ) from error


def confined(folder: Path, relative, source: Path) -> Path:
    """`folder / relative` for a path named inside a model folder's file `source` (modules.json's `path`),
    refused when it would leave the folder: an absolute path, a `..` step, or a symlink pointing out."""
    if not isinstance(relative, str):
        raise PSPInputError(f"{source}: a module path must be a string, got {relative!r}")
    if os.path.isabs(relative) or ".." in Path(relative).parts or "\\" in relative:
        raise PSPInputError(f"{source}: module path {relative!r} leaves the model folder; refusing to read it")
    target = folder / (relative or ".")
    try:
        root, resolved = folder.resolve(), target.resolve()
    except (ValueError, OSError) as error:  # a NUL byte, a name the file system cannot hold, a link loop
        raise PSPInputError(f"{source}: module path {relative!r} is not a usable path ({error})") from None
    if resolved != root and root not in resolved.parents:
        raise PSPInputError(f"{source}: module path {relative!r} leads out of the model folder (to {resolved})")
    return target


def check_module_paths(folder: Path) -> list | None:
    """The modules of `folder/modules.json` (None without one), every `path` in it confined to `folder`."""
    path = folder / "modules.json"
    if not path.is_file():
        return None
    modules = read_json(path, list)
    if not all(isinstance(module, dict) for module in modules):
        raise PSPInputError(f"{path}: expected a JSON list of module objects")
    for module in modules:
        confined(folder, module.get("path", ""), path)
    return modules


@dataclass(frozen=True)
class PSPSettings:
    """What inference needs from a P-SP `config.json` (defaults as in `PSPConfig`)."""

    vocab_size: int = 50000
    hidden_size: int = 1024
    pooling: str = "mean"
    pad_token_id: int = 1
    unk_token_id: int = 0
    drop_unknown: bool = True
    use_piece_weights: bool = False
    word_boundary_token_id: int | None = None

    @classmethod
    def from_config(cls, config) -> PSPSettings:
        """From a `PSPConfig` (or anything with the same attributes)."""
        return cls(**{name: getattr(config, name, default) for name, default in _defaults().items()})


def _defaults() -> dict:
    return {name: field.default for name, field in PSPSettings.__dataclass_fields__.items()}


def read_settings(folder: Path) -> PSPSettings:
    """Settings from `folder/config.json`, checked for a psp model."""
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no config.json; not a psp model folder")
    config = read_json(path)
    if config.get("model_type") != "psp":
        raise PSPInputError(f"{path}: model_type is {config.get('model_type')!r}, expected 'psp'")
    values = {name: config.get(name, default) for name, default in _defaults().items()}
    for name in ("vocab_size", "hidden_size", "pad_token_id", "unk_token_id"):
        if not isinstance(values[name], int) or isinstance(values[name], bool) or values[name] < 0:
            raise PSPInputError(f"{path}: {name} must be a non-negative integer, got {values[name]!r}")
    for name in ("drop_unknown", "use_piece_weights"):
        if not isinstance(values[name], bool):
            raise PSPInputError(f"{path}: {name} must be true or false, got {values[name]!r}")
    boundary = values["word_boundary_token_id"]
    if boundary is not None and (not isinstance(boundary, int) or isinstance(boundary, bool)):
        raise PSPInputError(f"{path}: word_boundary_token_id must be an integer or null, got {boundary!r}")
    if values["pooling"] not in ("mean", "max"):
        raise PSPInputError(f"{path}: pooling must be 'mean' or 'max', got {values['pooling']!r}")
    if values["unk_token_id"] >= values["vocab_size"]:
        raise PSPInputError(f"{path}: unk_token_id {values['unk_token_id']} is outside the vocabulary")
    if boundary is not None and not -1 <= boundary < values["vocab_size"]:
        raise PSPInputError(
            f"{path}: word_boundary_token_id {boundary} is outside the vocabulary of {values['vocab_size']} pieces "
            "(-1 for none)"
        )
    return PSPSettings(**values)


def read_weights(folder: Path, settings: PSPSettings) -> tuple[np.ndarray, np.ndarray | None]:
    """The embedding table (float32, writable) and the piece weights (or None) from `model.safetensors`."""
    path = folder / "model.safetensors"
    if not path.is_file():
        pickles = [name for name in PICKLE_WEIGHTS if (folder / name).exists()]
        if pickles:
            raise PSPInputError(
                f"{folder}: has {pickles[0]} but no model.safetensors; psp loads safetensors only, because a pickle "
                "can run code when loaded (convert a checkpoint you trust with `psp convert-original --trust-pickle`)"
            )
        raise FileNotFoundError(f"{folder}: no model.safetensors")
    tensors = read_safetensors(path, wanted=(TABLE_KEY, WEIGHTS_KEY, SCALES_KEY))
    if TABLE_KEY not in tensors:
        raise PSPInputError(f"{path}: no {TABLE_KEY!r} tensor")
    table, weights = tensors[TABLE_KEY], tensors.get(WEIGHTS_KEY)
    if SCALES_KEY in tensors:  # an int8-stored table: dequantise row by row
        scales = tensors[SCALES_KEY]
        if scales.shape != (len(table),):
            raise PSPInputError(f"{path}: {SCALES_KEY} has shape {scales.shape}, expected ({len(table)},)")
        table *= scales[:, None]
    expected = (settings.vocab_size, settings.hidden_size)
    if table.shape != expected:
        raise PSPInputError(
            f"{path}: {TABLE_KEY} has shape {table.shape}, but config.json says vocab_size x hidden_size = {expected}"
        )
    if settings.use_piece_weights and (weights is None or weights.shape != (settings.vocab_size,)):
        got = "none" if weights is None else f"shape {weights.shape}"
        raise PSPInputError(f"{path}: config.json asks for piece weights of {settings.vocab_size} pieces, got {got}")
    check_finite(table, path, TABLE_KEY)
    if settings.use_piece_weights:
        check_finite(weights, path, WEIGHTS_KEY)
    return table, weights if settings.use_piece_weights else None


_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16, "I8": np.int8}


def read_safetensors(path: Path, wanted: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The `wanted` tensors of a safetensors file as float32 arrays in private memory.

    The format is an 8-byte header length, a JSON header and the raw little-endian data; reading it here
    checks every offset against the file size (a truncated file is an error, not a crash) and reads each tensor
    straight into its array, with no second copy and no mapping a later writer could truncate.
    """
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        header_size = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if header_size <= 0 or 8 + header_size > size:
            raise PSPInputError(f"{path}: not a safetensors file (bad header length; truncated or another format?)")
        try:
            header = json.loads(handle.read(header_size))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise PSPInputError(f"{path}: not a safetensors file (header is not JSON: {error})") from None
        if not isinstance(header, dict):
            raise PSPInputError(f"{path}: not a safetensors file (header is not a JSON object)")
        _check_layout(path, header)
        tensors = {}
        for name in wanted:
            if name not in header:
                continue
            tensors[name] = _read_tensor(handle, path, name, header[name], 8 + header_size, size)
    return tensors


def _check_layout(path: Path, header: dict) -> None:
    """Refuse tensors whose byte ranges overlap: one write would change another tensor (the format has none)."""
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = (int(offset) for offset in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise PSPInputError(f"{path}: tensor {name!r}: malformed data_offsets") from None
        spans.append((begin, end, name))
    spans.sort()
    for (_, end, name), (begin, _, other) in zip(spans, spans[1:], strict=False):
        if begin < end:
            raise PSPInputError(f"{path}: tensors {name!r} and {other!r} overlap in the file; not a valid safetensors")


def _read_tensor(handle, path: Path, name: str, entry, data_start: int, size: int) -> np.ndarray:
    try:
        dtype = _DTYPES[entry["dtype"]]
        shape = tuple(int(d) for d in entry["shape"])
        begin, end = (int(o) for o in entry["data_offsets"])
    except (KeyError, TypeError, ValueError):
        kind = entry.get("dtype") if isinstance(entry, dict) else entry
        raise PSPInputError(f"{path}: tensor {name!r}: unsupported or malformed entry ({kind!r})") from None
    count = int(np.prod(shape, dtype=np.int64))
    if end - begin != count * np.dtype(dtype).itemsize or begin < 0:
        raise PSPInputError(
            f"{path}: tensor {name!r}: {end - begin} bytes do not hold shape {shape} of {entry['dtype']}"
        )
    if data_start + end > size:
        raise PSPInputError(
            f"{path}: truncated: tensor {name!r} needs bytes up to {data_start + end}, the file has {size}"
        )
    array = np.empty(shape, dtype=np.dtype(dtype).newbyteorder("<"))
    handle.seek(data_start + begin)
    if handle.readinto(memoryview(array).cast("B")) != array.nbytes:
        raise PSPInputError(f"{path}: truncated while reading tensor {name!r}")
    if entry["dtype"] == "BF16":  # bfloat16 is the top half of a float32
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32, copy=False)


# The largest magnitude a table value may have. Real tables hold values near 1; a mean over a 1 MiB line's pieces,
# squared and summed over a thousand dimensions, stays within float32 from here, while values near float32's top
# (3e38) are finite yet embed as inf rows that score NaN.
MAX_TABLE_VALUE = 1e8


def check_finite(array: np.ndarray, path: Path, name: str) -> None:
    """Refuse a table holding NaN, infinity or values beyond `MAX_TABLE_VALUE`, naming the first bad row."""
    if array.size == 0:
        return
    # The extremes find NaN (it propagates), infinity and huge values in two passes without a copy; only then look
    # for the first bad row.
    top, bottom = float(np.max(array)), float(np.min(array))
    if math.isfinite(top) and math.isfinite(bottom) and max(top, -bottom) <= MAX_TABLE_VALUE:
        return
    rows = array.reshape(len(array), -1)
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if len(bad):
        raise PSPInputError(f"{path}: {name} has NaN or infinite values (row {int(bad[0])}, {len(bad)} rows in all)")
    bad = np.flatnonzero((np.abs(rows) > MAX_TABLE_VALUE).any(axis=1))
    raise PSPInputError(
        f"{path}: {name} has values as large as {max(top, -bottom):.3g} (row {int(bad[0])}, {len(bad)} rows in all); "
        f"psp refuses tables beyond ±{MAX_TABLE_VALUE:.0e}, whose sums overflow to infinity"
    )


def read_tokenizer(folder: Path):
    """The fast tokenizer of `folder/tokenizer.json`, with padding and truncation off."""
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise PSPInputError(
            f"{folder}: no tokenizer.json; psp needs the fast tokenizer file that save_pretrained writes "
            "(a sentencepiece.model alone is not enough)"
        )
    with native_panics(str(path)):
        try:
            backend = Tokenizer.from_file(os.fspath(path))
        except Exception as error:  # tokenizers raises a bare Exception for any malformed file
            reason = (str(error).splitlines() or [""])[0][:200]
            raise PSPInputError(f"{path}: not a valid tokenizer file ({reason})") from None
        backend.no_padding()
        backend.no_truncation()
        # A crafted file can load and then panic on text; finding out now, on ordinary sentences, names the file
        # before any work starts (encoding later is guarded the same way, for text the probe did not try).
        with _rust_messages_silenced():
            backend.encode_batch_fast(list(PROBE_SENTENCES), add_special_tokens=False)
    return backend


@contextlib.contextmanager
def _rust_messages_silenced() -> Iterator[None]:
    # Rust's panic hook writes "thread ... panicked at" (and a backtrace under RUST_BACKTRACE) straight to file
    # descriptor 2; the user gets the one error line of `native_panics` instead.
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# Ordinary text of the kinds psp meets (repeated letters, digits, punctuation, accents, CJK, spaces).
PROBE_SENTENCES = ("a" * 64 + "!", "Hello, world! 123 -- it's 4.5%.", "  ", "Ça coûte 3€ – 東京 мир", "aaaa bbbb " * 20)


def word_boundary_id(config: dict, backend) -> int | None:
    """Id of the bare word-boundary piece ("▁") of a Metaspace tokenizer (`config` is its parsed JSON), if any."""
    pre_tokenizer = config.get("pre_tokenizer") or {}
    steps = pre_tokenizer.get("pretokenizers", [pre_tokenizer])
    for step in steps:
        if (step or {}).get("type") == "Metaspace":
            return backend.token_to_id(step.get("replacement", "▁"))
    return None


def modeling():
    """The transformers side (`psp_hf.modeling`), with an install hint when torch or transformers is missing."""
    try:
        from .. import modeling
    except ImportError as error:
        raise ImportError(
            f"this needs torch and transformers ({error}); install them with: pip install 'psp-hf[torch]'"
        ) from error
    return modeling
