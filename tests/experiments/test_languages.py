"""`psp languages`: the per-language pipeline on tiny bitext, killed during training and resumed."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from toy_bitext import WordTeacher, make_bitext

DATA = Path(os.environ.get("PSP_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")).resolve()
CLI = "import sys; from psp_hf.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.slow
def test_languages_pipeline_resumes_after_a_kill(tmp_path, capsys):
    if not DATA.is_dir():
        pytest.skip(f"real data not found at {DATA} (set PSP_DATA)")
    from psp_hf.teachers.labels import TeacherCache

    # A data folder with the real evaluation sets and tiny German bitext in the places the recipe reads.
    data = tmp_path / "data"
    data.mkdir()
    for part in ("sts", "senteval", "tatoeba", "paraphrase"):
        (data / part).symlink_to(DATA / part)
    pairs = make_bitext(tmp_path / "pairs.tsv", 600)
    for relative, chunk in (
        ("bitext/multi30k/de-en/train.tsv.gz", pairs[:300]),
        ("bitext/wmt-news/de-en.tsv.gz", pairs[300:]),
        # The two dev sets of the default rule (their pairs are removed from the training text).
        ("bitext/ud-pud/de-en.tsv.gz", pairs[:40]),
        ("bitext/everyday/xnli/dev/de-en.tsv.gz", pairs[40:80]),
        # The everyday sources of de, part of the default set.
        ("bitext/everyday/xsid/de-en.tsv.gz", pairs[500:520]),
        ("bitext/everyday/storybooks/de-en.tsv.gz", pairs[520:540]),
    ):
        path = data / relative
        path.parent.mkdir(parents=True)
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write("de\ten\n" + "".join(f"{a}\t{b}\n" for a, b in chunk))
    cache = tmp_path / "cache"
    TeacherCache(cache).label([b for _, b in pairs], WordTeacher(), name="word-teacher")
    out = tmp_path / "out"
    command = [
        sys.executable, "-c", CLI, "languages", "--langs", "de", "-o", str(out), "--data-dir", str(data),
        "--teacher", "word-teacher", "--teacher-cache", str(cache), "--dim", "8", "--vocab-size", "150",
        "--no-registry", "--tasks", "tatoeba", "--threads", "1", "--minutes", "5", "--epochs", "100000",
        "--multilingual", "--multilingual-vocab-size", "150",
    ]  # fmt: skip
    env = {**os.environ, "PSP_DATA": str(data)}
    small = "--save-every 10 --batch-size 16 --megabatch-size 2"
    first = subprocess.Popen([*command, "--train-args", small], env=env,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    checkpoint = out / "de" / "model" / "training" / "checkpoint.json"
    deadline = time.monotonic() + 120
    while not checkpoint.is_file() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert checkpoint.is_file(), first.stderr.read() if first.poll() is not None else "no checkpoint in time"
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert (out / "de" / "done-prepare").is_file() and not (out / "de" / "done-train").is_file()
    prepared_at = (out / "de" / "done-prepare").stat().st_mtime_ns

    second = subprocess.run(
        [*command, "--train-args", f"{small} --max-steps 1"], env=env, capture_output=True, text=True
    )
    assert second.returncode == 0, second.stderr
    assert "prepare: done before, skipped" in second.stderr and "label: done before, skipped" in second.stderr
    assert (out / "de" / "done-prepare").stat().st_mtime_ns == prepared_at
    arguments = json.loads((out / "de" / "done-train").read_text())["arguments"]
    assert "--resume" in arguments and "--teacher" in arguments
    summary = json.loads((out / "summary.json").read_text())
    assert summary[0]["language"] == "de" and summary[0]["pairs"] > 500 and summary[0]["tatoeba_error"] is not None
    assert 0 <= summary[0]["tatoeba_error_margin"] <= 100
    card = (out / "de" / "model" / "README.md").read_text()
    assert "Tatoeba" in card and "has not been evaluated yet" not in card
    # The multilingual model came after it, from its prepared text (here de alone), with its own vocabulary.
    multilingual = summary[1]
    assert multilingual["language"] == "multilingual" and multilingual["pairs"] == summary[0]["pairs"]
    assert set(multilingual["tatoeba"]) == {"de"} and multilingual["tatoeba_error"] is not None
    card = (out / "multilingual" / "model" / "README.md").read_text()
    assert "p-sp-multilingual" in card and "- zh" in card and "the paper's seven models" in card
    assert "de: bitext (" in card and "Dev sets (" in card
    assert "p-sp-multilingual's Tatoeba is the mean" in (out / "summary.md").read_text()
    # A third run has nothing left to do (in this process: no start-up cost).
    from psp_hf.cli import main

    capsys.readouterr()
    assert main(command[3:]) == 0
    assert capsys.readouterr().err.count("done before, skipped") == 10


@pytest.fixture
def pud_files(tmp_path):
    """Empty PUD and XNLI dev files where a data folder at tmp_path keeps them: training settings check the dev
    sets exist."""
    from psp_hf.data.sources.language_sources import DEV_SOURCE, XNLI_DEV

    for code in ("ar", "de", "fr", "tr"):
        for source in (DEV_SOURCE, XNLI_DEV):
            path = source.path(tmp_path, code)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return tmp_path


def test_margin_only_trains_without_a_teacher_and_labels_nothing(tmp_path, pud_files):
    from psp_hf.experiments.languages import Settings, _label, training_arguments

    distilled = Settings(out=tmp_path, data=tmp_path, teacher_cache=tmp_path / "cache")
    baseline = Settings(out=tmp_path, data=tmp_path, teacher_cache=tmp_path / "cache", margin_only=True)
    assert training_arguments("de", tmp_path / "de", distilled).teacher_cache == str(tmp_path / "cache")
    without = training_arguments("de", tmp_path / "de", baseline)
    assert without.teacher is None and without.teacher_cache is None
    assert without.lang == "de" and without.data == [str(tmp_path / "de" / "data")]
    # SIF piece weights with a teacher only: the baseline is the paper's plain mean.
    assert training_arguments("de", tmp_path / "de", distilled).piece_weights == "sif"
    assert without.piece_weights == "none"
    plain = Settings(out=tmp_path, data=tmp_path, extra=("--piece-weights", "none"))
    assert training_arguments("de", tmp_path / "de", plain).piece_weights == "none"
    # The same for the margin: 0.6 with a teacher (0.4 in es and fr, which their dev sets chose), the paper's 0.4
    # for the baseline, and --train-args wins.
    assert training_arguments("de", tmp_path / "de", distilled).margin == 0.6
    assert training_arguments("fr", tmp_path / "fr", distilled).margin == 0.4
    assert without.margin == 0.4
    chosen = Settings(out=tmp_path, data=tmp_path, extra=("--margin", "0.5"))
    assert training_arguments("de", tmp_path / "de", chosen).margin == 0.5
    assert "skipped" in _label("de", tmp_path / "de", baseline)
    assert not (tmp_path / "cache").exists()


def test_an_e5_teacher_is_whitened_unless_train_args_say_otherwise(tmp_path, pud_files):
    from psp_hf.experiments.languages import Settings, training_arguments

    e5 = training_arguments("tr", tmp_path / "tr", Settings(out=tmp_path, data=tmp_path, teacher="e5-small"))
    assert e5.teacher_transform == "whiten"
    minilm = Settings(out=tmp_path, data=tmp_path, teacher="default")  # all-MiniLM-L6-v2: its labels as they come
    assert training_arguments("tr", tmp_path / "tr", minilm).teacher_transform == "none"
    assert Settings(out=tmp_path, data=tmp_path).teacher == "e5-small"  # the recipe's teacher by default
    asked = Settings(out=tmp_path, data=tmp_path, teacher="e5-small", extra=("--teacher-transform", "center"))
    assert training_arguments("tr", tmp_path / "tr", asked).teacher_transform == "center"


def test_the_record_keeps_a_command_line_that_gives_the_same_settings(tmp_path, pud_files):
    from psp_hf.experiments.languages import Settings, training_arguments
    from psp_hf.training import TrainingArguments
    from psp_hf.training.arguments.command_line import command_line, with_flags

    settings = Settings(out=tmp_path, data=tmp_path, teacher="e5-small", extra=("--max-steps", "7", "--no-quiet"))
    arguments = training_arguments("tr", tmp_path / "tr", settings, resume=True)
    flags = command_line(arguments)
    assert flags[flags.index("--max-steps") + 1] == "7" and "--resume" in flags and "--quiet" not in flags
    assert with_flags(TrainingArguments(), flags) == arguments


def test_init_rows_from_replaces_dim_and_must_be_a_model(tmp_path, pud_files):
    from psp_hf.cli.flags import Parser
    from psp_hf.cli.languages import add_arguments, run
    from psp_hf.errors import PSPInputError
    from psp_hf.experiments.languages import Settings, training_arguments
    from psp_hf.training import TrainingArguments

    english = tmp_path / "p-sp-en"
    settings = Settings(out=tmp_path, data=tmp_path, teacher_cache=tmp_path / "cache", init_rows_from=str(english))
    arguments = training_arguments("fr", tmp_path / "fr", settings)
    assert arguments.init_rows_from == str(english)
    assert arguments.dim == TrainingArguments().dim  # not set: the width is the English model's
    assert training_arguments("fr", tmp_path / "fr", Settings(out=tmp_path, data=tmp_path)).init_rows_from is None
    # Arabic's English rows are pulled back toward the English model; --train-args goes on top, so it can undo that.
    assert arguments.init_l2 == 0.0
    assert training_arguments("ar", tmp_path / "ar", settings).init_l2 == 1e-5
    assert training_arguments("ar", tmp_path / "ar", Settings(out=tmp_path, data=tmp_path)).init_l2 == 0.0
    undone = training_arguments("ar", tmp_path / "ar", Settings(**{**vars(settings), "extra": ("--init-l2", "0")}))
    assert undone.init_l2 == 0.0

    parser = Parser()
    add_arguments(parser)
    args = parser.parse_args(["--langs", "fr", "-o", str(tmp_path / "out"), "--data-dir", str(tmp_path)])
    args.init_rows_from = str(english)
    with pytest.raises(PSPInputError, match="--init-rows-from .*p-sp-en: not a model folder"):
        run(args)
    args.registry_sources = "freedict,manpages"
    with pytest.raises(PSPInputError, match="--registry-sources 'freedict,manpages': give one or more of"):
        run(args)
    args.registry_sources, args.init_rows_from, args.mono_fragments = parser.parse_args([]).registry_sources, None, -1
    with pytest.raises(PSPInputError, match="--mono-fragments -1: give a count of spans"):
        run(args)
    assert not (tmp_path / "out").exists()


def test_summary_names_the_data_files_and_counts_the_registry_sources():
    from psp_hf.experiments.language_results import data_description

    inputs = ["train.tsv.gz", "de-en.tsv.gz", "freedict-deu-eng.tsv", "gettext-tar-de.tsv", "libreoffice-sw-de.tsv"]
    assert data_description(inputs) == "train.tsv.gz, de-en.tsv.gz + 3 registry sources"
    assert data_description(["ru-en.tsv.gz", "gettext-vlc-ru.tsv"]) == "ru-en.tsv.gz + 1 registry source"
    assert data_description(["train.tsv.gz"]) == "train.tsv.gz"
