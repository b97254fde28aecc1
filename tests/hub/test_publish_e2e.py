"""End to end on real data: train a tiny de-en model, publish it to the tests' Hub server as `<org>/p-sp-de`,
and load it in a fresh process with transformers, sentence-transformers (psp blocked) and psp.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from psp_hf import PSPEncoder
from psp_hf.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("PSP_DATA", REPO_ROOT.parent / "shared" / "data"))
BITEXT = DATA / "bitext" / "multi30k" / "de-en"

# Loads the published repo three ways and saves each embedding matrix. psp_hf is blocked while transformers
# and sentence-transformers load it: neither may need psp installed.
FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import torch

    repo_id, out = sys.argv[1], sys.argv[2]
    sentences = json.load(open(f"{out}/sentences.json", encoding="utf-8"))
    sys.modules["psp_hf"] = None  # any `import psp_hf` now fails

    from transformers import AutoModel, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(repo_id, trust_remote_code=True)
    model = AutoModel.from_pretrained(repo_id, trust_remote_code=True)
    with torch.no_grad():
        batch = tokenizer(sentences, padding=True, return_tensors="pt")
        np.save(f"{out}/automodel.npy", model(**batch).sentence_embedding.numpy())

    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(repo_id, device="cpu")
    np.save(f"{out}/st.npy", st.encode(sentences, batch_size=16, convert_to_numpy=True))

    del sys.modules["psp_hf"]
    import psp_hf
    np.save(f"{out}/psp.npy", psp_hf.load(repo_id).encode(sentences))
    """
)


def _read_bitext(path: Path, limit: int) -> list[tuple[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        next(handle)  # header: de, en
        return [tuple(line.rstrip("\n").split("\t")) for line in itertools.islice(handle, limit)]


@pytest.fixture(scope="module")
def bitext_dir() -> Path:
    if not (BITEXT / "train.tsv.gz").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"real data missing in CI: {BITEXT}/train.tsv.gz (set PSP_DATA)")
        pytest.skip(f"real data not found at {BITEXT} (set PSP_DATA)")
    return BITEXT


@pytest.mark.slow
def test_train_push_and_load_everywhere(bitext_dir, hub_server, tmp_path):
    from huggingface_hub import ModelCard

    from psp_hf.training.arguments.training_arguments import TrainingArguments
    from psp_hf.training.loop.trainer import Trainer

    repo_id = f"{hub_server.user}/p-sp-de"
    if hub_server.repo_exists(repo_id):
        repo_id = hub_server.unique_repo_id("p-sp-de")
    output = tmp_path / "p-sp-de"
    args = TrainingArguments(
        data=[str(bitext_dir / "train.tsv.gz")], output_dir=str(output), lang="de", vocab_size=2000,
        tokenizer_sentences=4000, dim=32, batch_size=32, megabatch_size=4, megabatch_anneal=0, max_steps=40,
        dev="stsb", eval_every=0, save_every=0, shuffle_buffer=2000, threads=1, quiet=True, push_to_hub=repo_id,
    )  # fmt: skip
    trainer = Trainer(args)
    trainer.train()
    # `--push-to-hub` from training: the model went up, the run's checkpoints and logs did not.
    assert trainer.push_status == 0
    pushed = hub_server.repo_files(repo_id)
    assert {"config.json", "model.safetensors", "tokenizer.json", "modeling_psp.py"} <= set(pushed)
    assert not any(name.startswith("training/") for name in pushed)

    # The card's numbers come from the run itself: `psp eval` of the trained model and of an untrained table
    # over the same vocabulary (the floor), and the run's own settings.
    encoder = PSPEncoder.from_pretrained(output)
    untrained = tmp_path / "untrained"
    PSPEncoder.from_tokenizer(encoder.tokenizer, hidden_size=encoder.dim, seed=args.seed).save_pretrained(untrained)
    reports = {}
    for name, folder in (("trained", output), ("untrained", untrained)):
        reports[name] = tmp_path / f"{name}.json"
        eval_argv = ["eval", "-m", str(folder), "--tasks", "stsb", "tatoeba", "--tatoeba-langs", "de",
                     "--data-dir", str(DATA), "-o", str(reports[name]), "-q"]  # fmt: skip
        assert main(eval_argv) == 0
    end = next(e for e in map(json.loads, (output / "training" / "metrics.jsonl").read_text().splitlines())
               if e["event"] == "end")  # fmt: skip
    training_info = tmp_path / "training_info.json"
    info = {**json.loads((output / "training" / "args.json").read_text()), "steps": end["step"],
            "pairs_seen": end["pairs_seen"]}  # fmt: skip
    training_info.write_text(json.dumps(info))
    # Whatever the trained folder lacks (sentence-transformers layout, card) `psp push` adds on the way up.
    argv = ["push", str(output), repo_id, "--language", "de", "--eval-results", str(reports["trained"]),
            "--baseline-results", str(reports["untrained"]), "--training-info", str(training_info), "-q"]  # fmt: skip
    assert main(argv) == 0

    test_pairs = _read_bitext(bitext_dir / "test_2016_flickr.tsv.gz", 40)
    sentences = [de for de, _ in test_pairs] + [en for _, en in test_pairs] + ["", "ein ☃ mann", "✈✈", "<unk>"]
    before = encoder.encode(sentences)
    (tmp_path / "sentences.json").write_text(json.dumps(sentences, ensure_ascii=False), encoding="utf-8")

    # A fresh process: nothing cached in memory, everything comes from the server (same HF_ENDPOINT via env).
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, repo_id, str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HOME": str(tmp_path / "fresh_hf")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("automodel", "st", "psp"):
        after = np.load(tmp_path / f"{name}.npy")
        assert after.shape == before.shape, name
        # Documented: sentence-transformers gives a sentence of only unknown characters the boundary piece.
        rows = [i for i, sentence in enumerate(sentences) if name != "st" or sentence != "✈✈"]
        np.testing.assert_allclose(after[rows], before[rows], rtol=0, atol=1e-6, err_msg=name)

    card = ModelCard.load(repo_id)
    assert set(card.data.language) == {"de", "en"} and card.data.pipeline_tag == "sentence-similarity"
    assert repo_id in card.text and "<org>" not in card.text
    # The model-index holds exactly what psp eval measured for this folder.
    measured = json.loads(reports["trained"].read_text())["models"][0]["card_results"]
    found = {(r.dataset_type, r.dataset_config, r.dataset_split, r.metric_type): r.metric_value
             for r in card.data.eval_results}  # fmt: skip
    assert found[("mteb/stsbenchmark-sts", None, "test", "cos_sim_pearson")] == measured["stsb"]["test"]["pearson"]
    assert (
        found[("mteb/tatoeba-bitext-mining", "deu-eng", "test", "error_rate")]
        == measured["tatoeba"]["de"]["error_rate"]
    )
    floor = json.loads(reports["untrained"].read_text())["models"][0]["card_results"]["stsb"]["test"]["pearson"]
    assert f"| {measured['stsb']['test']['pearson']:.4g} | {floor:.4g} |" in card.text
