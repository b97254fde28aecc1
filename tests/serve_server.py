"""A `psp serve` app run by uvicorn in a background thread on 127.0.0.1, on a free port, for the serve tests.

tests/ holds this helper (as it holds hub_server/); it is not a package.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psp_hf import PSPEncoder

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

    def __init__(self, app, config=None) -> None:
        """`config` (a ServeConfig): run uvicorn as `psp serve` sets it up (header deadline, connection bound)."""
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        if config is None:
            uvicorn_config = uvicorn.Config(app, log_level="warning", access_log=False)
        else:
            from psp_hf.serve.server import uvicorn_config as psp_config

            uvicorn_config = psp_config(app, config, log_level="warning", access_log=False)
        self.server = uvicorn.Server(uvicorn_config)
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


# More sentences than the batcher encodes on the event loop: these encodes run on the thread pool, where the test's
# gate can hold them without stopping the server.
HELD = [f"held sentence number {i}" for i in range(20)]


class GatedEncoder:
    """An encoder whose encodes of `HELD`'s size or more wait for `gate` (set: they run at once); everything else is
    the real one's."""

    def __init__(self, encoder: PSPEncoder) -> None:
        self.encoder = encoder
        self.gate = threading.Event()
        self.entered = 0

    def embed_ids(self, flat, offsets):
        if len(offsets) >= len(HELD):  # encodes of fewer sentences (one request's few) pass at once
            self.entered += 1
            self.gate.wait(timeout=60)
        return self.encoder.embed_ids(flat, offsets)

    def __getattr__(self, name):
        return getattr(self.encoder, name)


def wait_for(condition, what: str) -> None:
    """Wait up to 30 s for `condition()`; fail naming `what`."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
