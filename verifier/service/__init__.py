"""The long-running service: the HTTP API, the dashboard, the workers, metrics and
the scope policy of tokens. Faces of `verifier.app`."""
