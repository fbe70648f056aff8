"""Channel bytes as our monitor seals them (`verifier.checks.tests.entries.monitor`)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

KEY = bytes(range(32))


def sealed(*lines: bytes | dict[str, Any], key: bytes = KEY) -> bytes:
    """The seal line, then each line (JSON bytes, or a dict to write as JSON) sealed in turn."""
    out = [json.dumps({"event": "seal", "key": key.hex()}).encode() + b"\n"]
    for number, line in enumerate(lines):
        body = json.dumps(line).encode() if isinstance(line, dict) else line
        mac = hmac.new(key, b"%d " % number + body, hashlib.sha256).hexdigest()[:32]
        out.append(mac.encode() + b" " + body + b"\n")
    return b"".join(out)
