"""The `verifier` command line: a face of `verifier.app`, nothing more."""

from verifier.cli.main import entry

__all__ = ["entry"]
