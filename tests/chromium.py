"""Debian's headless Chromium driven over the DevTools protocol, for the page test of `psp serve`.

`make chromium` unpacks the browser into .cache/chromium/root (scripts/fetch_chromium.sh); PSP_CHROMIUM_ROOT points
elsewhere. tests/ holds this helper (as it holds hub_server/); it is not a package.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(os.environ.get("PSP_CHROMIUM_ROOT", Path(__file__).resolve().parents[1] / ".cache" / "chromium" / "root"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1000,760",
]


def binary() -> Path:
    """The unpacked chromium executable; FileNotFoundError says how to get it."""
    path = ROOT / "usr" / "lib" / "chromium" / "chromium"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no Chromium; run `make chromium` (Debian's package, unpacked locally)")
    return path


def library_path() -> str:
    """Every folder of the unpacked tree that holds shared libraries, for LD_LIBRARY_PATH."""
    folders = sorted({str(p.parent) for p in ROOT.rglob("*.so*") if p.is_file()})
    return ":".join([*folders, os.environ.get("LD_LIBRARY_PATH", "")])


class Page:
    """One tab: `send` a DevTools command and get its result; events are collected in `events`."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def send(self, method: str, **params) -> dict:
        command_id = next(self.ids)
        self.ws.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == command_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def navigate(self, url: str, timeout: float = 30) -> None:
        self.send("Page.enable")
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load in {timeout} s")
            time.sleep(0.05)

    def type(self, selector: str, text: str) -> None:
        """Focus the element and type `text` into it as keyboard input (input events fire as for a person)."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        for character in text:
            self.send("Input.insertText", text=character)

    def wait_for(self, expression: str, timeout: float = 30):
        """Poll `expression` until it is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} still falsy after {timeout} s")
            time.sleep(0.05)
        return value

    def screenshot(self, path: str | os.PathLike) -> None:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.ws.close()


class Chromium:
    """`with Chromium() as browser: page = browser.new_page()` — a fresh profile, removed at the end."""

    def __enter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="psp-chromium-")
        env = dict(os.environ, LD_LIBRARY_PATH=library_path())
        command = [str(binary()), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "about:blank"]
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not active.is_file() or not active.read_text().strip():
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited: {self.process.stderr.read().decode(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not open its DevTools port in 60 s")
            time.sleep(0.05)
        self.port = int(active.read_text().split()[0])
        return self

    def new_page(self) -> Page:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            return Page(json.load(response)["webSocketDebuggerUrl"])

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)
