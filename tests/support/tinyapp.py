"""`serve` with a stand-in for the API (an ASGI app that answers 200), to test the
process's lifecycle on its own: ``python -m tests.support.tinyapp PORT``."""

from __future__ import annotations

import sys
from typing import Any

from verifier.config import Config
from verifier.service.serve import serve


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"up"})


def main() -> int:
    return serve(Config.load(), port=int(sys.argv[1]), app_factory=lambda config, queue: app)


if __name__ == "__main__":
    sys.exit(main())
