"""The tests' Hub server, exercised through the real client libraries only (no request is hand-made
except where the HTTP detail itself is the point: ranges)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hub_server import LFS_SIZE_THRESHOLD, HubServer
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, hf_hub_url, snapshot_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import get_session


def _folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    """A folder with a small text file, a .safetensors file (LFS by pattern) and a >10 MB text file
    (LFS by size)."""
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("a small regular file\n")
    (folder / "weights.safetensors").write_bytes(bytes(range(256)) * 40)
    (folder / "sub" / "big.txt").write_bytes(b"0123456789abcdef" * (LFS_SIZE_THRESHOLD // 16 + 1000))
    return folder


def test_upload_folder_then_download_gives_identical_bytes(
    hub_server: HubServer, hub_repo_id: str, model_folder: Path
) -> None:
    api = HfApi()
    assert os.environ["HF_ENDPOINT"] == hub_server.url == api.endpoint
    assert api.whoami()["name"] == hub_server.user
    url = api.create_repo(hub_repo_id)
    assert url.repo_id == hub_repo_id and api.repo_exists(hub_repo_id)

    commit = api.upload_folder(folder_path=model_folder, repo_id=hub_repo_id, commit_message="add files")

    # Each file comes back byte for byte, regular or LFS (LFS downloads go through the CDN redirect).
    for rel in ("notes.txt", "weights.safetensors", "sub/big.txt"):
        local = hf_hub_download(hub_repo_id, rel)
        assert Path(local).read_bytes() == (model_folder / rel).read_bytes(), rel
    snapshot = Path(snapshot_download(hub_repo_id))
    assert {k: v for k, v in _folder_digest(snapshot).items() if k != ".gitattributes"} == _folder_digest(model_folder)
    assert snapshot.name == commit.oid

    info = api.model_info(hub_repo_id, files_metadata=True)
    assert info.sha == commit.oid and len(info.sha) == 40
    siblings = {s.rfilename: s for s in info.siblings}
    assert set(siblings) == {".gitattributes", "notes.txt", "weights.safetensors", "sub/big.txt"}
    assert (
        siblings["notes.txt"].lfs is None and siblings["notes.txt"].size == (model_folder / "notes.txt").stat().st_size
    )
    for rel in ("weights.safetensors", "sub/big.txt"):
        data = (model_folder / rel).read_bytes()
        assert siblings[rel].lfs is not None and siblings[rel].lfs.sha256 == hashlib.sha256(data).hexdigest()
    assert sorted(api.list_repo_files(hub_repo_id)) == sorted(siblings)
    assert hub_server.repo_files(hub_repo_id)["sub/big.txt"] == (model_folder / "sub/big.txt").read_bytes()

    # Missing things raise the clients' own errors.
    assert api.file_exists(hub_repo_id, "notes.txt") and not api.file_exists(hub_repo_id, "nope.txt")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(hub_repo_id, "nope.txt")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(hub_server.unique_repo_id("missing"), "notes.txt")
    assert not api.repo_exists(hub_server.unique_repo_id("missing"))

    # Creating it again conflicts, unless exist_ok.
    with pytest.raises(HfHubHTTPError) as conflict:
        api.create_repo(hub_repo_id)
    assert conflict.value.response.status_code == 409
    assert api.create_repo(hub_repo_id, exist_ok=True).repo_id == hub_repo_id


def test_revisions_branches_tags_and_pull_requests(hub_server: HubServer, hub_repo_id: str) -> None:
    api = HfApi()
    api.create_repo(hub_repo_id)
    first = api.upload_file(path_or_fileobj=b"v1", path_in_repo="f.txt", repo_id=hub_repo_id)
    api.create_branch(hub_repo_id, branch="dev")
    on_dev = api.upload_file(path_or_fileobj=b"v2 on dev", path_in_repo="f.txt", repo_id=hub_repo_id, revision="dev")
    api.create_tag(hub_repo_id, tag="v1.0", revision=first.oid)

    assert Path(hf_hub_download(hub_repo_id, "f.txt")).read_bytes() == b"v1"
    assert Path(hf_hub_download(hub_repo_id, "f.txt", revision="dev")).read_bytes() == b"v2 on dev"
    assert Path(hf_hub_download(hub_repo_id, "f.txt", revision="v1.0")).read_bytes() == b"v1"
    assert Path(hf_hub_download(hub_repo_id, "f.txt", revision=first.oid[:10])).read_bytes() == b"v1"
    assert api.model_info(hub_repo_id, revision="dev").sha == on_dev.oid
    refs = api.list_repo_refs(hub_repo_id)
    assert {b.name: b.target_commit for b in refs.branches} == {"main": first.oid, "dev": on_dev.oid}
    assert [t.name for t in refs.tags] == ["v1.0"]
    titles = [c.title for c in api.list_repo_commits(hub_repo_id, revision="dev")]
    assert titles[-1] == "initial commit" and len(titles) == 3

    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(hub_repo_id, "f.txt", revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        api.upload_file(path_or_fileobj=b"x", path_in_repo="g.txt", repo_id=hub_repo_id, revision="no-such-branch")

    pr = api.upload_file(path_or_fileobj=b"proposal", path_in_repo="f.txt", repo_id=hub_repo_id, create_pr=True)
    assert pr.pr_num == 1
    assert Path(hf_hub_download(hub_repo_id, "f.txt", revision="refs/pr/1")).read_bytes() == b"proposal"
    assert api.model_info(hub_repo_id).sha == first.oid  # a PR leaves main alone


def test_tree_listing_paginates_and_paths_info(
    hub_server: HubServer, hub_repo_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "many"
    for i in range(5):
        (folder / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (folder / f"d{i % 2}" / f"f{i}.txt").write_text(str(i))
    api = HfApi()
    api.create_repo(hub_repo_id)
    api.upload_folder(folder_path=folder, repo_id=hub_repo_id)

    monkeypatch.setattr(hub_server, "tree_page_size", 2)
    hub_server.requests.clear()
    entries = list(api.list_repo_tree(hub_repo_id, recursive=True))
    pages = [r for r in hub_server.requests if "/tree/" in r[1]]
    assert len(pages) == 4  # 2 folders + 6 files, 2 per page
    assert sorted(e.path for e in entries) == sorted(
        ["d0", "d1", ".gitattributes"] + [f"d{i % 2}/f{i}.txt" for i in range(5)]
    )
    top = {e.path: type(e).__name__ for e in api.list_repo_tree(hub_repo_id)}
    assert top == {"d0": "RepoFolder", "d1": "RepoFolder", ".gitattributes": "RepoFile"}
    assert [e.path for e in api.list_repo_tree(hub_repo_id, path_in_repo="d1")] == ["d1/f1.txt", "d1/f3.txt"]

    info = api.get_paths_info(hub_repo_id, ["d0", "d0/f2.txt", "absent.txt"], expand=True)
    assert [(type(e).__name__, e.path) for e in info] == [("RepoFolder", "d0"), ("RepoFile", "d0/f2.txt")]
    assert info[1].size == 1 and info[1].last_commit is not None


def test_range_requests_on_regular_and_lfs_files(hub_server: HubServer, hub_repo_id: str, model_folder: Path) -> None:
    api = HfApi()
    api.create_repo(hub_repo_id)
    api.upload_folder(folder_path=model_folder, repo_id=hub_repo_id)
    session = get_session()
    for rel in ("notes.txt", "sub/big.txt"):
        data = (model_folder / rel).read_bytes()
        url = hf_hub_url(hub_repo_id, rel)
        response = session.get(url, headers={"Range": "bytes=3-9"}, follow_redirects=True)
        assert response.status_code == 206 and response.content == data[3:10]
        assert response.headers["Content-Range"] == f"bytes 3-9/{len(data)}"
        tail = session.get(url, headers={"Range": "bytes=-4"}, follow_redirects=True)
        assert tail.content == data[-4:]
        beyond = session.get(url, headers={"Range": f"bytes={len(data)}-"}, follow_redirects=True)
        assert beyond.status_code == 416

    # HfFileSystem (what datasets streams with) reads ranges through the same endpoints.
    data = (model_folder / "sub/big.txt").read_bytes()
    with HfFileSystem().open(f"{hub_repo_id}/sub/big.txt", "rb", block_size=4096) as handle:
        handle.seek(LFS_SIZE_THRESHOLD - 5)
        assert handle.read(11) == data[LFS_SIZE_THRESHOLD - 5 : LFS_SIZE_THRESHOLD + 6]


def test_dataset_repo_streams_parquet_rows(hub_server: HubServer, tmp_path: Path) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"sentence": f"sentence {i}", "paraphrase": f"a paraphrase of {i}", "score": i / 10} for i in range(40)]
    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "train-00000-of-00001.parquet")
    repo_id = hub_server.unique_repo_id("dataset")
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset")
    api.upload_folder(folder_path=folder, repo_id=repo_id, repo_type="dataset")

    siblings = {s.rfilename: s for s in api.dataset_info(repo_id, files_metadata=True).siblings}
    assert siblings["data/train-00000-of-00001.parquet"].lfs is not None
    streamed = datasets.load_dataset(repo_id, streaming=True)
    assert list(streamed["train"]) == rows


def test_transformers_push_to_hub_then_fresh_process_loads_same_weights(
    hub_server: HubServer, hub_repo_id: str, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=16,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    model = BertModel(config)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")
    model.push_to_hub(hub_repo_id)
    tokenizer.push_to_hub(hub_repo_id)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(hub_server.repo_files(hub_repo_id))

    out = tmp_path / "loaded.safetensors"
    script = textwrap.dedent(
        f"""
        from safetensors.torch import save_file
        from transformers import AutoModel, AutoTokenizer
        model = AutoModel.from_pretrained({hub_repo_id!r})
        tokenizer = AutoTokenizer.from_pretrained({hub_repo_id!r})
        assert tokenizer("hello world nope")["input_ids"] == [5, 6, 1], tokenizer("hello world nope")
        save_file({{k: v.contiguous() for k, v in model.state_dict().items()}}, {str(out)!r})
        """
    )
    # The child inherits HF_ENDPOINT/HF_HOME/HF_TOKEN from os.environ, set by conftest.py.
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded, expected = load_file(out), model.state_dict()
    assert set(loaded) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(loaded[name], tensor), name


def test_refused_push_raises_and_leaves_local_folder_and_repo_intact(
    hub_server: HubServer, hub_repo_id: str, model_folder: Path
) -> None:
    api = HfApi()
    api.create_repo(hub_repo_id)
    before_sha = api.model_info(hub_repo_id).sha
    before_local = _folder_digest(model_folder)

    with hub_server.failing() as refusal, pytest.raises(HfHubHTTPError) as error:
        api.upload_folder(folder_path=model_folder, repo_id=hub_repo_id)
    assert error.value.response.status_code == 403 and refusal.hits >= 1

    # Refusing only the final commit: the LFS uploads went through, yet nothing was committed.
    with hub_server.failing(500, methods="POST", path_contains="/commit/") as refusal, pytest.raises(HfHubHTTPError):
        api.upload_folder(folder_path=model_folder, repo_id=hub_repo_id)
    assert refusal.hits == 1

    assert _folder_digest(model_folder) == before_local
    assert api.model_info(hub_repo_id).sha == before_sha
    assert set(hub_server.repo_files(hub_repo_id)) == {".gitattributes"}
    # Once the server accepts again, the same push succeeds.
    assert api.upload_folder(folder_path=model_folder, repo_id=hub_repo_id).oid != before_sha


def test_standalone_server_reset_and_stop(tmp_path: Path) -> None:
    # A second, private server: reset() here cannot wipe repos other tests keep on the session one.
    server = HubServer().start()
    try:
        api = HfApi(endpoint=server.url)
        repo_id = server.unique_repo_id("standalone")
        api.create_repo(repo_id, repo_type="dataset")
        api.upload_file(path_or_fileobj=b"\0binary", path_in_repo="x.bin", repo_id=repo_id, repo_type="dataset")
        assert server.repo_files(repo_id, "dataset")["x.bin"] == b"\0binary"
        assert any(server.state.blob_dir.iterdir())
        server.reset()
        assert not server.repo_exists(repo_id, "dataset") and not any(server.state.blob_dir.iterdir())
        assert not api.repo_exists(repo_id, repo_type="dataset")
    finally:
        server.stop()
    assert not server.root.exists()  # the storage it created itself is gone
