"""`psp serve`: options, loading the models and the index, binding the socket, running uvicorn.

    psp serve MODEL [-m MODEL ...] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--index FILE_OR_FOLDER]

A model is a folder or a Hub repo id, served under its last path part (`NAME=MODEL` names it). Start-up problems
(a missing model, a port in use, the extra not installed) end in one `psp: error:` line.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import PSPInputError
from . import flags

logger = logging.getLogger(__name__)


# Every option has an environment variable (for containers and process managers): PSP_SERVE_ and the option's name
# in capitals (--max-inputs: PSP_SERVE_MAX_INPUTS), the model PSP_SERVE_MODEL and the -m models PSP_SERVE_MORE_MODELS
# (comma-separated). An option on the command line wins over its variable; a repeatable one adds to its list.
ENV_PREFIX = "PSP_SERVE_"
ENVIRONMENT_EPILOG = (
    "Every option can be set by an environment variable instead: PSP_SERVE_ and the option's name in capitals with "
    "underscores (PSP_SERVE_PORT=9000, PSP_SERVE_MAX_INPUTS=64, PSP_SERVE_ACCESS_LOG=1), the model by PSP_SERVE_MODEL "
    "and more models by PSP_SERVE_MORE_MODELS (comma-separated, as are PSP_SERVE_CORS_ORIGIN and "
    "PSP_SERVE_ALLOWED_HOSTS). An option given on the command line wins; a repeatable one adds to the variable's list."
)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclass
class BadVariable:
    """An environment variable whose value does not parse: the default it stands in for, reported by `run`."""

    variable: str
    value: str
    reason: str


def environment_variable(dest: str) -> str:
    """The variable of the option stored in `dest`."""
    return ENV_PREFIX + dest.upper()


def _finite(minimum: float) -> Callable[[str], float]:
    def number(value: str) -> float:
        try:
            parsed = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
        if not math.isfinite(parsed) or parsed < minimum:
            raise argparse.ArgumentTypeError(f"expected a finite number of at least {minimum:g}, got {value}")
        return parsed

    return number


def _boolean(value: str) -> bool:
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(_TRUE)} or {', '.join(v for v in _FALSE if v)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `psp serve`; each one's environment variable sets its default."""
    parser.epilog = ENVIRONMENT_EPILOG
    actions = [
        parser.add_argument(
            "model",
            nargs="?",
            default=None,
            help="model folder or Hub repo id (NAME=MODEL serves it as NAME; default: $PSP_SERVE_MODEL)",
        ),
        parser.add_argument(
            "-m",
            "--model",
            dest="more_models",
            action="append",
            default=[],
            metavar="MODEL",
            help="another model to serve (repeatable); requests choose by their 'model' field",
        ),
        parser.add_argument(
            "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)"
        ),
        parser.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0 picks a free one)"),
        parser.add_argument(
            "--allowed-hosts",
            action="append",
            default=[],
            metavar="HOST",
            help="a name the Host header may give (repeatable; '*': any; default: the bound address, and "
            "localhost for a loopback one; any for 0.0.0.0 or ::)",
        ),
        parser.add_argument(
            "--api-key",
            default=os.environ.get("PSP_API_KEY"),
            help="require 'Authorization: Bearer KEY' (default: $PSP_SERVE_API_KEY or $PSP_API_KEY; none: open)",
        ),
        parser.add_argument(
            "--cors-origin",
            action="append",
            default=[],
            metavar="ORIGIN",
            help="let pages from ORIGIN call the server (repeatable; default: no CORS)",
        ),
        parser.add_argument("--max-inputs", type=int, default=2048, help="inputs per request (default: 2048)"),
        parser.add_argument("--max-chars", type=int, default=8192, help="characters per input (default: 8192)"),
        parser.add_argument(
            "--max-concurrent-requests",
            type=flags.positive_int,
            default=512,
            help="requests answered at once; past it, 429 with Retry-After (default: 512)",
        ),
        parser.add_argument(
            "--request-timeout",
            type=_finite(0),
            default=60.0,
            metavar="SECONDS",
            help="seconds a request may take, reading its body included; past it, 503 (default: 60; 0: none)",
        ),
        parser.add_argument(
            "--header-timeout",
            type=_finite(0),
            default=10.0,
            metavar="SECONDS",
            help="seconds a connection may take to send a request's headers; then it is closed (default: 10; 0: none)",
        ),
        parser.add_argument(
            "--max-connections",
            type=flags.positive_int,
            default=1024,
            help="connections held at once; past it the oldest one still sending headers is closed (default: 1024)",
        ),
        parser.add_argument(
            "--max-body-bytes-in-flight",
            type=flags.positive_int,
            default=None,
            metavar="BYTES",
            help="bytes of request bodies held across all requests; past it, 429 (default: twice the largest body)",
        ),
        parser.add_argument(
            "--max-queued-sentences",
            type=flags.positive_int,
            default=65536,
            help="sentences waiting for an encode, per model; past it, 429 (default: 65536)",
        ),
        flags.add_threads(parser, "encode threads"),
        parser.add_argument(
            "--batch-wait-ms",
            type=_finite(0),
            default=2.0,
            help="ms an encode waits for other clients' requests to join it (default: 2)",
        ),
        parser.add_argument(
            "--max-batch-sentences",
            type=flags.positive_int,
            default=4096,
            help="sentences of merged requests encoded together at most (default: 4096)",
        ),
        parser.add_argument(
            "--index",
            default=None,
            metavar="FILE_OR_FOLDER",
            help="serve a search page (GET /) over a text file (one sentence a line, embedded at "
            "start-up) or a psp embed-dataset folder",
        ),
        parser.add_argument("--access-log", action="store_true", help="log every request"),
    ]
    defaults = {}
    for action in actions:
        variable = environment_variable(action.dest)
        raw = os.environ.get(variable)
        if raw is None:
            continue
        try:
            if action.nargs == 0 and action.const is True:  # a store_true flag
                defaults[action.dest] = _boolean(raw)
            elif isinstance(action.default, list):
                defaults[action.dest] = [item.strip() for item in raw.split(",") if item.strip()]
            else:
                defaults[action.dest] = action.type(raw) if action.type is not None else raw
        except argparse.ArgumentTypeError as error:
            defaults[action.dest] = BadVariable(variable, raw, str(error))
        except ValueError as error:
            reason = str(error) if action.type is None else f"expected {action.type.__name__}"
            defaults[action.dest] = BadVariable(variable, raw, reason)
    parser.set_defaults(**defaults)


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


def _allowed_hosts(given: list[str], bound: str) -> list[str] | None:
    """The Host names to accept: those given, else the bound address (and localhost's names for a loopback one);
    None (any) for a wildcard address, whose names the server cannot know."""
    if given:
        return None if "*" in given else given
    if bound in ("0.0.0.0", "::"):
        return None
    loopback = {"127.0.0.1", "::1", "localhost"}
    return sorted({bound} | loopback) if bound in loopback or bound.startswith("127.") else [bound]


def _connections_allowed(connections: int) -> int:
    """`connections`, or fewer where the open-file limit cannot be raised to hold them besides the files the server
    reads: the soft limit is raised toward the hard one first."""
    try:
        import resource
    except ImportError:  # not on Unix
        return connections
    spare = 64  # the model's files, the listening socket, the logs...
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + spare
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return connections
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    if target >= wanted:
        return connections
    allowed = max(1, target - spare)
    logger.warning(
        "the open-file limit (%d) holds %d connections, not --max-connections %d", target, allowed, connections
    )
    return allowed


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
    from ..serve.server import uvicorn_config

    for value in vars(args).values():
        if isinstance(value, BadVariable):
            raise PSPInputError(f"${value.variable}={value.value!r}: {value.reason}")
    if args.model is None:
        raise PSPInputError(f"give a MODEL (a folder or Hub repo id), or set ${environment_variable('model')}")
    counts = {"--max-inputs": args.max_inputs, "--max-chars": args.max_chars, "--threads": args.threads}
    for option, value in counts.items():
        if value < 1:
            raise PSPInputError(f"{option} must be at least 1, got {value}")
    if args.max_queued_sentences < args.max_inputs:
        raise PSPInputError(
            f"--max-queued-sentences ({args.max_queued_sentences}) must hold one request of --max-inputs "
            f"({args.max_inputs})"
        )
    if args.api_key is not None and not args.api_key.strip():
        raise PSPInputError("--api-key is empty")
    if args.max_body_bytes_in_flight is not None:
        largest = Limits(max_inputs=args.max_inputs, max_chars=args.max_chars).max_body_bytes
        if args.max_body_bytes_in_flight < largest:
            raise PSPInputError(
                f"--max-body-bytes-in-flight ({args.max_body_bytes_in_flight}) must hold one body of the largest "
                f"size that --max-inputs and --max-chars allow ({largest})"
            )
    sock = _bind(args.host, args.port)  # first: a port in use is found before the models load
    models = _load_models([args.model, *args.more_models])
    index = None
    if args.index is not None:
        from ..serve.index import load_index

        index = load_index(args.index, next(iter(models.values())), num_threads=args.threads)
    host, port = sock.getsockname()[:2]
    config = ServeConfig(
        limits=Limits(max_inputs=args.max_inputs, max_chars=args.max_chars),
        api_key=args.api_key,
        cors_origins=args.cors_origin,
        threads=args.threads,
        batch_wait_ms=args.batch_wait_ms,
        max_batch_sentences=args.max_batch_sentences,
        max_concurrent_requests=args.max_concurrent_requests,
        request_timeout=args.request_timeout or None,
        max_queued_sentences=args.max_queued_sentences,
        allowed_hosts=_allowed_hosts(args.allowed_hosts, host),
        header_timeout=args.header_timeout or None,
        max_connections=_connections_allowed(args.max_connections),
        max_body_bytes_in_flight=args.max_body_bytes_in_flight,
    )
    app = create_app(models, config, index)
    shown = f"[{host}]" if ":" in host else host
    extra = f"; search page over {len(index)} sentences at /" if index is not None else ""
    logger.info(f"psp serve: {', '.join(models)} on http://{shown}:{port} (POST /v1/embeddings, /embed){extra}")
    server = uvicorn.Server(
        uvicorn_config(
            app,
            config,
            log_level="info" if args.access_log else "warning",
            access_log=args.access_log,
            timeout_graceful_shutdown=10,
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
