"""Print the JSON Schema of session report v1, generated from the models.

``python -m verifier.contract`` writes it to standard output as UTF-8, whatever the
locale; ``make schema`` commits it as ``docs/contract/session-report-v1.schema.json``
and its packaged copy ``verifier/contract/report.schema.json``, which the API serves.
"""

from __future__ import annotations

import sys

from verifier.contract.report import schema_text


def main() -> None:
    """Write the schema's text to standard output."""
    # Bytes, not text: the descriptions are not ASCII, and the committed file is UTF-8
    # even when the locale's encoding is another.
    sys.stdout.buffer.write(schema_text().encode("utf-8"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
