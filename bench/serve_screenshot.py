"""A screenshot of `psp serve`'s search page in Debian's headless Chromium (`make chromium` first).

    python bench/serve_screenshot.py MODEL SENTENCES.txt "a query" -o serve_screenshot.png

Serves MODEL with --index SENTENCES.txt on a free loopback port, types the query into the page, waits for the
results and saves the PNG. A script for the docs, not a test (tests/serve/test_serve_browser.py reads the DOM instead).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from chromium import Chromium  # noqa: E402 - the test helpers drive the browser
from serve_server import ServerThread  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("sentences", help="text file, one sentence a line (the index)")
    parser.add_argument("query")
    parser.add_argument("-o", "--output", default="serve_screenshot.png")
    args = parser.parse_args()

    from psp_hf import load
    from psp_hf.cli.serve import parse_model_spec
    from psp_hf.serve.app import ServeConfig, create_app
    from psp_hf.serve.index import load_index

    name, where = parse_model_spec(args.model)
    encoder = load(where)
    index = load_index(args.sentences, encoder, num_threads=2)
    with ServerThread(create_app({name: encoder}, ServeConfig(), index)) as server, Chromium() as browser:
        page = browser.new_page()
        page.navigate(f"{server.url}/")
        page.type("#query", args.query)
        page.wait_for(f"document.getElementById('results').dataset.query === {json.dumps(args.query)}")
        page.screenshot(args.output)
        page.close()
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
