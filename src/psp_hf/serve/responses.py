"""JSON answers of the server, written by orjson (numpy arrays directly, no per-float Python objects)."""

import orjson


def json_response(content, status: int = 200):
    """A FastAPI `Response` holding `content` as JSON."""
    from fastapi import Response

    return Response(orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY), status, media_type="application/json")
