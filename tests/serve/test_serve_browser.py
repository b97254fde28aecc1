"""The search page of `psp serve --index` in a real browser: Debian's headless Chromium loads /, a query is typed,
and the result list is read from the DOM. Chromium comes from `make chromium` (a dependency of `make test`); without
it this test fails rather than skips."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from psp_hf import PSPEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from chromium import Chromium  # noqa: E402 - tests/ holds the helpers; it is not a package
from serve_server import CORPUS, ServerThread, tiny_tokenizer  # noqa: E402

from psp_hf.serve.app import ServeConfig, create_app  # noqa: E402
from psp_hf.serve.index import load_index  # noqa: E402

# Debian's Chromium, unpacked by `make chromium` (apt-get download): a machine without apt-get leaves these out.
pytestmark = pytest.mark.debian

READ_RESULTS = """Array.from(document.querySelectorAll('#results li')).map((li) => ({
    text: li.querySelector('.text').firstChild.textContent,
    cosine: Number(li.querySelector('.cosine').textContent),
}))"""


@pytest.fixture(scope="module")
def search_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve-page")
    tokenizer = tiny_tokenizer(folder)
    encoder = PSPEncoder.from_tokenizer(tokenizer, hidden_size=16, seed=3)
    (folder / "sentences.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    index = load_index(folder / "sentences.txt", encoder)
    with ServerThread(create_app({"tiny": encoder}, ServeConfig(), index)) as server:
        yield server, encoder


def test_page_shows_the_nearest_sentences(search_server):
    server, encoder = search_server
    query = "A cat sleeps on the warm windowsill."
    with Chromium() as browser:
        page = browser.new_page()
        try:
            page.navigate(f"{server.url}/")
            assert "sentences.txt" in page.evaluate("document.querySelector('.about').textContent")
            page.type("#query", query)
            # Each pause in typing may search; wait for the list of the whole query.
            page.wait_for(f"document.getElementById('results').dataset.query === {json.dumps(query)}")
            results = page.evaluate(READ_RESULTS)
            status = page.evaluate("document.getElementById('status').textContent")
        finally:
            page.close()
    assert len(results) == len(CORPUS) and "results in" in status
    assert results[0] == {"text": query, "cosine": 1.0}
    unit = encoder.encode([query, *(hit["text"] for hit in results)], normalize_embeddings=True)
    for hit, row in zip(results, unit[1:], strict=True):
        assert hit["cosine"] == pytest.approx(float(unit[0] @ row), abs=6e-4)  # shown with 3 decimals
    assert [hit["cosine"] for hit in results] == sorted((hit["cosine"] for hit in results), reverse=True)
