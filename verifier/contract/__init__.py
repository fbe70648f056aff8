"""Session report v1, the public input contract: bytes in, a frozen `Report` out.

`report` (the document and its limits), `trajectory` (the model's turns as
google-genai types), `profiles` (tool vocabularies as data), `signatures`
(which agents must sign, and what a signature proves).

``python -m verifier.contract`` prints the report's JSON Schema, generated from
`report`'s models: their docstrings and their fields' are its descriptions.
"""
