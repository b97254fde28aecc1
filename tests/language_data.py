"""A tiny data folder in PSP_DATA's layout for the language-source tests (tests/experiments)."""

from __future__ import annotations

import gzip
from pathlib import Path

PUD_PAIR = ("der hund schläft im park", "the dog sleeps in the park")
XNLI_PAIR = ("magst du kaffee am morgen", "do you like coffee in the morning")
TATOEBA = ("ich habe hunger", "i am hungry")


def _gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(text)


def tiny_data_folder(root: Path, pairs: list[tuple[str, str]]) -> Path:
    """A data folder in PSP_DATA's layout: empty evaluation sets but Tatoeba, and de/ar sources of every kind."""
    from psp_hf.data.distill_corpus import STS_YEARS

    for folder in [f"sts/en/{year}" for year in STS_YEARS] + ["sts/sts17"]:
        (root / folder).mkdir(parents=True)
    for folder in ("sts/stsbenchmark", "sts/sick", "paraphrase/en/mrpc", "senteval"):
        (root / folder).mkdir(parents=True)
    (root / "tatoeba" / "v1").mkdir(parents=True)
    (root / "tatoeba/v1/tatoeba.deu-eng.deu").write_text(TATOEBA[0] + "\n", encoding="utf-8")
    (root / "tatoeba/v1/tatoeba.deu-eng.eng").write_text(TATOEBA[1] + "\n", encoding="utf-8")
    rows = "".join(f"{a}\t{b}\n" for a, b in pairs)
    _gz(root / "bitext/multi30k/de-en/train.tsv.gz", f"de\ten\n{rows}" + "\t".join(PUD_PAIR) + "\n")
    _gz(root / "bitext/wmt-news/de-en.tsv.gz", "testset\tde\ten\n" + "".join(f"nt\t{a}\t{b}\n" for a, b in pairs[:40]))
    _gz(root / "bitext/docs/gnome-user-docs/de-en.tsv.gz", "de\ten\n" + rows.splitlines()[0] + "\n")
    _gz(root / "bitext/mlqe-pe/de-en.tsv.gz", f"de\ten\n{rows}")
    _gz(root / "bitext/ud-pud/de-en.tsv.gz", "de\ten\n" + "\t".join(PUD_PAIR) + "\n")
    _gz(root / "bitext/everyday/xnli/dev/de-en.tsv.gz", "de\ten\n" + "\t".join(XNLI_PAIR) + "\n")
    # The everyday register's sources of de, part of the default set: a voice request and a story line.
    _gz(root / "bitext/everyday/xsid/de-en.tsv.gz", "de\ten\nwecker für sieben uhr stellen\tset an alarm for seven\n")
    _gz(root / "bitext/everyday/storybooks/de-en.tsv.gz", "de\ten\nDer Hund schläft.\tThe dog is asleep.\n")
    mono = [f"satz nummer {i} ist hier" for i in range(30)]
    texts = [*mono, PUD_PAIR[0], "Ich habe Hunger!", XNLI_PAIR[0].capitalize() + "?"]
    _gz(root / "unlabeled/de/commonvoice/sentences.txt.gz", "\n".join(texts) + "\n")
    _gz(root / "unlabeled/de/fortunes/sentences.txt.gz", "\n".join([mono[0], "ein spruch", "x " * 150]) + "\n")
    _gz(root / "unlabeled/ar/saudinewsnet/sentences.txt.gz", "خبر\n")
    _gz(root / "unlabeled/arz/wikipedia/sentences.txt.gz", "مقالة\n")
    english = [
        f"the english sentence number {i} is long enough to pass one hundred characters in all, counted by hand, "
        "with a few more words."
        for i in range(4)
    ]
    _gz(root / "unlabeled/en/wikipedia-2015/sentences.txt.gz", "\n".join([*english, "I am hungry."]) + "\n")
    return root
