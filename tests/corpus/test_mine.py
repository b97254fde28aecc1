"""Ratio margin on hand-computed examples, Faiss mining (margin and threshold), `psp mine`, Tatoeba margin errors."""

from __future__ import annotations

import numpy as np
import pytest

from psp_hf.cli import main
from psp_hf.inference.ratio_margin import margin_matrix, margin_retrieval_errors, ratio_margin, top_k_mean

faiss = pytest.importorskip("faiss", reason="psp mine needs faiss-cpu (the [mine] extra)")

from psp_hf.corpus.mine import build_index, mine_margin, mine_threshold, search  # noqa: E402


def test_ratio_margin_by_hand():
    similarity = np.array([[0.9, 0.5], [0.4, 0.8]], dtype=np.float32)
    # k = 1: each side's nearest neighbour mean is its best cosine: rows 0.9, 0.8; columns 0.9, 0.8.
    np.testing.assert_allclose(margin_matrix(similarity, 1), [[1.0, 0.5 / 0.85], [0.4 / 0.85, 1.0]], rtol=1e-6)
    # k = 2: rows average to 0.7 and 0.6, columns to 0.65 and 0.65.
    expected = [[0.9 / 0.675, 0.5 / 0.675], [0.4 / 0.625, 0.8 / 0.625]]
    np.testing.assert_allclose(margin_matrix(similarity, 2), expected, rtol=1e-6)
    np.testing.assert_allclose(top_k_mean(similarity, 2, axis=0), [0.65, 0.65], rtol=1e-6)
    assert ratio_margin(0.5, 0.0, 0.0) == 0.0  # no neighbours with any similarity: no margin


def test_margin_undoes_a_hub_that_cosine_picks():
    # Target 1 is close to everything (a hub): by cosine source 0 retrieves it, by margin its own translation.
    similarity = np.array([[0.80, 0.82], [0.30, 0.85]], dtype=np.float32)
    margins = margin_matrix(similarity, 2)
    # rows: 0.81, 0.575; columns: 0.55, 0.835
    np.testing.assert_allclose(margins[0], [0.8 / 0.68, 0.82 / 0.8225], rtol=1e-6)
    assert similarity[0].argmax() == 1 and margins[0].argmax() == 0


def test_tatoeba_margin_errors_on_vectors():
    rng = np.random.default_rng(0)
    source = rng.normal(size=(50, 16)).astype(np.float32)
    target = source + 0.05 * rng.normal(size=source.shape).astype(np.float32)
    assert margin_retrieval_errors(source, target, k=4) == (0.0, 0.0)
    shuffled = target[::-1].copy()
    xx_to_en, en_to_xx = margin_retrieval_errors(source, shuffled, k=4)
    assert xx_to_en > 0.9 and en_to_xx > 0.9


def test_mine_margin_matches_the_full_matrix():
    rng = np.random.default_rng(1)
    # A shared offset keeps the neighbour means well away from 0, where margins would be ill-conditioned.
    source = (rng.normal(size=(30, 8)) + 1.5).astype(np.float32)
    target = (rng.normal(size=(25, 8)) + 1.5).astype(np.float32)
    src, tgt, cos, margin = mine_margin(source, target, k=25, retrieval="forward", index_kind="exact")
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    full = margin_matrix(unit(source) @ unit(target).T, 25)  # every target is a neighbour when k = 25
    assert sorted(src.tolist()) == list(range(30))
    np.testing.assert_array_equal(tgt[np.argsort(src)], full.argmax(axis=1))
    np.testing.assert_allclose(margin[np.argsort(src)], full.max(axis=1), rtol=1e-5)
    assert np.all(np.diff(margin) <= 0)  # best first


def test_mine_margin_finds_translations_in_both_directions():
    rng = np.random.default_rng(2)
    source = rng.normal(size=(200, 16)).astype(np.float32)
    target = source + 0.1 * rng.normal(size=source.shape).astype(np.float32)
    for retrieval in ("forward", "backward", "max", "intersect"):
        src, tgt, _, _ = mine_margin(source, target, k=4, retrieval=retrieval)
        assert len(src) == 200, retrieval
        assert np.all(src == tgt), retrieval


def test_threshold_finds_near_duplicates_once():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(100, 16)).astype(np.float32)
    vectors = np.concatenate([base, base[:10] + 0.01 * rng.normal(size=(10, 16)).astype(np.float32)])
    src, tgt, cos = mine_threshold(vectors, None, threshold=0.99, k=5)
    assert sorted(zip(src.tolist(), tgt.tolist(), strict=True)) == [(i, 100 + i) for i in range(10)]
    assert np.all(cos >= 0.99)


def test_approximate_index_with_every_list_probed_equals_exact():
    rng = np.random.default_rng(4)
    base = rng.normal(size=(2000, 16)).astype(np.float32)
    queries = rng.normal(size=(50, 16)).astype(np.float32)
    exact = search(build_index(base, "exact"), queries, 3)
    approx_index = build_index(base, "approx", nprobe=10_000)
    assert isinstance(approx_index, faiss.IndexIVFFlat)
    approx = search(approx_index, queries, 3)
    np.testing.assert_array_equal(approx[1], exact[1])


def test_psp_mine_writes_pairs_with_header(tmp_path, capsys):
    rng = np.random.default_rng(5)
    source = rng.normal(size=(40, 8)).astype(np.float32)
    np.save(tmp_path / "de.npy", source)
    np.save(tmp_path / "en.npy", source[::-1] + 0.01 * rng.normal(size=source.shape).astype(np.float32))
    out = tmp_path / "pairs.tsv"
    assert main(["mine", str(tmp_path / "de.npy"), "--target", str(tmp_path / "en.npy"), "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "source_row\ttarget_row\tcosine\tmargin" and len(lines) == 41
    pairs = {tuple(map(int, line.split("\t")[:2])) for line in lines[1:]}
    assert pairs == {(i, 39 - i) for i in range(40)}
    parquet = tmp_path / "dups.parquet"
    assert (
        main(["mine", str(tmp_path / "de.npy"), "--mode", "threshold", "--threshold", "0.999", "-o", str(parquet)]) == 0
    )
    import pyarrow.parquet as pq

    assert pq.read_table(parquet).column_names == ["source_row", "target_row", "cosine"]
    np.save(tmp_path / "other.npy", np.ones((3, 5), dtype=np.float32))
    assert main(["mine", str(tmp_path / "de.npy"), "--target", str(tmp_path / "other.npy"), "-o", str(out)]) == 2
    assert "8-d embeddings" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == 41  # the failed run left the earlier output alone


class _SeededEncoder:
    """A deterministic vector per sentence (from its hash), so Tatoeba errors can be recomputed here."""

    def encode(self, sentences, batch_size=32, show_progress_bar=False):
        import zlib

        rows = [np.random.default_rng(zlib.crc32(s.encode())).normal(size=8) for s in sentences]
        return np.array(rows, dtype=np.float32).reshape(len(sentences), 8)


def test_tatoeba_reports_margin_beside_cosine():
    from psp_hf.data_folder import data_dir
    from psp_hf.evaluation import data as eval_data
    from psp_hf.evaluation.tasks import evaluate_model

    folder = data_dir()
    if not (folder / "tatoeba" / "v1").is_dir():
        pytest.skip(f"Tatoeba data not present in {folder} (set PSP_DATA)")
    encoder = _SeededEncoder()
    results = evaluate_model(encoder, ["tatoeba"], folder, tatoeba_languages=["de"], tatoeba_margin_k=4)["results"]
    bitext = eval_data.read_tatoeba(folder, "de")
    xx_to_en, en_to_xx = margin_retrieval_errors(encoder.encode(bitext.other), encoder.encode(bitext.english), 4)
    scores = results["tatoeba"]["de"]
    assert scores["error_rate_margin"] == pytest.approx(50 * (xx_to_en + en_to_xx))
    assert scores["error_rate"] > 90 and scores["margin_k"] == 4
    assert results["tatoeba"]["error_rate_margin_mean"] == scores["error_rate_margin"]
    plain = evaluate_model(encoder, ["tatoeba"], folder, tatoeba_languages=["de"])["results"]["tatoeba"]["de"]
    assert "error_rate_margin" not in plain and plain["error_rate"] == scores["error_rate"]
