"""`python -m verifier` is the `verifier` command."""

from verifier.cli.main import entry

entry()
