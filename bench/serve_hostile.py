"""`psp serve` under two hostile loads on loopback: slow clients holding connections, and large bodies at once.

For each load, good clients keep sending small requests (one sentence, `POST /embed`) while the load runs, and the
table says how many of them were answered (200) and the server's peak RSS (sampled from /proc every 50 ms).

- slow clients: CONNECTIONS sockets, each sending half a request line and then one byte every `--drip` seconds, for
  `--seconds`; the good requests run beside them.
- large bodies: BODIES concurrent requests of the largest body the server's limits allow (`--max-inputs` inputs
  of `--max-chars` characters, every character "é" written as the JSON escape \\u00e9), sent `--rounds` times;
  then the RSS left once they are done.

Everything runs against 127.0.0.1 only, every loop is bounded in count and in time, and the server is stopped at
the end. The server is `psp serve MODEL --port 0 --threads 2` plus `--server-args`.

    python bench/serve_hostile.py [--model FOLDER] [--connections 1100] [--bodies 10] [--max-chars 2048]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import rss_mib, start_server  # noqa: E402 - bench/ scripts share helpers by path


class PeakRSS:
    """The peak RSS of a process, sampled every 50 ms in a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (OSError, RuntimeError):
                return
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def good_requests(url: str, done: asyncio.Event, limit_s: float, every: float = 0.2) -> tuple[int, int]:
    """(answered with 200, sent): one-sentence requests, one at a time, each on a new connection, until `done` (at
    most `limit_s` seconds; each request waits at most 10 s)."""
    import aiohttp

    answered = sent = 0
    stop_at = time.perf_counter() + limit_s
    timeout = aiohttp.ClientTimeout(total=10)
    # A new connection for each request, as a new client would open: a connection kept alive from before the load
    # would not show whether the server still accepts any.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        while not done.is_set() and time.perf_counter() < stop_at:
            sent += 1
            try:
                async with session.post(f"{url}/embed", json={"inputs": "a good request"}) as response:
                    await response.read()
                    answered += response.status == 200
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(every)
    return answered, sent


async def slow_clients(port: int, connections: int, seconds: float, drip: float) -> int:
    """Open `connections` sockets that drip half a request for `seconds`; the number the server closed."""
    closed = 0

    async def one() -> None:
        nonlocal closed
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            closed += 1
            return
        stop_at = time.perf_counter() + seconds
        try:
            writer.write(b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            while time.perf_counter() < stop_at:
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1), drip) == b"":
                        closed += 1
                        return
                except TimeoutError:
                    writer.write(b"a")
        except OSError:
            closed += 1
        finally:
            writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return closed


async def large_bodies(url: str, body: bytes, bodies: int, rounds: int) -> dict[int, int]:
    """`bodies` concurrent posts of `body`, `rounds` times: how many got each status."""
    import aiohttp

    statuses: dict[int, int] = {}
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one() -> None:
            try:
                async with session.post(
                    f"{url}/embed", data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
            except (aiohttp.ClientError, TimeoutError):
                statuses[0] = statuses.get(0, 0) + 1

        for _ in range(rounds):
            await asyncio.gather(*(one() for _ in range(bodies)))
    return statuses


async def with_good(url: str, load, limit_s: float):
    """The load's result and the good requests' (answered, sent), sent while the load runs."""
    done = asyncio.Event()
    good = asyncio.ensure_future(good_requests(url, done, limit_s))
    await asyncio.sleep(0.5)  # the load under way first
    try:
        result = await load
    finally:
        done.set()
    return result, await good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder (default: bench/encode.py's random 384-d model)")
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--drip", type=float, default=2.0, help="seconds between a slow client's bytes")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of the slow-client load")
    parser.add_argument("--bodies", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-inputs", type=int, default=2048)
    parser.add_argument("--max-chars", type=int, default=2048)
    parser.add_argument("--server-args", default="", help="more options for psp serve")
    parser.add_argument("--open-files", type=int, default=1024, help="the server's open-file limit (soft and hard)")
    args = parser.parse_args()
    if args.model is None:
        from encode import build_model

        args.model = str(build_model(30_000, 384))
    limits = ["--max-inputs", str(args.max_inputs), "--max-chars", str(args.max_chars)]
    process, url = start_server(args.model, 2, [*limits, *args.server_args.split()], args.open_files)
    port = int(url.rsplit(":", 1)[1])
    load_before = os.getloadavg()[0]
    rows = []
    try:
        with PeakRSS(process.pid) as rss:
            closed, (answered, sent) = asyncio.run(
                with_good(url, slow_clients(port, args.connections, args.seconds, args.drip), args.seconds)
            )
        rows.append(
            (
                f"{args.connections} slow clients, a byte every {args.drip:g} s for {args.seconds:g} s",
                answered,
                sent,
                rss.peak,
                rss_mib(process.pid),
                f"{closed} slow connections closed by the server",
            )
        )
        body = ('{"inputs": [' + ",".join(['"' + "\\u00e9" * args.max_chars + '"'] * args.max_inputs) + "]}").encode()
        with PeakRSS(process.pid) as rss:
            statuses, (answered, sent) = asyncio.run(
                with_good(url, large_bodies(url, body, args.bodies, args.rounds), 600)
            )
        shown = ", ".join(f"{count} × {status or 'no answer'}" for status, count in sorted(statuses.items()))
        rows.append(
            (
                f"{args.bodies} bodies of {len(body) / 1e6:.1f} MB at once, {args.rounds} rounds",
                answered,
                sent,
                rss.peak,
                rss_mib(process.pid),
                shown,
            )
        )
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"model {args.model}; psp serve {' '.join(limits)} {args.server_args}; open files {args.open_files}")
    print(f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after\n")
    print("| load | good requests answered | peak RSS MiB | RSS after MiB | the load's requests |")
    print("|---|---:|---:|---:|---|")
    for name, answered, sent, peak, after, note in rows:
        print(f"| {name} | {answered} of {sent} | {peak:,.0f} | {after:,.0f} | {note} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
