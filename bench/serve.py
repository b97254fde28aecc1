"""`psp serve` under load on loopback: requests/s and latency, HTTP throughput against in-process encode, memory.

The server runs as its own process (`psp serve MODEL --port 0 --threads T -q`); the clients are aiohttp sessions in
this process, each sending its next request as soon as the last is answered. For 1- and 64-sentence requests at 1,
8 and 64 concurrent clients: requests/s, sentences/s, p50/p99 latency, errors, and sentences/s as a ratio of
in-process `encode` (same model, same sentences, T threads, batches of the request size) measured in this run.
The clients share the machine's cores with the server, as any loopback test does.

Then the memory check: the server's RSS after a warm-up and after `--memory-requests` more 1-sentence requests
(64 clients; stopped at `--memory-seconds`, whichever comes first; the table says how many were sent).

    .venv/bin/python bench/serve.py [--model FOLDER] [--seconds 5] [--threads 2] [--format base64]

Without --model it builds bench/encode.py's random table over a trained 30,000-piece vocabulary (384-d, the width of
the distilled models; cached under bench/.cache).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def start_server(
    model: str, threads: int, extra: list[str], open_files: int | None = None
) -> tuple[subprocess.Popen, str]:
    """`psp serve` in its own process (with `open_files` as its open-file limit, soft and hard) and its URL."""
    command = [sys.executable, "-m", "psp_hf.cli", "serve", model, "--port", "0", "--threads", str(threads), *extra]

    def limit_files() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, preexec_fn=open_files and limit_files)
    seen = []
    for _ in range(20):  # warnings may come before the line that says where it listens
        line = process.stderr.readline()
        seen.append(line)
        if "http://" in line:
            return process, line.split(" on ")[1].split()[0]
        if not line:
            break
    process.kill()
    raise SystemExit(f"server did not start: {''.join(seen)}{process.stderr.read()}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def load(
    url: str,
    model: str,
    sentences: list[str],
    size: int,
    clients: int,
    seconds: float,
    fmt: str,
    max_requests: int | None = None,
    server_pid: int | None = None,
) -> dict:
    """`clients` loops of back-to-back requests of `size` sentences for `seconds` (or `max_requests` in all)."""
    import aiohttp

    latencies: list[float] = []
    errors = 0
    sent = 0
    stop_at = time.perf_counter() + seconds
    bodies = [
        json.dumps({"model": model, "input": sentences[i : i + size], "encoding_format": fmt}).encode()
        for i in range(0, len(sentences) - size, size)
    ][:2000]

    async def client(session: aiohttp.ClientSession, offset: int) -> None:
        nonlocal errors, sent
        i = offset
        while time.perf_counter() < stop_at and (max_requests is None or sent < max_requests):
            sent += 1
            body = bodies[i % len(bodies)]
            i += clients
            start = time.perf_counter()
            async with session.post(
                f"{url}/v1/embeddings", data=body, headers={"content-type": "application/json"}
            ) as r:
                payload = await r.read()
                if r.status != 200 or not payload.startswith(b'{"object":"list"'):
                    errors += 1
            latencies.append(time.perf_counter() - start)

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        started, client_cpu = time.perf_counter(), time.process_time()
        server_cpu = cpu_seconds(server_pid) if server_pid else 0.0
        await asyncio.gather(*(client(session, c) for c in range(clients)))
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        server_cpu = (cpu_seconds(server_pid) if server_pid else 0.0) - server_cpu
    lat = np.array(latencies) * 1000
    return {
        "size": size,
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "seconds": elapsed,
        "rps": len(latencies) / elapsed,
        "sps": len(latencies) * size / elapsed,
        "p50": float(np.percentile(lat, 50)),
        "p99": float(np.percentile(lat, 99)),
        # CPU microseconds per sentence: the server's, and the clients' (this process)
        "server_us": server_cpu / (len(latencies) * size) * 1e6,
        "client_us": client_cpu / (len(latencies) * size) * 1e6,
    }


def in_process(model: str, sentences: list[str], size: int, threads: int, seconds: float) -> tuple[float, float]:
    """Sentences/s of `encode` in this process, `size` sentences a batch, on `threads` threads (the best run), and
    CPU microseconds per sentence (over all runs)."""
    from psp_hf import load

    encoder = load(model)
    n = max(size * 256, 16384)
    texts = (sentences * (n // len(sentences) + 1))[:n]
    encoder.encode(texts[:2048], batch_size=size, num_threads=threads)  # warm-up (word cache, pages)
    best, runs, cpu, stop_at = 0.0, 0, time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        start = time.perf_counter()
        encoder.encode(texts, batch_size=size, num_threads=threads)
        best = max(best, n / (time.perf_counter() - start))
        runs += 1
    return best, (time.process_time() - cpu) / (runs * n) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder (default: bench/encode.py's random 384-d model)")
    parser.add_argument("--threads", type=int, default=2, help="server encode threads and in-process threads")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per load cell")
    parser.add_argument("--format", default="base64", choices=["base64", "float"], help="encoding_format asked for")
    parser.add_argument("--sizes", default="1,64")
    parser.add_argument("--clients", default="1,8,64")
    parser.add_argument("--memory-requests", type=int, default=100_000)
    parser.add_argument("--memory-seconds", type=float, default=300.0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    from psp_hf.data_folder import sts_sentences

    if args.model is None:
        from encode import build_model

        args.model = str(build_model(30_000, 384))
    sentences = sts_sentences()
    load_before = os.getloadavg()
    sizes = [int(s) for s in args.sizes.split(",")]
    # In-process encode before and after the HTTP runs, so that both meet the load the runs met.
    before = {size: in_process(args.model, sentences, size, args.threads, args.seconds) for size in sizes}
    print(f"in-process encode: {before}", file=sys.stderr, flush=True)
    process, url = start_server(args.model, args.threads, [])
    name = Path(args.model.rstrip("/")).name
    rows = []
    try:
        asyncio.run(load(url, name, sentences, 1, 8, 1.0, args.format))  # warm-up
        for size in sizes:
            for clients in (int(c) for c in args.clients.split(",")):
                row = asyncio.run(
                    load(url, name, sentences, size, clients, args.seconds, args.format, server_pid=process.pid)
                )
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        rss_start = rss_mib(process.pid)
        memory = asyncio.run(
            load(url, name, sentences, 1, 64, args.memory_seconds, args.format, args.memory_requests, process.pid)
        )
        rss_end = rss_mib(process.pid)
    finally:
        process.terminate()
        code = process.wait(timeout=60)
    after = {size: in_process(args.model, sentences, size, args.threads, args.seconds) for size in sizes}
    baseline = {
        size: ((before[size][0] + after[size][0]) / 2, (before[size][1] + after[size][1]) / 2) for size in sizes
    }
    for row in rows:
        row["ratio"] = row["sps"] / baseline[row["size"]][0]
        row["cpu_ratio"] = baseline[row["size"]][1] / row["server_us"]
    load_after = os.getloadavg()

    print(
        f"model {args.model}, server --threads {args.threads}, encoding_format {args.format}, {args.seconds:g} s a cell"
    )
    print(f"load average before {load_before[0]:.2f} / after {load_after[0]:.2f}; server exit code {code}\n")
    print(
        "| sentences/request | clients | requests/s | sentences/s | p50 ms | p99 ms | errors | sentences/s vs "
        "in-process encode | server CPU µs/sentence | client CPU µs/sentence | in-process CPU / server CPU |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']} | {r['clients']} | {r['rps']:,.0f} | {r['sps']:,.0f} | {r['p50']:.2f} | {r['p99']:.2f} | "
            f"{r['errors']} | {r['ratio']:.2f} | {r['server_us']:.1f} | {r['client_us']:.1f} | {r['cpu_ratio']:.2f} |"
        )
    print()
    for size in sizes:
        print(
            f"in-process encode, batches of {size}, {args.threads} threads: {before[size][0]:,.0f} sentences/s before, "
            f"{after[size][0]:,.0f} after ({baseline[size][1]:.1f} CPU µs/sentence)"
        )
    print(
        f"\nmemory: {memory['requests']:,} requests of 1 sentence (64 clients) in {memory['seconds']:.0f} s, "
        f"{memory['errors']} errors; server RSS {rss_start:.1f} MiB before, {rss_end:.1f} MiB after "
        f"({rss_end - rss_start:+.1f} MiB)"
    )
    if args.json:
        results = {"rows": rows, "before": before, "after": after, "memory": memory, "rss": [rss_start, rss_end]}
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
