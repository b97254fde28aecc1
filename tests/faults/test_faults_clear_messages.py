"""Error messages that named the wrong thing, or came late: the line of a truncated .gz, a read-only `psp export -o`,
a file given as a folder (`psp eval --data-dir`, `psp embed-dataset -o`), an empty back-translation input, a missing
`--corpus`, `--tokenizer` or teacher path, Rust's panic report before a tokenizer's error, and `psp languages
--minutes -1`. Each is one `psp: error:` line that names the argument or the file, and the right line of it."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from fault_helpers import build_model, english_pairs, one_error_line, run_cli, small_run


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("m") / "model")


def test_a_truncated_gz_names_the_line_where_its_data_ends(tmp_path, model):
    from psp_hf.io.reading import TruncatedInputError, iter_raw_lines

    path = tmp_path / "sentences.txt.gz"
    text = "".join(f"a dog runs in the park number {i}\n" for i in range(60_000)).encode()
    compressed = gzip.compress(text)
    path.write_bytes(compressed[: len(compressed) * 5 // 6])
    with pytest.raises(TruncatedInputError) as line_by_line:  # the line reader's count: the line that broke off
        for _ in iter_raw_lines(path):
            pass
    expected = str(line_by_line.value).split(": cannot read further")[0]
    assert int(expected.rsplit(":", 1)[1]) > 40_000
    code, _, err = run_cli("embed", "-m", str(model), str(path), "-o", str(tmp_path / "out.npy"))
    assert code == 2
    assert f"{expected}: cannot read further: broken gzip data" in one_error_line(err)
    assert not (tmp_path / "out.npy").exists()


def test_export_into_a_read_only_folder_is_refused_first_naming_the_output(tmp_path, model, monkeypatch):
    import psp_hf.encoder

    locked = tmp_path / "locked"
    locked.mkdir()
    # A permission check, not chmod: tests may run as root, who may write anywhere.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked and real_access(path, mode))
    monkeypatch.setattr(psp_hf.encoder, "load", lambda *a, **k: pytest.fail("loaded before the check"))
    out = locked / "small"
    code, _, err = run_cli("export", str(model), "-o", str(out), "-q")
    assert code == 2
    line = one_error_line(err)
    assert f"--output {out}: cannot write in {locked}" in line and ".export-" not in line
    assert list(locked.iterdir()) == []


def test_eval_data_dir_given_a_file_says_it_is_not_a_folder(tmp_path, model):
    a_file = english_pairs(tmp_path / "pairs.tsv", 3)
    code, _, err = run_cli("eval", "-m", str(model), "--data-dir", str(a_file), "--tasks", "sts-b")
    assert code == 2
    line = one_error_line(err)
    assert f"--data-dir {a_file}: is a file, not a folder" in line and "not found" not in line


def test_embed_dataset_output_given_a_file_says_so(tmp_path, model):
    sentences = tmp_path / "in.txt"
    sentences.write_text("a dog runs\n")
    a_file = tmp_path / "taken.tsv"
    a_file.write_text("keep me\n")
    code, _, err = run_cli("embed-dataset", str(sentences), "-m", str(model), "-o", str(a_file))
    assert code == 2
    line = one_error_line(err)
    assert f"--output {a_file}: is a file" in line and "File exists" not in line
    assert a_file.read_text() == "keep me\n"


def test_an_empty_backtranslation_input_is_named_before_the_output_is_made(tmp_path):
    from toy_translation import build_models

    models = build_models(tmp_path / "bt-models")
    empty = tmp_path / "cs-en.tsv"
    empty.write_text("")
    out = tmp_path / "out"
    argv = ["backtranslate", str(empty), "--src-lang", "cs", "--model", str(models / "mt"), "-o", str(out)]
    code, _, err = run_cli(*argv, "--batch-size", "2", "--max-new-tokens", "8", "-q")
    assert code == 2
    line = one_error_line(err)
    assert f"{empty}: no sentence pairs to back-translate" in line and "translations.tsv" not in line
    assert not out.exists()


def test_label_with_a_missing_corpus_file_does_not_suggest_writing_there(tmp_path):
    missing = tmp_path / "nope.txt"
    code, _, err = run_cli("prepare", "label", "--corpus", str(missing), "-o", str(tmp_path / "cache"))
    assert code == 2
    line = one_error_line(err)
    assert f"--corpus {missing}: no distillation corpus there (no such file or folder)" in line
    assert f"-o {missing}" not in line


@pytest.mark.parametrize("spelling", ["./missing-tokenizer", "{tmp}/missing-tokenizer", "a/b/missing-tokenizer"])
def test_a_missing_local_tokenizer_is_called_missing_not_a_bad_repo_id(tmp_path, train_here, spelling, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = spelling.format(tmp=tmp_path)
    pairs = english_pairs(tmp_path / "pairs.tsv", 20)
    code, err = train_here(*small_run(pairs, name), "-o", str(tmp_path / "run"))  # spelt as given
    assert code == 2
    line = one_error_line(err)
    assert f"--tokenizer {name}: no such folder" in line and "Repo id" not in line


@pytest.mark.parametrize("spelling", ["./missing-teacher", "{tmp}/missing-teacher", "a/b/missing-teacher"])
def test_a_missing_local_teacher_is_called_missing_not_a_bad_repo_id(tmp_path, spelling, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pq.write_table(pa.table({"sentence": ["a dog runs", "a cat sits"], "source": ["x", "x"]}),
                   corpus / "sentences.parquet")  # fmt: skip
    name = spelling.format(tmp=tmp_path)
    cache = tmp_path / "cache"
    code, _, err = run_cli("prepare", "label", "--corpus", str(corpus), "-o", str(cache), "--teacher", name)
    assert code == 2
    line = one_error_line(err)
    assert f"teacher '{name}': no such model folder" in line and "Repo id" not in line


def test_a_tokenizer_panic_while_encoding_keeps_rusts_report_off_stderr(tmp_path, model, capfd, monkeypatch):
    import shutil

    monkeypatch.setenv("RUST_BACKTRACE", "1")  # the longest report Rust writes
    folder = tmp_path / "crafted"
    shutil.copytree(model, folder)
    config = json.loads((folder / "tokenizer.json").read_text())
    # Ordinary text (the load-time probe) passes; a long run of x makes Oniguruma give up, and the tokenizer panic.
    config["normalizer"] = {"type": "Replace", "pattern": {"Regex": "(x+)+y"}, "content": "x"}
    (folder / "tokenizer.json").write_text(json.dumps(config))
    sentences = tmp_path / "in.txt"
    sentences.write_text("x" * 60 + "\n")
    capfd.readouterr()
    code, _, err = run_cli("embed", "-m", str(folder), str(sentences), "-o", str(tmp_path / "out.npy"))
    assert code == 2 and "the tokenizer failed" in one_error_line(err)
    written = capfd.readouterr().err  # what reached descriptor 2 itself
    assert "panicked" not in written and "stack backtrace" not in written and "RUST_BACKTRACE" not in written


def test_languages_minutes_below_zero_names_its_own_flag_before_any_work(tmp_path):
    out = tmp_path / "languages"
    code, _, err = run_cli("languages", "--langs", "de", "-o", str(out), "--minutes", "-1")
    assert code == 2
    line = one_error_line(err)
    assert "--minutes must be a number of minutes >= 0" in line and "--max-minutes" not in line
    assert not out.exists()


def test_other_writes_to_stderr_while_the_tokenizer_runs_pass_through_intact(capfd):
    from psp_hf.errors import keep_panic_reports_off_stderr, native_panics

    keep_panic_reports_off_stderr()  # as `psp` does (the first CLI run of this session has already)
    capfd.readouterr()
    for text in (b"one\n", b"two\n", b"progress 50%\r"):
        with native_panics("the tokenizer"):
            os.write(2, text)
            with native_panics("the tokenizer"):  # nested and from other threads: descriptor 2 is shared
                os.write(2, b"inner\n")
    assert capfd.readouterr().err == "one\ninner\ntwo\ninner\nprogress 50%\rinner\n"
