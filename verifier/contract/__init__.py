"""Session report v1, the public input contract: bytes in, a frozen `Report` out.

`report` (the document and its limits), `trajectory` (the model's turns as
google-genai types), `profiles` (tool vocabularies as data), `signatures`
(which agents must sign, and what a signature proves).
"""
