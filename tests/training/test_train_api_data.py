"""The Python training API takes pairs as a `datasets` object or a list, streamed like files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from psp_hf.errors import PSPInputError
from psp_hf.training import TrainingArguments, train
from psp_hf.training.data.pairs import PairSource, PairStream

WORD_LIST = "man woman child dog cat bird horse boy girl runs walks jumps sits plays eats reads street park beach"
WORDS = WORD_LIST.split()


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 6))]
        other = words[:]
        rng.shuffle(other)
        pairs.append((" ".join(words), " ".join(other)))
    return pairs


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    from psp_hf.tokenization.pieces import train_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer([f"a {word} the {word}s" for word in WORDS] * 3, vocab_size=80, output_dir=folder)
    return folder


def settings(out: Path, tokenizer: Path, **overrides) -> TrainingArguments:
    values = {
        "output_dir": str(out),
        "tokenizer": str(tokenizer),
        "dim": 16,
        "batch_size": 10,
        "megabatch_size": 2,
        "megabatch_anneal": 0,
        "epochs": 2,
        "dev": "none",
        "keep": "last",
        "save_every": 0,
        "threads": 1,
        "quiet": True,
        "shuffle_buffer": 20,
        "log_every": 1,
    }
    values.update(overrides)
    return TrainingArguments(**values)


def end_record(folder: Path) -> dict:
    records = [json.loads(line) for line in (folder / "training" / "metrics.jsonl").read_text().splitlines()]
    return next(record for record in records if record["event"] == "end")


def _dataset(pairs):
    from datasets import Dataset

    return Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [b for _, b in pairs]})


FORMS = {
    "list": lambda pairs: pairs,
    "list-of-lists": lambda pairs: [list(pair) for pair in pairs],
    "dataset": _dataset,
    "iterable": lambda pairs: _dataset(pairs).to_iterable_dataset(num_shards=2),
    "dataset-dict": lambda pairs: __import__("datasets").DatasetDict({"train": _dataset(pairs)}),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_trains_over_every_pair_each_epoch(tmp_path, tokenizer, form):
    pairs = make_pairs(60)
    folder = train(settings(tmp_path / form, tokenizer), data=FORMS[form](pairs))
    assert (folder / "model.safetensors").is_file()
    # 60 pairs, 2 epochs: every pair streamed once per epoch.
    assert end_record(folder)["pairs_seen"] == 120
    recorded = json.loads((folder / "training" / "args.json").read_text())["data"]
    assert len(recorded) == 1 and recorded[0].startswith("<")


def test_object_stream_is_shuffled_per_epoch_and_complete():
    pairs = make_pairs(50)
    source = PairSource(["<list>"], dataset=pairs)
    stream = PairStream(source, batch_size=8, shuffle_buffer=16, seed=3)
    epochs = [
        [p for batch in stream.minibatches(epoch) for p in zip(batch.first, batch.second, strict=True)]
        for epoch in (0, 1)
    ]
    assert sorted(epochs[0]) == sorted(pairs) == sorted(epochs[1])
    assert epochs[0] != epochs[1]  # reshuffled (seed + epoch), as for files
    # Skipping raw rows (resume) continues where the position says.
    batches = list(stream.minibatches(0))
    resumed = list(stream.minibatches(0, skip=batches[2].position))
    assert [b.first for b in resumed] == [b.first for b in batches[3:]]


def test_columns_and_split_apply_to_objects(tmp_path, tokenizer):
    from datasets import Dataset, DatasetDict

    pairs = make_pairs(30)
    table = Dataset.from_dict({"id": list(range(30)), "a": [p[0] for p in pairs], "b": [p[1] for p in pairs]})
    source = PairSource(["<x>"], columns=["a", "b"], split="dev", dataset=DatasetDict({"dev": table}))
    assert (source.first_column, source.second_column) == ("a", "b")
    with pytest.raises(PSPInputError, match="no split 'train'"):
        PairSource(["<x>"], dataset=DatasetDict({"dev": table}))
    with pytest.raises(PSPInputError, match="cannot tell which two columns"):
        PairSource(["<x>"], dataset=table)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([("a b", "c d"), ("only one",)], r"data\[1\]: expected a \(sentence, paraphrase\) pair"),
        ([("a b", 3)], r"data\[0\]: both sides must be strings"),
        ([], "the list of pairs is empty"),
        (42, "expected a datasets.Dataset"),
    ],
)
def test_bad_objects_are_refused_with_the_item(tmp_path, tokenizer, data, message):
    with pytest.raises(PSPInputError, match=message):
        train(settings(tmp_path / "bad", tokenizer), data=data)


def test_data_given_twice_is_refused(tmp_path, tokenizer):
    with pytest.raises(PSPInputError, match="given twice"):
        train(settings(tmp_path / "twice", tokenizer, data=["pairs.tsv"]), data=make_pairs(5))
