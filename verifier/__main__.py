"""`python -m verifier` is the `verifier` command."""

from verifier.cli import entry

entry()
