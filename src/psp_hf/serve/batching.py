"""Requests to one model merged into one encode: a small micro-batcher on the event loop.

A request puts its sentences on the model's queue and awaits a future. Each of the model's workers takes what is
queued, waits up to `wait_s` for more while other requests are still on their way in (never when this request is
the only one in the server, so a lone client pays no delay), encodes the lot on the shared thread pool, and hands
each request its rows. An encode of many short requests costs about what one of their sum costs, which is where the
server's throughput under concurrency comes from.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np

logger = logging.getLogger(__name__)


def encode_with_counts(encoder, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings `(n, dim)` float32 and the tokenizer pieces of each sentence (the `usage` counts).

    Tokenizes once: `tokenize_numpy` then `embed_ids` is what `encode` does batch by batch, so the rows are the
    same as `encoder.encode(sentences)`.
    """
    flat, offsets = encoder.tokenize_numpy(sentences)
    counts = np.diff(np.append(offsets, len(flat)))
    return encoder.embed_ids(flat, offsets), counts


class QueueFull(Exception):
    """A request's sentences would take the model's queue past its bound."""

    def __init__(self, queued: int) -> None:
        super().__init__(f"{queued} sentences queued")
        self.queued = queued


class MicroBatcher:
    """Merges the sentences of concurrent requests to one model; `embed` is what a request awaits."""

    def __init__(
        self,
        encoder,
        executor: Executor,
        *,
        wait_s: float = 0.002,
        max_sentences: int = 4096,
        max_queued: int | None = None,
        workers: int = 1,
        others_waiting: Callable[[], int] = lambda: 0,
        on_batch: Callable[[int], None] | None = None,
        inline_sentences: int = 16,
    ) -> None:
        self.encoder = encoder
        self.executor = executor
        self.wait_s = wait_s
        self.max_sentences = max_sentences
        # Sentences waiting for an encode: past `max_queued`, `embed` refuses (the server answers 429), so a burst
        # cannot grow the queue, and the memory it holds, without bound.
        self.max_queued = max_queued
        self.queued = 0
        self.busy = 0  # workers inside an encode on the thread pool
        self.workers = workers
        # How many requests are in the server but not yet queued here: worth waiting for only when above zero.
        self.others_waiting = others_waiting
        self.on_batch = on_batch
        # Encodes of at most this many sentences run on the event loop itself (0: always on the thread pool).
        self.inline_sentences = inline_sentences
        self._queue: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        """Start the workers on the running event loop."""
        self._queue = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.workers)]

    async def close(self) -> None:
        """Stop the workers; requests still queued get an error."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        while self._queue is not None and not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(RuntimeError("server shutting down"))

    async def embed(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings and piece counts of `sentences`, encoded together with whatever else is queued."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        if len(sentences) <= self.inline_sentences and self.busy >= self.workers:
            # Every worker is inside an encode on the thread pool (a large request's, which may take seconds): a few
            # sentences are encoded now, on the loop, rather than waiting behind it.
            embeddings, counts = encode_with_counts(self.encoder, sentences)
            if self.on_batch is not None:
                self.on_batch(len(sentences))
            return embeddings, counts
        if self.max_queued is not None and self.queued and self.queued + len(sentences) > self.max_queued:
            raise QueueFull(self.queued)
        future = asyncio.get_running_loop().create_future()
        self.queued += len(sentences)
        self._queue.put_nowait((sentences, future))
        return await future

    async def _gather(self, first) -> list:
        """`first` and what joins it: everything queued now, then more until the deadline or the size cap."""
        queue = self._queue
        items, total = [first], len(first[0])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while total < self.max_sentences:
            if queue.empty():
                remaining = deadline - loop.time()
                if remaining <= 0 or self.others_waiting() <= 0:
                    break
                try:
                    item = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    break
            else:
                item = queue.get_nowait()
            if total + len(item[0]) > self.max_sentences:
                # Too big to join this encode: it waits for the next one.
                queue.put_nowait(item)
                break
            items.append(item)
            total += len(item[0])
        return items

    async def _worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            items = await self._gather(await self._queue.get())
            self.queued -= sum(len(batch) for batch, _ in items)
            # A request that timed out or whose client left while queued needs no encode.
            items = [item for item in items if not item[1].done()]
            if not items:
                continue
            sentences = items[0][0] if len(items) == 1 else [s for batch, _ in items for s in batch]
            try:
                if len(sentences) <= self.inline_sentences:
                    # A few sentences encode in less time than handing them to a thread and back costs (measured:
                    # ~0.1 ms against ~0.6 ms of waking a thread and passing the GIL around on a busy machine).
                    embeddings, counts = encode_with_counts(self.encoder, sentences)
                else:
                    self.busy += 1
                    try:
                        embeddings, counts = await loop.run_in_executor(
                            self.executor, encode_with_counts, self.encoder, sentences
                        )
                    finally:
                        self.busy -= 1
            except Exception as error:  # one bad encode fails its requests, not the worker
                logger.exception("encode of %d sentences failed", len(sentences))
                for _, future in items:
                    if not future.done():
                        future.set_exception(error)
                continue
            if self.on_batch is not None:
                self.on_batch(len(sentences))
            start = 0
            for batch, future in items:
                stop = start + len(batch)
                if not future.done():  # the client may have gone away
                    future.set_result((embeddings[start:stop], counts[start:stop]))
                start = stop
