"""`psp serve`: options, loading the models and the index, binding the socket, running uvicorn.

    psp serve MODEL [-m MODEL ...] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--index FILE_OR_FOLDER]

A model is a folder or a Hub repo id, served under its last path part (`NAME=MODEL` names it). Start-up problems
(a missing model, a port in use, the extra not installed) end in one `psp: error:` line.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
from pathlib import Path

from ..errors import PSPInputError
from . import flags

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp serve`."""
    parser.add_argument("model", help="model folder or Hub repo id (NAME=MODEL serves it as NAME)")
    parser.add_argument(
        "-m",
        "--model",
        dest="more_models",
        action="append",
        default=[],
        metavar="MODEL",
        help="another model to serve (repeatable); requests choose by their 'model' field",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0 picks a free one)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("PSP_API_KEY"),
        help="require 'Authorization: Bearer KEY' (default: $PSP_API_KEY; none: open)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages from ORIGIN call the server (repeatable; default: no CORS)",
    )
    parser.add_argument("--max-inputs", type=int, default=2048, help="inputs per request (default: 2048)")
    parser.add_argument("--max-chars", type=int, default=8192, help="characters per input (default: 8192)")
    flags.add_threads(parser, "encode threads")
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=2.0,
        help="ms an encode waits for other clients' requests to join it (default: 2)",
    )
    parser.add_argument(
        "--index",
        default=None,
        metavar="FILE_OR_FOLDER",
        help="serve a search page (GET /) over a text file (one sentence a line, embedded at "
        "start-up) or a psp embed-dataset folder",
    )
    parser.add_argument("--access-log", action="store_true", help="log every request")


def parse_model_spec(spec: str) -> tuple[str, str]:
    """`(served name, folder or repo id)` of `NAME=MODEL` or `MODEL` (named after its last path part)."""
    name, equals, path = spec.partition("=")
    if equals and name and "/" not in name and not Path(spec).exists():
        return name, path
    return Path(spec.rstrip("/")).name or spec, spec


def _load_models(specs: list[str]) -> dict:
    from ..encoder import load

    models = {}
    for spec in specs:
        name, where = parse_model_spec(spec)
        if name in models:
            raise PSPInputError(f"two models are served as {name!r}; name them: NAME={where}")
        if not Path(where).exists() and where.startswith((".", "/", "~")):
            raise PSPInputError(f"{where}: no such model folder")
        try:
            models[name] = load(where)
        except PSPInputError:
            raise
        except Exception as error:  # Hub and file errors of many kinds: one line naming the model
            raise PSPInputError(f"{where}: cannot load the model ({type(error).__name__}: {error})") from None
    return models


def _bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise PSPInputError(f"--port must be between 0 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise PSPInputError(f"--host {host}: {error.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise PSPInputError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(2048)
    return sock


def run(args: argparse.Namespace) -> int:
    """Check the options, load everything, then serve until SIGTERM or Ctrl-C (exit 0)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as error:
        raise PSPInputError(
            f"psp serve needs FastAPI and uvicorn ({error.name} is missing): pip install 'psp-hf[serve]'"
        ) from None
    from ..serve.app import ServeConfig, create_app
    from ..serve.requests import Limits

    counts = {"--max-inputs": args.max_inputs, "--max-chars": args.max_chars, "--threads": args.threads}
    for option, value in counts.items():
        if value < 1:
            raise PSPInputError(f"{option} must be at least 1, got {value}")
    if args.batch_wait_ms < 0:
        raise PSPInputError(f"--batch-wait-ms must be 0 or more, got {args.batch_wait_ms}")
    if args.api_key is not None and not args.api_key.strip():
        raise PSPInputError("--api-key is empty")
    sock = _bind(args.host, args.port)  # first: a port in use is found before the models load
    models = _load_models([args.model, *args.more_models])
    index = None
    if args.index is not None:
        from ..serve.index import load_index

        index = load_index(args.index, next(iter(models.values())), num_threads=args.threads)
    config = ServeConfig(
        limits=Limits(max_inputs=args.max_inputs, max_chars=args.max_chars),
        api_key=args.api_key,
        cors_origins=args.cors_origin,
        threads=args.threads,
        batch_wait_ms=args.batch_wait_ms,
    )
    app = create_app(models, config, index)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    extra = f"; search page over {len(index)} sentences at /" if index is not None else ""
    logger.info(f"psp serve: {', '.join(models)} on http://{shown}:{port} (POST /v1/embeddings, /embed){extra}")
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="info" if args.access_log else "warning",
            access_log=args.access_log,
            timeout_graceful_shutdown=10,
            server_header=False,
        )
    )
    # uvicorn finishes the requests in progress on SIGTERM/SIGINT, then re-raises the signal to the handler it found:
    # a no-op one here, so that a clean shutdown exits 0 instead of dying by the signal.
    previous = {signum: signal.signal(signum, lambda *_: None) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sock.close()
    logger.info("psp serve: stopped")
    return 0
