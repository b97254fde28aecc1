"""A sentence-transformers teacher run through ONNX Runtime with int8 weights, for labelling corpora on a CPU.

The teacher's transformer is exported to ONNX once (`torch.onnx.export`), its weights quantised to int8 per
output channel (`onnxruntime.quantization.quantize_dynamic`: activations are quantised on the fly; the first
layer's feed-forward output stays fp32), and batches are spread over Python threads that each call the same
`InferenceSession` with one intra-op thread: ONNX Runtime releases the GIL while it runs, so independent batches
scale with the cores far better than one batch split across them. Batches are formed by token count (every
sentence is tokenised first, then sorted by its number of tokens) and end at `batch_tokens` padded tokens (or
`batch_size` sentences), so a batch holds almost no padding whatever the script (sorting by characters left a third
of e5's batch positions padding on mixed-language text) and short sentences go in larger batches than long ones.
Pooling (mean, CLS or max, as the teacher's `Pooling` module says) and the final normalisation are done here in
numpy, so the output matches `SentenceTransformer.encode` up to the int8 rounding.

The int8 backends differ in which products are int8: `onnx-int8` all but the first layer's feed-forward output;
`onnx-mixed` only the attention block's (query, key, value, output), every feed-forward product staying fp32.
ONNX Runtime quantises activations per tensor (one scale for the whole batch), and the feed-forward products'
inputs (LayerNorm outputs with outlier dimensions, GELU outputs) are what that rounds worst: for e5-small the
mixed model agrees with the fp32 teacher at cosine 0.9996 against 0.997 for the int8 one, at about 1.7 times its
CPU time (results/labelling-speed.md).

The exported files live in a work folder (for `psp prepare label`, ``CACHE/onnx/``) and are reused on the next
run, so a cache's later labels come from the same int8 model as its first ones. Needs the `teacher` extra (onnx,
onnxruntime).
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import PSPInputError
from ..io.writing import atomic_path

BACKENDS = ("onnx-int8", "onnx-mixed", "onnx", "torch")
# The int8 backends: their file in the work folder and the key of their agreement in teacher.json.
QUANTISED = {"onnx-int8": ("model-int8.onnx", "int8_agreement"), "onnx-mixed": ("model-mixed.onnx", "mixed_agreement")}
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_POOLING = ("mean", "cls", "max")
_FIRST_LAYER = re.compile(r"/layers?\.0/")
# BERT/RoBERTa/MPNet, DistilBERT and GPT-style names of the feed-forward block's second (output) product.
_FEED_FORWARD_OUTPUT = re.compile(r"/(?<!attention/)output/dense/|/ffn/lin2/|/mlp/(fc2|down_proj)/")
# ... and of its first (input) product(s).
_FEED_FORWARD_INPUT = re.compile(r"/intermediate/dense/|/ffn/lin1/|/mlp/(fc1|up_proj|gate_proj)/")
_LAYER = re.compile(r"/layers?\.\d+/")
# The int8 model must agree with the teacher at least this well (mean cosine over PROBE_SENTENCES) to label.
MIN_INT8_AGREEMENT = 0.99
# Padded tokens a batch ends at: e5's mixed model spends 8 % less CPU a sentence than with batches of 16 sentences
# (256 and 512 alike; results/labelling-speed.md), its activations still in the core's cache.
BATCH_TOKENS = 256
# Checked once per export: varied registers and lengths, like a corpus's. all-MiniLM-L6-v2's int8 model agrees at
# 0.993 on them; all-mpnet-base-v2's at 0.86 (results/teachers-english.md).
PROBE_SENTENCES = (
    "A man is playing a guitar on the stage.",
    "Two children are running through a field of tall grass.",
    "The central bank left interest rates unchanged on Thursday.",
    "Shares in the company fell sharply after the report was published.",
    "How do I reset my password if I no longer have access to my email?",
    "What is the best way to learn to cook at home?",
    "I don't think that's a good idea, to be honest.",
    "She told me she would be late because her train was cancelled.",
    "The committee approved the proposal by a narrow margin after a long debate.",
    "Click Save to keep your changes, or Cancel to discard them.",
    "a small dog",
    "yes",
    "The mitochondrion is the part of the cell where energy is produced.",
    "Rain is expected in the north of the country later this week.",
    "He has lived in the same small village for more than forty years.",
    "Can you recommend a good book about the history of mathematics?",
    "The police said the driver had not been drinking.",
    "A woman is slicing tomatoes in a kitchen.",
    "Our new model is faster and uses less memory than the old one.",
    "Please make sure the door is locked before you leave.",
    "the act of moving something from one place to another",
    "Researchers found no link between the two conditions in a study of 10,000 patients.",
    "I'm not sure what you mean by that; could you explain it again?",
    "The team scored twice in the last ten minutes to win the match.",
    "If the shoe fits, wear it.",
    "Prices rose by 3 percent in the year to October, the statistics office said.",
    "Turn left at the second traffic light and the station is on your right.",
    "Nobody expected the film to be such a success.",
    "An old man sits on a bench feeding pigeons in the park.",
    "The software update fixes a bug that caused the application to crash on start-up.",
    "We should have left earlier; now we are going to miss the beginning.",
    "Is it safe to drink the tap water here?",
)


def _teacher_parts(teacher) -> tuple[object, object, str, bool, int]:
    """(transformer, tokenizer, pooling mode, normalises, max length) of a Transformer+Pooling(+Normalize) model."""
    names = [type(module).__name__ for module in teacher]
    if len(names) < 2 or names[0] != "Transformer" or names[1] != "Pooling" or names[2:] not in ([], ["Normalize"]):
        raise PSPInputError(
            f"the ONNX teacher backend handles Transformer + Pooling (+ Normalize) models, not {' + '.join(names)}; "
            "use --backend torch"
        )
    mode = teacher[1].pooling_mode
    if mode not in _POOLING:
        raise PSPInputError(
            f"the ONNX teacher backend pools by {'/'.join(_POOLING)}, not {mode!r}; use --backend torch"
        )
    return teacher[0].model, teacher[0].tokenizer, mode, names[2:] == ["Normalize"], int(teacher.max_seq_length)


def default_prompt(teacher) -> str:
    """The text `teacher.encode` puts before each sentence when no prompt is asked for ("" for none).

    sentence-transformers applies a folder's `default_prompt_name` (config_sentence_transformers.json) on its
    own; the ONNX model must too, or its labels are another teacher's. Pooling that leaves the prompt's tokens
    out (`include_prompt: false`) is not reproduced here, so it is refused.
    """
    name = getattr(teacher, "default_prompt_name", None)
    prompt = (getattr(teacher, "prompts", None) or {}).get(name, "") if name else ""
    if prompt and not getattr(teacher[1], "include_prompt", True):
        raise PSPInputError(
            f"the teacher's default prompt {prompt!r} is left out of its pooling (include_prompt: false), which the "
            "ONNX teacher backend does not reproduce; use --backend torch"
        )
    return prompt


def _export(model, tokenizer, path: Path, attention: str | None = "eager") -> None:
    """Export `model`'s last hidden state to `path`, traced with `attention` (None: the model's own setting)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        # transformers 5 models take keyword arguments; the exporter passes positional ones.
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    sample = tokenizer(["an example sentence", "two"], padding=True, return_tensors="pt")
    inputs = tuple(sample.get(name, torch.zeros_like(sample["input_ids"])) for name in _INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    # Plain (eager) attention traces to fewer nodes than SDPA's masking (no Where/IsNaN per layer): about 5 % less
    # CPU per sentence for the int8 e5-small (results/teachers.md). The model gets its own setting back after.
    previous = getattr(model.config, "_attn_implementation", None)
    switched = attention is not None and previous not in (None, attention) and hasattr(model, "set_attn_implementation")
    if switched:
        try:
            model.set_attn_implementation(attention)
        except (ValueError, NotImplementedError):
            switched = False
    # The tracer warns about shape checks it freezes; they only concern inputs without an attention mask, which
    # `_batch` always passes.
    try:
        with atomic_path(path) as tmp, torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(model.eval()),
                inputs,
                os.fspath(tmp),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
    finally:
        if switched:
            model.set_attn_implementation(previous)


def first_feed_forward_output(model) -> list[str]:
    """The name of the first layer's feed-forward output product in a transformers export (BERT-like models:
    `.../layer.0/output/dense/MatMul`), in a list: empty for a layout this does not know."""
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and _FIRST_LAYER.search(node.name) and _FEED_FORWARD_OUTPUT.search(node.name)
    ]


def feed_forward_products(model) -> list[str]:
    """The names of every layer's feed-forward products (input and output) in a transformers export: what
    `onnx-mixed` keeps in fp32. Empty for a layout this does not know."""
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and _LAYER.search(node.name)
        and (_FEED_FORWARD_OUTPUT.search(node.name) or _FEED_FORWARD_INPUT.search(node.name))
    ]


def _quantize(source: Path, target: Path, keep_fp32: Sequence[str] | None = None) -> None:
    """int8 weights for every matrix product of `source` but the nodes named in `keep_fp32` (default: the first
    layer's feed-forward output, see `first_feed_forward_output`)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if keep_fp32 is None:
        # Quantising that product's input (the first layer's GELU activations) on the fly is what costs the labels
        # most; keeping it exact brings them, and a student distilled from them, much closer to the fp32 teacher's
        # for about an eighth of the speed (`bench/int8_variants.py`, results/teachers-english.md).
        keep_fp32 = first_feed_forward_output(onnx.load(os.fspath(source), load_external_data=False))
    # quantize_dynamic logs a generic "consider pre-processing" advice on the root logger for every model.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    with atomic_path(target) as tmp:
        try:
            quantize_dynamic(
                os.fspath(source),
                os.fspath(tmp),
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_exclude=list(keep_fp32),
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            root.setLevel(level)


class OnnxTeacher:
    """A sentence-transformers model's `encode`, run by ONNX Runtime (int8 weights by default) on `threads` cores.

    Build it with `OnnxTeacher.from_sentence_transformer(model, work_dir)`; `encode` takes the same arguments as
    `SentenceTransformer.encode` that labelling uses and returns float32 rows.
    """

    def __init__(
        self,
        onnx_path: str | os.PathLike,
        tokenizer,
        pooling_mode: str = "mean",
        normalize: bool = True,
        max_length: int = 256,
        threads: int = 1,
        dim: int | None = None,
        prompt: str = "",
        batch_tokens: int = BATCH_TOKENS,
    ):
        import onnxruntime

        if pooling_mode not in _POOLING:
            raise ValueError(f"pooling_mode must be one of {_POOLING}, got {pooling_mode!r}")
        if threads < 1 or batch_tokens < 1:
            raise ValueError(f"threads and batch_tokens must be >= 1, got {threads}, {batch_tokens}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # parallelism comes from concurrent batches, see the module docstring
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(os.fspath(onnx_path), options, providers=["CPUExecutionProvider"])
        self.input_names = [item.name for item in self.session.get_inputs()]
        self.tokenizer = tokenizer
        self.pooling_mode = pooling_mode
        self.normalize = normalize
        self.max_length = max_length
        self.threads = threads
        self.dim = dim
        self.prompt = prompt  # the teacher's default prompt (e.g. e5's "query: "), put before every sentence
        self.batch_tokens = batch_tokens

    @classmethod
    def from_sentence_transformer(
        cls,
        teacher,
        work_dir: str | os.PathLike,
        quantize: bool = True,
        threads: int = 1,
        name: str | None = None,
        min_agreement: float | None = MIN_INT8_AGREEMENT,
        mixed: bool = False,
    ) -> OnnxTeacher:
        """Export `teacher` (a loaded `SentenceTransformer`) into `work_dir` unless done before, then load it.

        `quantize`: int8 weights (`onnx-int8`; with `mixed`, int8 attention products only: `onnx-mixed`), else the
        fp32 export (`onnx`). `name` identifies the teacher: files that `work_dir` holds for another name are
        exported again. An int8 model whose agreement with `teacher` on `PROBE_SENTENCES` is below
        `min_agreement` is refused (`PSPInputError`); None skips the refusal (benches that measure it).
        """
        model, tokenizer, mode, normalize, max_length = _teacher_parts(teacher)
        work = Path(work_dir)
        work.mkdir(parents=True, exist_ok=True)
        record = work / "teacher.json"
        known = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
        if name is not None and record.is_file() and known.get("teacher") != name:
            for stale in work.glob("*.onnx"):
                stale.unlink()
            known = {}
        fp32 = work / "model.onnx"
        if not fp32.is_file():
            _export(model, tokenizer, fp32)
        backend = ("onnx-mixed" if mixed else "onnx-int8") if quantize else "onnx"
        file_name, key = QUANTISED.get(backend, (fp32.name, None))
        path = work / file_name
        if key is not None and not path.is_file():
            keep_fp32 = None
            if mixed:
                import onnx

                keep_fp32 = feed_forward_products(onnx.load(os.fspath(fp32), load_external_data=False))
                if not keep_fp32:
                    raise PSPInputError(
                        "--backend onnx-mixed keeps the feed-forward products in fp32, and this teacher's export names "
                        "none this recognises (BERT, DistilBERT, MPNet, GPT-style); use --backend onnx-int8 or onnx"
                    )
            _quantize(fp32, path, keep_fp32)
            known.pop(key, None)  # a new int8 model: its agreement is measured again
        dim = teacher.get_embedding_dimension() if hasattr(teacher, "get_embedding_dimension") else None
        prompt = default_prompt(teacher)
        onnx_teacher = cls(path, tokenizer, mode, normalize, max_length, threads=threads, dim=dim, prompt=prompt)
        info = {"teacher": name, "pooling_mode": mode, "normalize": normalize, "max_length": max_length}
        if prompt:
            info["prompt"] = prompt
        # The other int8 model's agreement, measured before, stays on record.
        info |= {other: known[other] for _, other in QUANTISED.values() if other in known and other != key}
        if key is not None:
            agreement = known.get(key) if known.get("teacher") == name else None
            if agreement is None:
                agreement = onnx_teacher.agreement(teacher)
            info[key] = agreement
        with atomic_path(record) as tmp:
            tmp.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        if key is not None and min_agreement is not None and agreement < min_agreement:
            # Some teachers lose too much to int8 activations (all-mpnet-base-v2: 0.86); their labels would teach
            # the student a distorted space, so this refuses rather than labelling.
            which = f"teacher {name}" if name else "the teacher"
            raise PSPInputError(
                f"the int8 model ({backend}) of {which} agrees with the teacher at mean cosine {agreement:.4f} on "
                f"{len(PROBE_SENTENCES)} probe sentences, below {min_agreement}: its labels would not be the "
                "teacher's; use --backend onnx (fp32 ONNX Runtime) or --backend torch"
            )
        return onnx_teacher

    def agreement(self, teacher, sentences: Sequence[str] = PROBE_SENTENCES) -> float:
        """Mean cosine between this model's embeddings of `sentences` and `teacher.encode`'s."""
        ours = self.encode(list(sentences))
        theirs = np.asarray(teacher.encode(list(sentences), convert_to_numpy=True), dtype=np.float32)
        norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
        return float(((ours * theirs).sum(axis=1) / np.maximum(norms, 1e-12)).mean())

    def get_embedding_dimension(self) -> int | None:
        """The teacher's output width (None when unknown until the first batch)."""
        return self.dim

    def _tokenize(self, sentences: Sequence[str]) -> list[list[int]]:
        """Each sentence's token ids (the prompt first, cut at `max_length`), unpadded."""
        texts = [self.prompt + sentence for sentence in sentences] if self.prompt else list(sentences)
        return self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]

    def _batch(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """The pooled embeddings of tokenised sentences, padded on the right to the longest."""
        width = max(len(row) for row in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = np.full((len(rows), width), pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        # One sentence per row: token type 0 throughout, as the tokenizer gives it.
        given = {"input_ids": ids, "attention_mask": mask}
        feed = {name: given.get(name, np.zeros_like(ids)) for name in self.input_names}
        hidden = self.session.run(None, feed)[0]
        weights = mask.astype(np.float32)[..., None]
        if self.pooling_mode == "mean":
            vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        elif self.pooling_mode == "cls":
            vectors = hidden[:, 0]
        else:
            vectors = np.where(weights > 0, hidden, -1e9).max(axis=1)
        if self.normalize:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors.astype(np.float32, copy=False)

    def _batches(self, rows: list[list[int]], order: list[int], batch_size: int) -> list[list[list[int]]]:
        """`rows` in `order` (by token count), cut into batches of at most `batch_size` sentences and
        `batch_tokens` padded tokens (one sentence at least)."""
        batches: list[list[list[int]]] = []
        current: list[list[int]] = []
        for i in order:
            # Sorted: the new row is the longest, so the batch pads to its length.
            if current and (len(current) == batch_size or (len(current) + 1) * len(rows[i]) > self.batch_tokens):
                batches.append(current)
                current = []
            current.append(rows[i])
        return batches + [current]

    def encode(self, sentences: Sequence[str], batch_size: int = 64, **ignored) -> np.ndarray:
        """Embeddings of `sentences`, in order, as a float32 array (`ignored`: sentence-transformers keywords).

        `batch_size`: at most this many sentences a batch (which ends sooner at `batch_tokens` padded tokens)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not sentences:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        rows = self._tokenize(sentences)
        # Sorting by token count keeps padding small (see the module docstring); rows go back in the caller's order.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        batches = self._batches(rows, order, batch_size)
        if self.threads == 1 or len(batches) == 1:
            blocks = [self._batch(batch) for batch in batches]
        else:
            with ThreadPoolExecutor(self.threads) as pool:
                blocks = list(pool.map(self._batch, batches))
        out = np.empty((len(sentences), blocks[0].shape[1]), dtype=np.float32)
        out[np.asarray(order)] = np.concatenate(blocks)
        return out
