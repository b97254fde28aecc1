"""Counters and a latency histogram, rendered in Prometheus' text format (no client library needed)."""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

# Latency buckets in seconds: loopback requests take from ~0.1 ms (one sentence) to seconds (the largest bodies).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    escaped = (f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in pairs)
    return "{" + ",".join(escaped) + "}"


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value

    def lines(self, name: str, labels: tuple[tuple[str, str], ...]) -> list[str]:
        out, cumulative = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts, strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {cumulative}")
        out.append(f"{name}_sum{_labels(labels)} {self.total!r}")
        out.append(f"{name}_count{_labels(labels)} {cumulative}")
        return out


class Metrics:
    """What /metrics reports: requests by route and status, sentences and pieces by model, latency, batch sizes.

    Updated from the event loop and the encode threads, hence the lock (held for a few additions only).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple, int] = defaultdict(int)
        self.sentences: dict[str, int] = defaultdict(int)
        self.tokens: dict[str, int] = defaultdict(int)
        self.latency: dict[str, _Histogram] = {}
        self.batches: dict[str, _Histogram] = {}
        self.in_flight = 0

    def request_done(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(route, str(status))] += 1
            if route not in self.latency:
                self.latency[route] = _Histogram(LATENCY_BUCKETS)
            self.latency[route].observe(seconds)

    def embedded(self, model: str, sentences: int, tokens: int) -> None:
        with self._lock:
            self.sentences[model] += sentences
            self.tokens[model] += tokens

    def batch(self, model: str, sentences: int) -> None:
        """One encode of `sentences` merged from one or more requests."""
        with self._lock:
            if model not in self.batches:
                self.batches[model] = _Histogram(BATCH_BUCKETS)
            self.batches[model].observe(sentences)

    def render(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        with self._lock:
            lines = [
                "# HELP psp_requests_total HTTP requests answered, by route and status.",
                "# TYPE psp_requests_total counter",
            ]
            for (route, status), count in sorted(self.requests.items()):
                lines.append(f"psp_requests_total{_labels((('route', route), ('status', status)))} {count}")
            lines += ["# HELP psp_sentences_total Sentences embedded, by model.", "# TYPE psp_sentences_total counter"]
            lines += [f"psp_sentences_total{_labels((('model', m),))} {n}" for m, n in sorted(self.sentences.items())]
            lines += ["# HELP psp_tokens_total Tokenizer pieces embedded, by model.", "# TYPE psp_tokens_total counter"]
            lines += [f"psp_tokens_total{_labels((('model', m),))} {n}" for m, n in sorted(self.tokens.items())]
            lines += [
                "# HELP psp_request_duration_seconds Time from a request's arrival to its answer, by route.",
                "# TYPE psp_request_duration_seconds histogram",
            ]
            for route, histogram in sorted(self.latency.items()):
                lines += histogram.lines("psp_request_duration_seconds", (("route", route),))
            lines += [
                "# HELP psp_batch_sentences Sentences per encode (requests merged by the micro-batcher), by model.",
                "# TYPE psp_batch_sentences histogram",
            ]
            for model, histogram in sorted(self.batches.items()):
                lines += histogram.lines("psp_batch_sentences", (("model", model),))
            lines += [
                "# HELP psp_requests_in_flight Requests being answered now.",
                "# TYPE psp_requests_in_flight gauge",
                f"psp_requests_in_flight {self.in_flight}",
            ]
        return "\n".join(lines) + "\n"
