"""One flag vocabulary: every command line of the README in today's spelling parses, and `--help` shows one spelling
per flag."""

from __future__ import annotations

import re
import shlex

import pytest

from psp_hf.cli import COMMANDS, build_parser, command_parser, parse_args
from psp_hf.cli.flags import Parser, cores_available

# The complete `psp` command lines of an earlier README (placeholders kept, `[...]` optional parts written out), each
# beside the same command in today's spelling (the one that parses). Fragments (`psp train ...`) are left out.
README_COMMANDS = [
    ("backtranslate cs-en.tsv.gz --src-lang cs --model Helsinki-NLP/opus-mt-cs-en --out bt-cs",
     "backtranslate cs-en.tsv.gz --src-lang cs -m Helsinki-NLP/opus-mt-cs-en -o bt-cs"),
    ("backtranslate cs-en.tsv.gz --src-lang cs --model Helsinki-NLP/opus-mt-cs-en --out bt-cs --min-length 5 "
     "--max-length 30 --max-cost 1.5 --max-overlap 0.5 --min-bleu 5 --lm gpt2 --max-lm 6 --classifier "
     "--max-machine 0.9 --score-model MY_PSP_MODEL --min-score 0.5",
     "backtranslate cs-en.tsv.gz --src-lang cs -m Helsinki-NLP/opus-mt-cs-en -o bt-cs --min-length 5 "
     "--max-length 30 --max-cost 1.5 --max-overlap 0.5 --min-bleu 5 --lm gpt2 --max-lm 6 --classifier "
     "--max-machine 0.9 --score-model MY_PSP_MODEL --min-score 0.5"),
    ("backtranslate cs-en.tsv.gz --src-lang cs --model facebook/nllb-200-distilled-600M --out bt-cs-nllb "
     "--tokenizer-src-lang ces_Latn --target-token eng_Latn",
     "backtranslate cs-en.tsv.gz --src-lang cs -m facebook/nllb-200-distilled-600M -o bt-cs-nllb "
     "--tokenizer-src-lang ces_Latn --target-token eng_Latn"),
    ("convert-original --checkpoint model.pt --sp-model spm.model -o DIR --trust-pickle",) * 2,
    ("embed - -m MODEL -o emb.npy",) * 2,
    ("embed sentences.txt -m MODEL -o emb.npy",) * 2,
    ("embed-dataset corpus/ --column text -m MODEL -o out --format parquet",) * 2,
    ("embed-dataset corpus/ --column text -m MODEL -o out --num-proc 4",) * 2,
    ("embed-dataset user/dataset --column sentence --split train -m MODEL -o out",) * 2,
    ("embed-dataset wiki.txt.gz -m MODEL -o wiki-emb",) * 2,
    ("eval --encoder my_encoders:embed --model runs/p-sp-en --tasks fast --output results/eval.json",) * 2,
    ("eval --encoder senteval_script.py --tasks all",) * 2,
    ("eval --encoder senteval_script.py:batcher --tasks senteval",) * 2,
    ("eval -m M --tasks sts12-16 stsb sickr",) * 2,
    ("eval -m MODEL --tasks tatoeba --tatoeba-margin-k 4",) * 2,
    ("eval -m MPNET --tasks sts12-16",) * 2,
    ("eval -m OUT --tasks tatoeba sts12 sts13 sts14 sts15 sts16 stsb --tatoeba-langs es",) * 2,
    ("eval -m OUT --tasks tatoeba sts12 sts13 sts14 sts15 sts16 stsb sts17 --sts17-pairs ar-ar ar-en "
     "--tatoeba-langs ar",) * 2,
    ("eval -m runs/p-sp-en -o results.json",) * 2,
    ("eval -m runs/p-sp-en minilm --tasks fast",) * 2,
    ("export MODEL -o OUT --dimensionality 256",) * 2,
    ("export MODEL -o OUT --format model2vec",) * 2,
    ("export MODEL -o OUT --quantize-to int8",) * 2,
    ("info MODEL",) * 2,
    ("languages --langs de --out .cache/real/languages --limit 20000 --no-registry --minutes 8 --epochs 5 "
     "--dim 1024 --threads 2",
     "languages --langs de -o .cache/real/languages --limit 20000 --no-registry --minutes 8 --epochs 5 "
     "--dim 1024 --threads 2"),
    ("languages --out .cache/languages-22 --init-rows-from EN --minutes 10 --epochs 5 --threads 1",
     "languages -o .cache/languages-22 --init-rows-from EN --minutes 10 --epochs 5 --threads 1"),
    ("languages --out .cache/languages-22-margin --margin-only --dim 384 --minutes 10 --epochs 5 --threads 1",
     "languages --output .cache/languages-22-margin --margin-only --dim 384 --minutes 10 --epochs 5 --threads 1"),
    ("mine de-emb/ --target en-emb/ -o pairs.parquet",) * 2,
    ("mine wiki-emb/ --mode threshold --threshold 0.95 -o duplicates.tsv",) * 2,
    ("prepare bitext de-en.tsv.gz --lang de --out data/de-en", "prepare bitext de-en.tsv.gz --lang de -o data/de-en"),
    ("prepare bitext de-en.tsv.gz --lang de --push-to-hub my-org/de-en",) * 2,
    ("prepare bitext multi30k/de-en/train.tsv.gz wmt-news/de-en.tsv.gz --lang de --out data/de-en",
     "prepare bitext multi30k/de-en/train.tsv.gz wmt-news/de-en.tsv.gz --lang de --output data/de-en"),
    ("prepare label --corpus POOL --cache CACHE", "prepare label --corpus POOL -o CACHE"),
    ("prepare label --corpus data/de-en --cache CACHE", "prepare label --corpus data/de-en --output CACHE"),
    ("prepare mine-pairs --cache CACHE --out pairs.tsv", "prepare mine-pairs --cache CACHE -o pairs.tsv"),
    ("prepare paraphrases bt-cs/pairs.tsv --out bt-cs-prepared",
     "prepare paraphrases bt-cs/pairs.tsv -o bt-cs-prepared"),
    ("prepare paraphrases pairs.tsv.gz --columns sentence1,sentence2 --no-score-filter --no-overlap-filter",) * 2,
    ("prepare paraphrases pairs.tsv.gz --out data/paranmt-en", "prepare paraphrases pairs.tsv.gz -o data/paranmt-en"),
    ("prepare pool --out POOL", "prepare distill-corpus -o POOL"),
    ("prepare registry-bitext --lang de --out data/de-en-registry",
     "prepare registry-bitext --lang de -o data/de-en-registry"),
    ("prepare registry-bitext --lang ru --out ru-registry", "prepare registry-bitext --lang ru -o ru-registry"),
    ("push runs/p-sp-de my-org/p-sp-de --private --revision main",) * 2,
    ("push runs/p-sp-de my-org/p-sp-de-int8 --quantize-to int8 --dimensionality 256",) * 2,
    ("score pairs.tsv -m MODEL -o scored.tsv",) * 2,
    ("train --config run.yaml --resume",) * 2,
    ("train --data .cache/languages-10/ar/data --lang ar --init-std 0.1 --lr 0.01 --epochs 5 --init-rows-from EN "
     "--teacher default --teacher-cache CACHE --threads 1 --output-dir OUT --init-l2 1e-5",
     "train --data .cache/languages-10/ar/data --lang ar --init-std 0.1 --lr 0.01 --epochs 5 --init-rows-from EN "
     "--teacher default --teacher-cache CACHE --threads 1 -o OUT --init-l2 1e-5"),
    ("train --data .cache/real/languages/de/data --lang de --dim 1024 --init-std 0.1 --lr 0.01 --epochs 5 "
     "--max-minutes 8 --threads 2 --output-dir .cache/real/de-margin",
     "train --data .cache/real/languages/de/data --lang de --dim 1024 --init-std 0.1 --lr 0.01 --epochs 5 "
     "--max-minutes 8 --threads 2 -o .cache/real/de-margin"),
    ("train --data PAIRS --init-from MODEL --output-dir OUT", "train --data PAIRS --init-from MODEL -o OUT"),
    ("train --data data/de-en --lang de --teacher default --teacher-cache CACHE --init-std 0.1 --lr 0.01 "
     "--epochs 5 --output-dir runs/p-sp-de",
     "train --data data/de-en --lang de --teacher default --teacher-cache CACHE --init-std 0.1 --lr 0.01 "
     "--epochs 5 --output runs/p-sp-de"),
    ("train --data de-en.tsv.gz --lang de --output-dir runs/p-sp-de",
     "train --data de-en.tsv.gz --lang de -o runs/p-sp-de"),
    ("train --data pairs.tsv --output-dir my-model --dim 1024 --matryoshka-dims 64,128,256",
     "train --data pairs.tsv -o my-model --dim 1024 --matryoshka-dims 64,128,256"),
    ("train --data pairs.tsv --units word --combination concat --second-units trigram --dim 300 --output-dir OUT",
     "train --data pairs.tsv --units word --combination concat --second-units trigram --dim 300 -o OUT"),
    ("train --data pairs.tsv --units word --encoder-type gran --scramble-rate 0.3 --output-dir OUT",
     "train --data pairs.tsv --units word --encoder-type gran --scramble-rate 0.3 -o OUT"),
    ("train --data pairs.tsv --units word --encoder-type mean --negative-selection mix --init-l2 1e-6 "
     "--init word-vectors --init-vectors paragram.txt --output-dir OUT",
     "train --data pairs.tsv --units word --encoder-type mean --negative-selection mix --init-l2 1e-6 "
     "--init word-vectors --init-vectors paragram.txt -o OUT"),
    ("train --data pairs.tsv.gz --output-dir runs/p-sp-en", "train --data pairs.tsv.gz -o runs/p-sp-en"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new"), README_COMMANDS)
def test_readme_command_lines_parse_in_todays_spelling(old, new):
    args = parse_args(shlex.split(new))
    assert args.command == new.split()[0]
    if old != new:  # the earlier spelling is refused: no hidden aliases, no abbreviations
        with pytest.raises(SystemExit):
            parse_args(shlex.split(old))


def test_every_readme_command_is_checked():
    commands = {old.split()[0] for old, _ in README_COMMANDS}
    # The old README had no serve, teacher or data command line.
    assert commands == set(COMMANDS) - {"serve", "teacher", "data"}


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_shows_only_the_new_spellings(name):
    for prog, parser in _parsers_of(name):
        shown = _options(parser.format_help())
        assert not shown & {"--out", "--output-dir", "--output_dir"}, prog
        assert "-q" in shown and "--quiet" in shown, prog
        if prog not in ("psp train", "psp prepare mine-pairs"):  # train's --data is training data; --cache read
            assert "--data" not in shown and "--cache" not in shown, prog


def _parsers_of(name: str):
    """(prog, parser) of the command, or of each of its own commands (prepare KIND, teacher ACTION)."""
    parser = command_parser(name)
    children = [child for _help, child in parser.subcommands.values()]
    return [(parser.prog, parser)] if not children else [(child.prog, child) for child in children]


def test_top_level_help_lists_every_command():
    text = build_parser().format_help()
    assert all(name in text for name in COMMANDS)


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "train"])
def test_threads_has_one_default(name):
    for prog, parser in _parsers_of(name):
        if "--threads" in _options(parser.format_help()):
            assert parser.get_default("threads") == cores_available(), prog


def test_columns_is_one_parser():
    for argv in (
        ["score", "P", "-m", "M"],
        ["prepare", "paraphrases", "P"],
        ["backtranslate", "B", "--src-lang", "cs", "-m", "M"],
    ):
        args = parse_args([*argv, "--columns", "2,3"])
        assert args.columns == [1, 2], argv
    assert parse_args(["prepare", "bitext", "P", "--lang", "de", "--columns", "de,en"]).columns == ["de", "en"]
    with pytest.raises(SystemExit):
        parse_args(["score", "P", "-m", "M", "--columns", "0,1"])


def test_subcommands_are_recorded_in_order():
    kinds = list(command_parser("prepare").subcommands)
    assert kinds[:3] == ["paraphrases", "bitext", "registry-bitext"] and "mono" in kinds
    assert list(command_parser("teacher").subcommands) == ["convert-e5"]
    with pytest.raises(TypeError, match="add_subparsers"):
        Parser(prog="psp x").add_subcommand("y", help="z")
