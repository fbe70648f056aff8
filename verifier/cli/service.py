"""The service's processes: ``verifier serve`` and ``verifier worker``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from verifier.cli.options import config_option, exit_with
from verifier.service.serve import run_worker, serve

if TYPE_CHECKING:
    from verifier.config import Config


@click.command("serve", short_help="The HTTP API, verifying in the background.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option(
    "--no-worker",
    is_flag=True,
    help="Serve the API only; `verifier worker` processes verify (PostgreSQL).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Verifications at once in this process (default: service.concurrency).",
)
@config_option
def serve_command(
    host: str, port: int, no_worker: bool, concurrency: int | None, config: Config
) -> None:
    """Serve the API; verify posted sessions in this process unless --no-worker.

    Stops on SIGTERM or SIGINT within 15 s: test runs killed, nothing recorded for
    them, their sessions left to verify again.
    """
    exit_with(serve(config, host=host, port=port, worker=not no_worker, concurrency=concurrency))


@click.command("worker", short_help="Run verification jobs from the PostgreSQL queue.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Verifications at once in this process (default: service.concurrency).",
)
@config_option
def worker_command(concurrency: int | None, config: Config) -> None:
    """Verify queued sessions until stopped (PostgreSQL; on SQLite, `serve` verifies).

    Stops on SIGTERM or SIGINT within 15 s: test runs killed, their jobs released
    for another worker.
    """
    exit_with(run_worker(config, concurrency))
