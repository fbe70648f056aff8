"""When an inconclusive session is verified again: infrastructure causes only, backoff capped."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from verifier.config import Config, ServiceConfig
from verifier.errors import ConfigError
from verifier.findings import DeliveryStatus
from verifier.service.serve import with_concurrency
from verifier.service.worker import RETRYABLE, infrastructure_cause, retry_delay_s, retry_due

T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
SERVICE = ServiceConfig(retry_base_s=60.0, retry_cap_s=600.0, retry_max_runs=6)


@dataclass(frozen=True)
class Run:
    """The fields of a stored run the policy reads."""

    delivery_status: DeliveryStatus
    finished_at: dt.datetime
    result: dict[str, Any]


def result(**checks: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "checks": {
            name: {"status": status, "findings": [{"code": c, "message": c} for c in codes]}
            for name, (status, codes) in checks.items()
        }
    }


def inconclusive(at: dt.datetime, *codes: str) -> Run:
    checks = result(changes=("pass", []), tests=("error", list(codes)), audit=("pass", []))
    return Run(DeliveryStatus.INCONCLUSIVE, at, checks)


def test_an_unreachable_repository_is_infrastructure_and_is_retried_after_the_base_delay() -> None:
    runs = [inconclusive(T0, "tests.runner_not_found")]
    assert infrastructure_cause(runs[0].result)
    assert retry_due(runs, SERVICE) == T0 + dt.timedelta(seconds=60)


def test_a_remote_that_could_not_be_fetched_is_infrastructure() -> None:
    run = Run(
        DeliveryStatus.INCONCLUSIVE,
        T0,
        result(changes=("error", ["change.fetch_failed"]), tests=("pass", []), audit=("pass", [])),
    )
    assert infrastructure_cause(run.result)
    assert retry_due([run], SERVICE) == T0 + dt.timedelta(seconds=60)


@pytest.mark.parametrize(
    "code",
    [
        "tests.uncounted",
        "tests.tampering_suspected",
        "tests.unsandboxed",
        "tests.no_command",
        "change.trusted_ref_untrustworthy",
    ],
)
def test_causes_another_run_would_repeat_are_never_retried(code: str) -> None:
    assert code not in RETRYABLE
    assert retry_due([inconclusive(T0, code)], SERVICE) is None


def test_one_non_infrastructure_cause_beside_an_infrastructure_one_is_not_retried() -> None:
    run = inconclusive(T0, "tests.runner_failed", "tests.uncounted")
    assert retry_due([run], SERVICE) is None


def test_a_check_in_error_without_a_finding_is_not_retried_the_cause_is_unknown() -> None:
    assert not infrastructure_cause(result(tests=("error", [])))
    assert not infrastructure_cause(result(tests=("skipped", [])))


def test_the_delay_doubles_with_each_inconclusive_run_and_never_passes_the_cap() -> None:
    delays = [retry_delay_s(n, SERVICE) for n in range(1, 10)]
    assert delays[:5] == [60, 120, 240, 480, 600]
    assert max(delays) == SERVICE.retry_cap_s
    assert retry_delay_s(10_000, SERVICE) == SERVICE.retry_cap_s  # no overflow, still capped


def test_the_delay_counts_the_inconclusive_runs_since_the_last_conclusive_one() -> None:
    runs = [inconclusive(T0 + dt.timedelta(minutes=i), "change.git_failed") for i in range(3)]
    assert retry_due(runs, SERVICE) == runs[-1].finished_at + dt.timedelta(seconds=240)


def test_retries_stop_after_the_configured_number_of_inconclusive_runs() -> None:
    runs = [inconclusive(T0, "change.repo_unavailable")] * (SERVICE.retry_max_runs - 1)
    assert retry_due(runs, SERVICE) is not None
    assert retry_due([*runs, runs[0]], SERVICE) is None


def test_a_session_whose_latest_run_concluded_is_not_retried() -> None:
    delivered = Run(DeliveryStatus.DELIVERED, T0, result(tests=("pass", [])))
    assert retry_due([inconclusive(T0, "change.git_failed"), delivered], SERVICE) is None
    assert retry_due([], SERVICE) is None


def test_a_cap_under_the_base_delay_is_refused_naming_the_table() -> None:
    with pytest.raises(ConfigError, match=r"service.*retry_cap_s must be at least retry_base_s"):
        Config.from_mapping({"service": {"retry_base_s": 60, "retry_cap_s": 30}})


def test_a_bad_cron_expression_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"service\.maintenance_cron: .*cron expression"):
        Config.from_mapping({"service": {"maintenance_cron": "every minute"}})


def test_service_settings_are_read_from_their_table() -> None:
    config = Config.from_mapping({"service": {"concurrency": 4, "retry_max_runs": 2}})
    assert replace(config.service, concurrency=4).retry_max_runs == 2
    assert config.service.concurrency == 4


@pytest.mark.parametrize(
    ("given", "in_force"), [("auto", "required"), ("required", "required"), ("off", "off")]
)
def test_a_service_requires_the_sandbox_that_the_command_line_only_prefers(
    tmp_path: Path, given: str, in_force: str
) -> None:
    path = tmp_path / "verifier.toml"
    path.write_text(f'[verifier]\nnetwork_isolation = "{given}"\n')
    config = Config.load(path, environ={})
    assert config.network_isolation == given
    assert with_concurrency(config, None).network_isolation == in_force
    assert with_concurrency(config, 3).service.concurrency == 3
