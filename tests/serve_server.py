"""A `psp serve` app run by uvicorn in a background thread on 127.0.0.1, on a free port, for the serve tests.

tests/ holds this helper (as it holds hub_server/); it is not a package.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

CORPUS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs run across the green field.",
    "The children are playing football in the park.",
    "Stocks fell sharply on Monday after the announcement.",
    "She reads a book about ancient history.",
    "A cat sleeps on the warm windowsill.",
    "Der Hund läuft über die Straße.",
]


def tiny_tokenizer(folder: Path):
    """The serve tests' tokenizer: 120 pieces trained on `CORPUS` (into `folder`/tok)."""
    from psp_hf.tokenization.pieces import train_tokenizer

    return train_tokenizer(CORPUS * 20, vocab_size=120, output_dir=folder / "tok")


class ServerThread:
    """`with ServerThread(app) as server:` serves `app` at `server.url` until the block ends."""

    def __init__(self, app) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
