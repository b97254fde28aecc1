"""uvicorn, set up for `psp serve`: its HTTP protocol with a deadline for each request's headers and a bound on the
connections held, so that slow clients (a byte every few seconds, or half a request and silence) cannot hold every
socket of the server. A request's body and answer are bounded by the app's own limits (`--request-timeout`,
`--max-body-bytes-in-flight`); uvicorn has none for headers, nor for a connection that never finishes them.
"""

from __future__ import annotations

import logging

from .state import ServeConfig

logger = logging.getLogger(__name__)


def guarded_protocol(base: type, header_timeout: float | None, max_connections: int | None) -> type:
    """`base` (one of uvicorn's HTTP protocol classes) with a header deadline and a connection bound.

    A connection must finish its request's headers within `header_timeout` seconds of opening (or of its last
    answer, when kept alive), or it is closed. Past `max_connections`, a new connection closes the oldest one still
    sending its headers (a slow client's), or itself when every connection is busy with a request.
    """

    class GuardedProtocol(base):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._opened = self.loop.time()
            self._header_timer = None
            if max_connections is not None and len(self.connections) > max_connections:
                waiting = [c for c in self.connections if c is not self and _waiting_for_headers(c)]
                victim = min(waiting, key=lambda c: c._opened) if waiting else self
                victim.transport.close()
                if victim is self:
                    return
            self._arm()

        def _arm(self) -> None:
            if header_timeout is not None:
                cycle = self.cycle
                self._header_timer = self.loop.call_later(header_timeout, self._headers_late, cycle)

        def _headers_late(self, cycle) -> None:
            self._header_timer = None
            # Still no request after the one the timer was armed for (or its answer was sent): the headers are late.
            late = self.cycle is cycle and (cycle is None or cycle.response_complete)
            if late and not self.transport.is_closing():
                logger.debug("closing a connection that sent no complete headers in %s s", header_timeout)
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Kept alive: the next request's headers get the same deadline.
            if self._header_timer is not None:
                self._header_timer.cancel()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc) -> None:
            if getattr(self, "_header_timer", None) is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

    GuardedProtocol.__name__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def _waiting_for_headers(connection) -> bool:
    cycle = getattr(connection, "cycle", None)
    return cycle is None or cycle.response_complete


def uvicorn_config(app, config: ServeConfig, **options):
    """The `uvicorn.Config` of `app`: the guarded HTTP protocol, no Server header, and `options` (log level...)."""
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    protocol = guarded_protocol(AutoHTTPProtocol, config.header_timeout, config.max_connections)
    return uvicorn.Config(app, http=protocol, server_header=False, **options)
