"""What every route reads: the served models, the options, the batchers and the counters, kept on the app
(`app.state.psp`), and the helpers the handlers share (the body, the model a request names, an encode)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from .batching import MicroBatcher, QueueFull
from .metrics import Metrics
from .requests import APIError, Limits, parse_json, read_body

logger = logging.getLogger(__name__)

_RESERVED = "psp.body_bytes"  # the scope key of a request's reserved body bytes
_PARSE_ON_LOOP_BYTES = 1 << 20  # bodies from this size are parsed on the thread pool


@dataclass
class ServeConfig:
    """How the app answers: limits, key, CORS, batching, the encode threads and the limits under load."""

    limits: Limits = field(default_factory=Limits)
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    threads: int = 1
    batch_wait_ms: float = 2.0
    max_batch_sentences: int = 4096
    # Requests being answered at once (past it: 429), seconds one request may take (past it: 503), and sentences
    # waiting for an encode per model (past it: 429). None: no limit.
    max_concurrent_requests: int | None = 512
    request_timeout: float | None = 60.0
    max_queued_sentences: int = 65536
    # Host header values accepted (None: any): a page elsewhere cannot reach a local server by DNS rebinding.
    allowed_hosts: list[str] | None = None
    # Seconds a connection may take to send a request's headers, and connections held at once (past it, the
    # oldest one still sending its headers is closed): slow clients cannot hold the server's sockets.
    header_timeout: float | None = 10.0
    max_connections: int | None = 1024
    # Bytes of request bodies held across all requests at once (None: twice the largest body allowed).
    max_body_bytes_in_flight: int | None = None

    @property
    def body_bytes_budget(self) -> int:
        """Bytes of bodies the server holds at once (past it, 429)."""
        return self.max_body_bytes_in_flight or 2 * self.limits.max_body_bytes

    def __post_init__(self) -> None:
        if not (math.isfinite(self.batch_wait_ms) and self.batch_wait_ms >= 0):
            raise ValueError(f"batch_wait_ms must be a finite number of 0 or more, got {self.batch_wait_ms}")
        if self.header_timeout is not None and not (math.isfinite(self.header_timeout) and self.header_timeout > 0):
            raise ValueError(f"header_timeout must be a positive number of seconds, got {self.header_timeout}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")
        if self.max_body_bytes_in_flight is not None and self.max_body_bytes_in_flight < self.limits.max_body_bytes:
            raise ValueError(
                f"max_body_bytes_in_flight ({self.max_body_bytes_in_flight}) must hold one body of the largest size "
                f"({self.limits.max_body_bytes})"
            )
        if self.max_concurrent_requests is not None and self.max_concurrent_requests < 1:
            raise ValueError(f"max_concurrent_requests must be at least 1, got {self.max_concurrent_requests}")
        if self.request_timeout is not None and not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise ValueError(f"request_timeout must be a positive number of seconds, got {self.request_timeout}")
        if self.max_queued_sentences < self.limits.max_inputs:
            raise ValueError(
                f"max_queued_sentences ({self.max_queued_sentences}) must hold one request of max_inputs "
                f"({self.limits.max_inputs})"
            )


class ServerState:
    """The app's state: built by `create_app`, the batchers started by its lifespan."""

    def __init__(self, models: dict, config: ServeConfig, index) -> None:
        self.models = models
        self.default_model = next(iter(models))
        self.config = config
        self.index = index
        self.metrics = Metrics()
        self.started = int(time.time())
        # Requests inside the app that have not reached a batcher yet: the batcher waits for them only.
        self.arriving = 0
        self.executor: ThreadPoolExecutor | None = None
        self.batchers: dict[str, MicroBatcher] = {}
        # Bytes of bodies held by requests now (each request's share is in its scope, returned when it ends).
        self.body_bytes = 0

    def start(self) -> None:
        """One pool of encode threads for every model; each model's batcher keeps that many encodes going."""
        config = self.config
        self.executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="psp-encode")
        for name, encoder in self.models.items():
            batcher = MicroBatcher(
                encoder,
                self.executor,
                wait_s=config.batch_wait_ms / 1000,
                max_sentences=config.max_batch_sentences,
                max_queued=config.max_queued_sentences,
                workers=config.threads,
                others_waiting=lambda: self.arriving,
                on_batch=lambda n, name=name: self.metrics.batch(name, n),
            )
            batcher.start()
            self.batchers[name] = batcher

    async def stop(self) -> None:
        for batcher in self.batchers.values():
            await batcher.close()
        if self.executor is not None:
            self.executor.shutdown(wait=True)

    async def body(self, request) -> dict:
        """The request's JSON object, read within the body limit and the server's budget of bytes in flight."""
        raw = await read_body(request, self.config.limits, lambda n: self.reserve(request.scope, n))
        if len(raw) < _PARSE_ON_LOOP_BYTES or self.executor is None:
            return parse_json(raw)
        # A large body takes long to parse (0.34 s for the largest, 100 MB of \u00e9 escapes): on a thread, while
        # the loop answers other requests.
        return await asyncio.get_running_loop().run_in_executor(self.executor, parse_json, raw)

    def reserve(self, scope: dict, size: int) -> None:
        """Count `size` more bytes of body for the request of `scope`, or refuse it (429) past the budget."""
        budget = self.config.body_bytes_budget
        if self.body_bytes + size > budget:
            raise APIError(
                429,
                f"the server holds {self.body_bytes} bytes of request bodies, and this one would take it past "
                f"{budget} (--max-body-bytes-in-flight); retry later",
                code="bytes_in_flight",
                headers={"Retry-After": "1"},
            )
        self.body_bytes += size
        scope[_RESERVED] = scope.get(_RESERVED, 0) + size

    def release(self, scope: dict) -> None:
        """Return what the request of `scope` reserved (when its answer is sent)."""
        self.body_bytes -= scope.pop(_RESERVED, 0)

    def model_of(self, body: dict, required: bool) -> str:
        """The served name of the model `body` asks for.

        With one model served, any `model` value (or none) means it, as text-embeddings-inference does: clients with
        a hard-coded model name work unchanged. With several, the name must be one of them (`required`: it must be
        given, as OpenAI's route requires).
        """
        name = body.get("model")
        if len(self.models) == 1:
            if name is not None and not isinstance(name, str):
                raise APIError(422, "'model' must be a string", param="model", code="invalid_type")
            return self.default_model
        if name is None and not required:
            return self.default_model
        if not isinstance(name, str):
            raise APIError(422, "'model' must be a string naming a served model", param="model", code="invalid_type")
        if name not in self.models:
            served = ", ".join(self.models)
            raise APIError(
                404, f"model {name!r} is not served here; served: {served}", param="model", code="model_not_found"
            )
        return name

    async def embed(self, name: str, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings and piece counts of `sentences` with model `name`, merged with other requests' encodes."""
        # Queued now: no longer one the batcher should wait for (the request's count is restored after).
        self.arriving -= 1
        try:
            embeddings, counts = await self.batchers[name].embed(sentences)
        except QueueFull as full:
            raise APIError(
                429,
                f"the server is busy: {full.queued} sentences are waiting for {name!r} (limit "
                f"{self.config.max_queued_sentences}, --max-queued-sentences); retry later",
                code="queue_full",
                headers={"Retry-After": "1"},
            ) from None
        finally:
            self.arriving += 1
        self.metrics.embedded(name, len(sentences), int(counts.sum()))
        return embeddings, counts


def state_of(request) -> ServerState:
    """The ServerState of the app answering `request`."""
    return request.scope["app"].state.psp
