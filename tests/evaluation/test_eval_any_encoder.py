"""Any encoder on every task: a function `list[str] -> array` and SentEval's prepare/batcher pair, through the
Python API (`evaluate`) and the CLI (`psp eval --encoder module:function`), on a tiny data folder built here."""

from __future__ import annotations

import json
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from psp_hf.errors import PSPInputError
from psp_hf.evaluation import ALL_TASKS, evaluate, evaluate_model
from psp_hf.evaluation import data as eval_data
from psp_hf.evaluation.callables import load_encoder_spec
from psp_hf.evaluation.wrapping import SENTEVAL_TASK_NAMES

TABLE = np.random.default_rng(0).normal(size=(1 << 12, 32)).astype(np.float32)
BATCH_SIZES: list[int] = []


def hashing_bow(sentences: list[str]) -> np.ndarray:
    """Bag of words: each lower-cased word hashes (crc32) to a row of a fixed random table; rows are averaged."""
    BATCH_SIZES.append(len(sentences))
    out = np.zeros((len(sentences), TABLE.shape[1]), dtype=np.float32)
    for row, sentence in enumerate(sentences):
        ids = [zlib.crc32(word.lower().encode("utf-8")) % len(TABLE) for word in sentence.split()]
        if ids:
            out[row] = TABLE[ids].mean(axis=0)
    return out


ENCODER_MODULE = textwrap.dedent(
    """
    import zlib

    import numpy as np

    TABLE = np.random.default_rng(0).normal(size=(1 << 12, 32)).astype(np.float32)


    def embed(sentences):
        out = np.zeros((len(sentences), TABLE.shape[1]), dtype=np.float32)
        for row, sentence in enumerate(sentences):
            ids = [zlib.crc32(word.lower().encode("utf-8")) % len(TABLE) for word in sentence.split()]
            if ids:
                out[row] = TABLE[ids].mean(axis=0)
        return out


    def make():
        return embed


    def prepare(params, samples):
        params.prepared = params.get("prepared", 0) + 1


    def batcher(params, batch):
        assert params.prepared >= 1
        return embed([" ".join(tokens) for tokens in batch])


    def wrong_shape(sentences):
        return np.zeros((len(sentences) + 1, 4))
    """
)

WORDS = [
    "man",
    "woman",
    "dog",
    "cat",
    "plays",
    "guitar",
    "eats",
    "food",
    "runs",
    "fast",
    "slow",
    "red",
    "blue",
    "car",
    "house",
    "happy",
    "sad",
]
POSITIVE, NEGATIVE = ["good", "great", "lovely", "fine"], ["bad", "awful", "poor", "dull"]


def _sentence(rng: np.random.Generator, extra: str = "") -> str:
    return " ".join([*rng.choice(WORDS, size=4), extra]).strip()


def _write(path: Path, header: str, rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [header, *("\t".join(str(field) for field in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _pairs(rng: np.random.Generator, n: int) -> list[tuple[float, str, str]]:
    rows = []
    for i in range(n):
        first = _sentence(rng)
        words = first.split()
        for j in range(i % 4):
            words[j] = str(rng.choice(WORDS))
        rows.append((5.0 - i % 4, first, " ".join(words)))
    return rows


def _labelled(rng: np.random.Generator, n: int, classes: int) -> list[tuple[int, str]]:
    cues = [POSITIVE, NEGATIVE, ["what"], ["where"], ["who"], ["when"]]
    return [(i % classes, _sentence(rng, str(rng.choice(cues[i % classes])))) for i in range(n)]


STSB_HEADER = "genre\tfilename\tyear\tsid\tscore\tsentence1\tsentence2"
SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    """Every task's files, a dozen rows each, in the layout of the real data folder."""
    root = tmp_path_factory.mktemp("tiny-data")
    rng = np.random.default_rng(1)
    for year in eval_data.STS_YEARS.values():
        _write(root / "sts" / "en" / year[0] / "set-a.tsv", "score\tsentence1\tsentence2", _pairs(rng, 12))
    for split in ("dev", "test"):
        rows = [("main", "f", "2012", i, *pair) for i, pair in enumerate(_pairs(rng, 12))]
        _write(root / "sts" / "stsbenchmark" / f"{split}.tsv", STSB_HEADER, rows)
    for split in ("train", "trial", "test"):
        rows = [(i, a, b, 1 + score * 0.8, eval_data.SICK_ENTAILMENT_CLASSES[i % 3])
                for i, (score, a, b) in enumerate(_pairs(rng, 18))]  # fmt: skip
        _write(root / "sts" / "sick" / f"{split}.tsv", SICK_HEADER, rows)
    _write(root / "sts" / "sts17" / "en-en.tsv", "score\tsentence1\tsentence2", _pairs(rng, 12))
    tatoeba = root / "tatoeba" / "v1"
    tatoeba.mkdir(parents=True)
    english = [_sentence(rng) for _ in range(10)]
    (tatoeba / "tatoeba.deu-eng.eng").write_text("\n".join(english) + "\n", encoding="utf-8")
    (tatoeba / "tatoeba.deu-eng.deu").write_text("\n".join(s + " ja" for s in english) + "\n", encoding="utf-8")
    for folder in eval_data.SENTEVAL_BINARY.values():
        _write(root / "senteval" / folder / "all.tsv", "label\tsentence", _labelled(rng, 20, 2))
    for split, n in (("train", 24), ("test", 12)):
        rows = [(eval_data.TREC_CLASSES[label], "x", s) for label, s in _labelled(rng, n, 6)]
        _write(root / "senteval" / "TREC" / f"{split}.tsv", "coarse\tfine\tquestion", rows)
    for folder, classes in (("SST2", 2), ("SST5", 5)):
        for split in ("train", "dev", "test"):
            _write(root / "senteval" / folder / f"{split}.tsv", "label\tsentence", _labelled(rng, 20, classes))
    for split in ("train", "test"):
        rows = [(int(score >= 4), i, i + 1, a, b) for i, (score, a, b) in enumerate(_pairs(rng, 16))]
        _write(root / "paraphrase" / "en" / "mrpc" / f"{split}.tsv", "label\tid1\tid2\tsentence1\tsentence2", rows)
    return root


OPTIONS = {"tatoeba_languages": ["de"], "sts17_pairs": ["en-en"], "senteval_kfold": 2}


@pytest.fixture(scope="module")
def reference(tiny_data) -> dict:
    """The same bag of words as an object with encode(): what every other way in must reproduce."""

    class Encoder:
        def encode(self, sentences, batch_size=32, show_progress_bar=False):
            return hashing_bow(list(sentences))

    return evaluate_model(Encoder(), ["all"], tiny_data, **OPTIONS)


def test_function_encoder_on_every_task_matches_an_encode_object(tiny_data, reference):
    BATCH_SIZES.clear()
    result = evaluate(hashing_bow, ["all"], tiny_data, batch_size=7, **OPTIONS)
    assert list(result["results"]) == list(ALL_TASKS)
    assert result["results"] == reference["results"]
    assert result["model"]["kind"] == "callable" and result["model"]["name"].endswith("hashing_bow")
    assert BATCH_SIZES and max(BATCH_SIZES) == 7  # the function is called per batch
    # evaluate_model takes a bare function too.
    assert evaluate_model(hashing_bow, ["sts13"], tiny_data)["results"]["sts13"] == reference["results"]["sts13"]


def test_prepare_and_batcher_follow_senteval(tiny_data, reference):
    prepared: list[tuple[str, list]] = []
    batches: list[list] = []

    def prepare(params, samples):
        prepared.append((params.current_task, samples))
        params.vocabulary = {token for sentence in samples for token in sentence}

    def batcher(params, batch):
        batches.append(batch)
        assert all(token in params.vocabulary for tokens in batch for token in tokens)
        return hashing_bow([" ".join(tokens) for tokens in batch])

    params = {"batch_size": 5}
    result = evaluate(prepare=prepare, batcher=batcher, params=params, tasks=["all"], data_dir=tiny_data, **OPTIONS)
    assert result["results"] == reference["results"]
    assert result["model"]["kind"] == "senteval"
    # prepare: once per task, in order, with SentEval's task names and the task's sentences as token lists.
    assert [task for task, _ in prepared] == [SENTEVAL_TASK_NAMES[task] for task in ALL_TASKS]
    sts13 = eval_data.read_sts_year(tiny_data, "sts13")
    expected = [s.split() for pairs in sts13 for s in (*pairs.sentences1, *pairs.sentences2)]
    assert dict(prepared)["STS13"] == expected
    mr = eval_data.read_senteval_binary(tiny_data, "mr")
    assert dict(prepared)["MR"] == [s.split() for s in mr.sentences]
    # batcher: lists of token lists, at most params.batch_size of them.
    assert all(isinstance(tokens, list) and all(isinstance(t, str) for t in tokens) for b in batches for tokens in b)
    assert max(len(b) for b in batches) == 5


def test_cli_encoder_from_file_and_module(tiny_data, tmp_path, monkeypatch, capsys, reference):
    from psp_hf.cli import main

    source = tmp_path / "code" / "my_encoders.py"
    source.parent.mkdir()
    source.write_text(ENCODER_MODULE, encoding="utf-8")
    common = ["--data-dir", str(tiny_data), "--tasks", "sts13", "stsb", "mr", "--senteval-kfold", "2", "-q"]
    output = tmp_path / "out" / "results.json"
    assert main(["eval", "--encoder", f"{source}:embed", *common, "--output", str(output)]) == 0
    (model,) = json.loads(output.read_text(encoding="utf-8"))["models"]
    assert model["model"]["name"] == f"{source}:embed" and model["model"]["kind"] == "callable"
    for task in ("sts13", "stsb", "mr"):
        assert model["results"][task] == reference["results"][task]
    assert f"{source}:embed" in capsys.readouterr().out  # the Markdown table names it

    # A module from the current folder: a factory, SentEval's batcher (with the module's prepare), a bare
    # SentEval module, all evaluated in one table.
    monkeypatch.chdir(source.parent)
    specs = ["my_encoders:make", "my_encoders:batcher", "my_encoders"]
    assert main(["eval", "--encoder", *specs, *common, "--output", str(output)]) == 0
    models = json.loads(output.read_text(encoding="utf-8"))["models"]
    assert [m["model"]["name"] for m in models] == specs
    assert [m["model"]["kind"] for m in models] == ["callable", "senteval", "senteval"]
    for m in models:
        assert m["results"]["sts13"] == reference["results"]["sts13"]


def test_bad_encoder_specs_are_one_clear_error(tiny_data, tmp_path, monkeypatch, capsys):
    from psp_hf.cli import main

    (tmp_path / "my_encoders.py").write_text(ENCODER_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cases = {
        "no_such_module_xyz:embed": "cannot import no_such_module_xyz (ModuleNotFoundError",
        "my_encoders:nothing": "module my_encoders has no attribute 'nothing'",
        "my_encoders:TABLE": "ndarray is not an encoder",
        str(tmp_path / "missing.py") + ":embed": "no such file",
    }
    for spec, message in cases.items():
        assert main(["eval", "--encoder", spec, "--data-dir", str(tiny_data), "--tasks", "sts13"]) == 2, spec
        err = capsys.readouterr().err
        assert "psp: error: --encoder" in err and message in err, err
    assert main(["eval", "--data-dir", str(tiny_data), "--tasks", "sts13"]) == 2
    assert "at least one --model ID_OR_PATH or --encoder MODULE:NAME" in capsys.readouterr().err
    with pytest.raises(PSPInputError, match=r"returned shape \(13, 4\) for 12 sentences"):
        evaluate(load_encoder_spec("my_encoders:wrong_shape"), ["sts13"], tiny_data, batch_size=12)
    with pytest.raises(PSPInputError, match="either an encoder or SentEval's batcher"):
        evaluate(tasks=["sts13"], data_dir=tiny_data)
