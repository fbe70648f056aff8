"""The command layer: one plain function per thing a face asks for (submit, verify,
show a session, gate, export, evidence), taking the `Config` explicitly. The CLI,
the API, the worker and the demo call these; none of them opens the store or
sequences the steps itself.

A command that has something to tell the person running it on the way (a store
that is not there yet, so nothing was read) says it through a `Notice`, as
`progress` says how far it got; what it returns is the result alone.
"""

from collections.abc import Callable

from verifier._internal.cancel import cancel_all

Notice = Callable[[str], None]


def stop_all() -> None:
    """Cancel every verification under way in this process, and any it starts later: the
    first signal's stop (a test run under way is killed and nothing is recorded)."""
    cancel_all()


__all__ = ["Notice", "stop_all"]
