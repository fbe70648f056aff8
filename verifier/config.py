"""The verifier's configuration: one typed object, built once and passed in.

Layers, later ones winning key by key:

1. the defaults in this module: every security default lives here, in code, so
   it also applies to repositories nobody configured;
2. the packaged ``verifier.toml`` (`verifier.resources.default_config_file`),
   which documents those defaults (a test holds the two equal);
3. the first file of: ``--config FILE``, ``$VERIFIER_CONFIG``,
   ``$XDG_CONFIG_HOME/verifier/verifier.toml`` (``~/.config/...``),
   ``/etc/verifier/verifier.toml``. Never a file from the current directory:
   the verifier runs inside checkouts the agent wrote, and a committed
   ``verifier.toml`` must not steer it;
4. the environment: ``VERIFIER_DATABASE_URL``.

A repository is given by ``path`` (a checkout on this machine) or ``url`` (for
workers on other machines: fetched into a bare mirror under ``mirror_cache``,
`verifier._internal.mirror`), not both.

The models are pydantic dataclasses: unknown keys are refused, and every error
names the key (``repositories.calc.test_timeout``). Relative paths are relative
to the folder of the file that gave them.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.dataclasses import dataclass

from verifier import resources
from verifier.errors import ConfigError

DEFAULT_TEST_TIMEOUT_S = 600.0
DEFAULT_MAX_REPORT_BYTES = 20 * 1000 * 1000
DEFAULT_FETCH_TIMEOUT_S = 600.0
SYSTEM_CONFIG_DIR = Path("/etc/verifier")
CONFIG_NAME = "verifier.toml"
# The tasks file looked for beside the operator's configuration file (`Config.tasks_location`).
TASKS_NAME = "tasks.toml"

_STRICT = ConfigDict(extra="forbid", populate_by_name=True)
# Keys whose relative values are paths, relative to the folder of their file.
_PATH_KEYS = {
    "verifier": ("profiles_dir", "mirror_cache", "tasks_file"),
    "repository": ("path", "python", "venv", "trusted_mirror"),
    "evidence": ("signing_key",),
}


def default_database_url() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'verifier' / 'verifier.sqlite3'}"


def default_mirror_cache() -> Path:
    """Where workers keep their bare mirrors of repositories given by url: the user's cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verifier" / "mirrors"


def _url(value: Any) -> Any:
    """A repository url as git takes it; never one git would read as an option."""
    if not isinstance(value, str):
        return value
    if not value or value != value.strip() or value.startswith("-"):
        raise ValueError(
            f"expected a git url (https://, ssh://, file://, host:path), got {value!r}"
        )
    if any(c in value for c in "\0\n\r"):
        raise ValueError(f"a url holds no NUL or line break, got {value!r}")
    if value.startswith("ext::"):
        raise ValueError(f"the ext:: transport runs a command; not a url, got {value!r}")
    return value


def parse_command(value: Any, where: str) -> tuple[str, ...]:
    """A command is an argument list, or a string split like a shell would, never run by one."""
    try:
        return _command(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _command(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r}: {exc}") from None
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"expected a string or a list of strings, got {value!r}")


Command = Annotated[tuple[str, ...], BeforeValidator(_command)]
Seconds = Annotated[float, Field(gt=0, strict=True)]
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
Text = Annotated[str, Field(strict=True)]


def _globs(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of glob strings, got {value!r}")
    return tuple(value)


Globs = Annotated[tuple[str, ...], BeforeValidator(_globs)]


def _names(value: Any) -> Any:
    if value is None or value == "all":
        return value
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, str) and v and not v.startswith("-") and v == v.strip() for v in value
    ):
        raise ValueError(f'expected "all" or a list of plugin names, got {value!r}')
    return tuple(value)


def _paths(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of absolute paths, got {value!r}")
    for v in value:
        if not v.startswith("/"):
            raise ValueError(f"{v!r} is not an absolute path")
    return tuple(Path(v) for v in value)


Paths = Annotated[tuple[Path, ...], BeforeValidator(_paths)]


def _test_ids(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, str) and v and v == v.strip() for v in value
    ):
        raise ValueError(f"expected a list of test ids (pytest node ids), got {value!r}")
    return tuple(value)


@dataclass(frozen=True, config=_STRICT)
class SandboxLimits:
    """What one test run may use (docs/security.md): generous for honest suites.

    Applied with what the host offers: a cgroup of the run's own (memory,
    processes) where we may make one, and rlimits per process (memory as
    RLIMIT_DATA, open files, file size, CPU seconds); the verdict names those
    that could not be applied.
    """

    memory_mb: PositiveInt = 4096
    processes: PositiveInt = 1024
    open_files: PositiveInt = 4096
    file_size_mb: PositiveInt = 2048
    cpu_s: PositiveInt = 1800
    # The size of the sandbox's private /tmp (and /dev/shm), in memory.
    tmp_mb: PositiveInt = 512


@dataclass(frozen=True, config=_STRICT)
class RepositoryConfig:
    """What we know about one repository, by the name reports use for it."""

    name: str
    path: Path | None = None
    # Instead of `path`: where workers fetch the repository from into a bare mirror.
    url: Annotated[Text | None, BeforeValidator(_url)] = None
    test_command: Command = ()
    test_timeout_s: Seconds | None = Field(default=None, alias="test_timeout")
    # A change matching one of these globs fails, or is a note with on_change = "note".
    protected_paths: Globs = ()
    on_change: Literal["fail", "note"] = "fail"
    # The tests run with pytest's configuration, every conftest.py and the files of
    # `test_paths` as they are at the base commit (or the trusted_ref):
    # verifier/checks/tests/testinfra.py.
    test_infra_from_base: bool = Field(default=True, strict=True)
    test_paths: Globs = ("tests/**", "test/**", "**/test_*.py", "**/*_test.py")
    # A file the session changed, outside the test paths and not Python source, that the
    # base's tests read: "inconclusive" (tests.changed_data_read), or "accept".
    changed_data: Literal["inconclusive", "accept"] = "inconclusive"
    # A report without an audit trail (`audit.trail = "none"`: an imported gemini-cli
    # transcript): "required" leaves it inconclusive (audit.no_trail), "optional" accepts it
    # with a note on the verdict.
    trail: Literal["required", "optional"] = "required"
    # What a harness applied other than the model asked (gemini-cli's tolerant `replace`
    # matches, its unescaped writes: replay.tolerant_match, replay.corrected_edit): "note"
    # keeps it beside the verdict, "fail" makes the session not delivered.
    tolerant_edits: Literal["note", "fail"] = "note"
    # A ref only people update (e.g. refs/remotes/origin/main): the base must be in its history,
    # at most `trusted_max_behind` commits behind its tip (0: the tip itself).
    trusted_ref: Text | None = None
    trusted_max_behind: NonNegativeInt = 1000
    # A repository the agent cannot write (a mirror the service fetches) where
    # `trusted_ref` is read; required for a trusted_ref in worktree mode.
    trusted_mirror: Path | None = None
    # How a run's results are read (docs/runners.md): "auto" (pytest and unittest are
    # counted, other runners are not), "junit" (the files of `results_junit`), "exit-code".
    # In TOML: results = "auto" | "exit-code" | { junit = ["reports/*.xml"] }.
    results: Literal["auto", "junit", "exit-code"] = "auto"
    results_junit: Globs = ()
    # The repository's own interpreter, or virtual environment: `{python}` and PATH use it.
    python: Path | None = None
    venv: Path | None = None
    # Host paths the sandbox shows this repository's tests, read-only (a toolchain, data).
    read_only_paths: Paths = ()
    # The pytest plugins loaded, by entry point or distribution name, from the interpreter's
    # own packages (never the tree's): docs/runners.md. Unset: those the base's pytest
    # configuration asks for (`-p NAME` in addopts, required_plugins) and those of the
    # distributions the base declares as dependencies; [] for none; "all": every one.
    pytest_plugins: Annotated[tuple[str, ...] | Literal["all"] | None, BeforeValidator(_names)] = (
        None
    )
    # A report's own `task_read_only` claim counts (an empty session of a task the
    # operator declared nothing about is then delivered); off: only the operator's task
    # can make a task read-only.
    allow_read_only_claims: bool = Field(default=False, strict=True)
    # "head": only the head is tested (every test must pass); "differential": the base is
    # tested too (once per base tree, cached) and each test classified: broken tests fail,
    # tests still failing as at a trusted_ref base are notes (docs/verdicts.md). A task with
    # acceptance tests always runs the base.
    baseline: Literal["head", "differential"] = "head"
    # A test that fails is run again, by its id, this many more times, each on a fresh copy
    # (pytest through our entry): failing, then passing is tests.flaky (inconclusive).
    flaky_reruns: NonNegativeInt = 2
    # Tests known to be flaky, by id (pytest node ids): their outcome is reported, not judged.
    known_flaky: Annotated[tuple[str, ...], BeforeValidator(_test_ids)] = ()

    @model_validator(mode="after")
    def _one_interpreter(self) -> RepositoryConfig:
        if self.path is not None and self.url is not None:
            raise ValueError("give path or url, not both")
        if self.python is not None and self.venv is not None:
            raise ValueError("give python or venv, not both")
        if self.results == "junit" and not self.results_junit:
            raise ValueError("results: junit needs at least one glob")
        return self


# Every minute: the packaged default, valid (croniter's own test of it is in tests/test_config.py).
DEFAULT_MAINTENANCE_CRON = "* * * * *"


def _cron(value: Any) -> Any:
    if value == DEFAULT_MAINTENANCE_CRON:
        # The packaged file gives it to every configuration: croniter (dateutil with it) is
        # imported only for a schedule the operator wrote.
        return value
    import croniter  # type: ignore[import-untyped]

    if not isinstance(value, str) or not croniter.croniter.is_valid(value):
        raise ValueError(
            f"expected a cron expression (5 fields, or 6 with seconds last), got {value!r}"
        )
    return value


@dataclass(frozen=True, config=_STRICT)
class ServiceConfig:
    """How `verifier serve` and `verifier worker` run verifications (verifier/service/serve.py)."""

    # Verifications at once in one process (each runs its own test process).
    concurrency: PositiveInt = 2
    # A worker whose heartbeat is older than this is taken for dead: its jobs go back to
    # the queue for another worker. Heartbeats are sent every third of it.
    stalled_after_s: Seconds = 30.0
    # When the periodic work runs, once per deployment: stalled jobs retried, inconclusive
    # sessions re-verified, delivered ones re-checked. Cron, a 6th field for seconds.
    maintenance_cron: Annotated[str, BeforeValidator(_cron)] = DEFAULT_MAINTENANCE_CRON
    # A session inconclusive for an infrastructure cause is verified again after
    # retry_base_s, then twice as long after each inconclusive run, at most retry_cap_s
    # apart, until it has had retry_max_runs inconclusive runs.
    retry_base_s: Seconds = 300.0
    retry_cap_s: Seconds = 21600.0
    retry_max_runs: PositiveInt = 8
    # Re-check delivered sessions this long after their verdict (did the branch lose the
    # change?); 0: never.
    recheck_delivered_s: Annotated[float, Field(ge=0, strict=True)] = 0.0
    # A webhook delivery that failed is tried again after webhook_retry_base_s, then twice
    # as long after each failure, until webhook_max_attempts attempts (then: failed).
    webhook_retry_base_s: Seconds = 30.0
    webhook_max_attempts: PositiveInt = 6
    # The API's address as webhook receivers reach it: the session url in a notification.
    public_url: Text = ""

    @model_validator(mode="after")
    def _cap_over_base(self) -> ServiceConfig:
        if self.retry_cap_s < self.retry_base_s:
            raise ValueError("retry_cap_s must be at least retry_base_s")
        return self


def default_signing_key() -> Path:
    """Where `verifier keys create` writes the evidence signing key: the user's data directory."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "verifier" / "evidence-signing-key.pem"


def _signing_key(value: Any) -> Any:
    return default_signing_key() if value == "" else value


@dataclass(frozen=True, config=_STRICT)
class EvidenceConfig:
    """Evidence bundles (verifier/app/evidence.py, docs/evidence.md)."""

    # The Ed25519 private key (PKCS#8 PEM, mode 0600) that signs bundles; made by
    # `verifier keys create`. Empty: evidence-signing-key.pem in the data directory.
    signing_key: Annotated[Path, BeforeValidator(_signing_key)] = field(
        default_factory=default_signing_key
    )


WEBHOOK_EVENTS = ("silent_failure", "verdict")


def _webhook_url(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ValueError(f"expected an http:// or https:// url, got {value!r}")
    if any(c in value for c in "\0\n\r ") or len(value) < len("http://x"):
        raise ValueError(f"expected a url without spaces or line breaks, got {value!r}")
    return value


def _events(value: Any) -> Any:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(v, str) and v in WEBHOOK_EVENTS for v in value)
    ):
        raise ValueError(
            f"expected a non-empty list of {', '.join(map(repr, WEBHOOK_EVENTS))}, got {value!r}"
        )
    return tuple(dict.fromkeys(value))


def _env_name(value: Any) -> Any:
    import re

    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(f"expected the name of an environment variable, got {value!r}")
    return value


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _public_key(value: Any) -> Any:
    """``ed25519:<base64 of the 32-byte key>`` or ``ed25519:<path>`` (a PEM public key, or a
    file holding the base64): checked here, kept as ``ed25519:<base64>``."""
    if not isinstance(value, str) or not value.startswith("ed25519:"):
        raise ValueError(f'expected "ed25519:<base64 or path>", got {value!r}')
    rest = value.removeprefix("ed25519:")
    raw = _raw_ed25519(rest)
    if raw is None:
        path = Path(rest)
        if not path.is_absolute():
            raise ValueError(f"{rest!r} is neither a base64 Ed25519 key nor an absolute path")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read the key file {rest!r}: {exc.strerror}") from None
        raw = _raw_ed25519(data.decode("ascii", "replace").strip()) or _pem_ed25519(data)
        if raw is None:
            raise ValueError(
                f"{rest!r} holds no Ed25519 public key (PEM, or base64 of its 32 bytes)"
            )
    return "ed25519:" + base64.b64encode(raw).decode("ascii")


def _raw_ed25519(text: str) -> bytes | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def _pem_ed25519(data: bytes) -> bytes | None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        return None
    if not isinstance(key, Ed25519PublicKey):
        return None
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _public_keys(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError(f'expected a list of "ed25519:<base64 or path>", got {value!r}')
    out = []
    for i, item in enumerate(value):
        try:
            out.append(_public_key(item))
        except ValueError as exc:
            raise ValueError(f"[{i}]: {exc}") from None
    return tuple(out)


def _optional_env_name(value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not _ENV_NAME.fullmatch(value)):
        raise ValueError(f"expected the name of an environment variable, got {value!r}")
    return value


@dataclass(frozen=True, config=_STRICT)
class WebhookConfig:
    """One receiver of notifications (verifier/app/notify.py): ``[webhooks.NAME]``.

    The signing secret is read from the environment variable `secret_env` when a
    delivery is sent; it is never written in a configuration file.
    """

    name: str
    url: Annotated[Text, BeforeValidator(_webhook_url)]
    secret_env: Annotated[Text, BeforeValidator(_env_name)]
    # silent_failure: a done session found not delivered; verdict: every recorded run.
    events: Annotated[tuple[str, ...], BeforeValidator(_events)] = ("silent_failure",)
    timeout_s: Seconds = Field(default=5.0, alias="timeout")

    @model_validator(mode="before")
    @classmethod
    def _no_secret(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "secret" in data:
            raise ValueError(
                "secret: a secret is never written in a config file; set secret_env to the "
                "name of the environment variable that holds it"
            )
        return data


@dataclass(frozen=True, config=_STRICT)
class AgentConfig:
    """What the verifier trusts of one agent, by the name its reports give
    (``agent.name``): the keys its reports must be signed with, and whether its
    trails must have been witnessed (verifier/contract/signatures.py, docs/security.md)."""

    name: str
    # Ed25519 public keys, each "ed25519:<base64 of 32 bytes>" or "ed25519:<path>".
    public_keys: Annotated[tuple[str, ...], BeforeValidator(_public_keys)] = ()
    # The environment variable holding the HMAC-SHA256 secret: never the secret in a file.
    hmac_secret_env: Annotated[str | None, BeforeValidator(_optional_env_name)] = None
    # Every entry of the trail must have been seen by the witness, else inconclusive.
    require_witness: bool = Field(default=False, strict=True)

    @property
    def has_keys(self) -> bool:
        """Signed reports only: an unsigned or badly signed one is refused at ingest."""
        return bool(self.public_keys) or self.hmac_secret_env is not None


def _database_url(value: Any) -> Any:
    return default_database_url() if value == "" else value


def _unset(value: Any) -> Any:
    return None if value == "" else value


def _mirror_cache(value: Any) -> Any:
    return default_mirror_cache() if value == "" else value


@dataclass(frozen=True, config=_STRICT)
class Config:
    database_url: Annotated[Text, BeforeValidator(_database_url)] = field(
        default_factory=default_database_url
    )
    test_timeout_s: Seconds = Field(default=DEFAULT_TEST_TIMEOUT_S, alias="test_timeout")
    network_isolation: Literal["auto", "required", "off"] = "auto"
    output_excerpt_bytes: PositiveInt = 8192
    max_snapshot_bytes: PositiveInt = 2 * 1024**3
    # Files and links in that copy: counted while the listing is read, before writing.
    max_snapshot_files: PositiveInt = 100_000
    # Host paths every sandboxed run sees read-only, beyond the system and the toolchain.
    sandbox_read_only: Paths = ()
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # A report is read whole before it is parsed: a larger one is refused while streaming.
    max_report_bytes: PositiveInt = DEFAULT_MAX_REPORT_BYTES
    profiles_dir: Path = field(default_factory=resources.profiles_dir)
    # The bare mirrors of repositories given by url, one per url, each with its lock file.
    mirror_cache: Annotated[Path, BeforeValidator(_mirror_cache)] = field(
        default_factory=default_mirror_cache
    )
    # Seconds one fetch into a mirror may take before git is killed (inconclusive).
    fetch_timeout_s: Seconds = Field(default=DEFAULT_FETCH_TIMEOUT_S, alias="fetch_timeout")
    # Keep conclusive test results by the tree tested, and reuse them (off: every
    # verification runs the tests, e.g. for a suite known to be flaky).
    test_result_cache: bool = True
    # Seconds each check may take (changes, audit, replay); the tests check gets the test
    # timeout plus this. `check_deadlines` sets one check's, by name ({tests = 900}).
    # Out of time: inconclusive, `<check>.deadline_exceeded`.
    check_deadline_s: Seconds = Field(default=120.0, alias="check_deadline")
    check_deadlines: Mapping[str, Seconds] = field(default_factory=dict)
    # What the replay check may spend: bytes joined, scanned and hashed, and the largest
    # file it replays; more is inconclusive (replay.budget_exceeded).
    replay_max_work_bytes: PositiveInt = 8 * 1024**3
    replay_max_file_bytes: PositiveInt = 64 * 1024**2
    # The operator's tasks (`verifier.tasks.load_tasks_file`). Unset: tasks.toml beside the
    # configuration file, when there is one.
    tasks_file: Annotated[Path | None, BeforeValidator(_unset)] = None
    repositories: Mapping[str, RepositoryConfig] = field(default_factory=dict)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    webhooks: Mapping[str, WebhookConfig] = field(default_factory=dict)
    agents: Mapping[str, AgentConfig] = field(default_factory=dict)
    # The file the operator's settings came from; None when only the defaults apply.
    source: Path | None = None

    @classmethod
    def load(
        cls,
        path: Path | None = None,
        environ: Mapping[str, str] | None = None,
        system_dir: Path = SYSTEM_CONFIG_DIR,
    ) -> Config:
        """The configuration of this process: the layers of the module docstring."""
        env = os.environ if environ is None else environ
        source = path if path is not None else find_config_file(env, system_dir)
        if source is not None and not source.is_file():
            what = "does not exist" if not source.exists() else "is not a file"
            raise ConfigError(f"config file {str(source)!r} {what}")
        packaged = resources.default_config_file()
        data = _read_toml(packaged) if packaged.is_file() else {}
        if source is not None:
            data = _merge(data, _read_toml(source))
        config = cls.from_mapping(data, source=source)
        if env.get("VERIFIER_DATABASE_URL"):
            config = cls.from_mapping(
                _merge(data, {"verifier": {"database_url": env["VERIFIER_DATABASE_URL"]}}),
                source=source,
            )
        return config

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: Path | None = None) -> Config:
        """Validate a TOML document whose relative paths are already resolved."""
        tables_known = {"verifier", "repositories", "service", "evidence", "webhooks", "agents"}
        unknown = set(data) - tables_known
        if unknown:
            raise ConfigError(
                f"unknown tables {sorted(unknown)}: expected verifier, repositories, service, "
                "evidence, webhooks, agents"
            )
        agents = _named_tables(data.get("agents", {}), "agents")
        main, repos = data.get("verifier", {}), data.get("repositories", {})
        service, evidence = data.get("service", {}), data.get("evidence", {})
        tables_in = (
            ("verifier", main),
            ("repositories", repos),
            ("service", service),
            ("evidence", evidence),
        )
        for key, table in tables_in:
            if not isinstance(table, Mapping):
                raise ConfigError(f"{key}: expected a table")
        tables = {}
        for name, table in repos.items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"repositories.{name}: expected a table")
            tables[name] = {**_results_table(table, f"repositories.{name}.results"), "name": name}
        hooks = _named_tables(data.get("webhooks", {}), "webhooks")
        try:
            return _CONFIG.validate_python(
                {
                    **main,
                    "repositories": tables,
                    "service": service,
                    "evidence": evidence,
                    "webhooks": hooks,
                    "agents": agents,
                    "source": source,
                }
            )
        except ValidationError as exc:
            raise _config_error(exc, source) from None

    def repository(self, name: str) -> RepositoryConfig:
        """The configuration of repository `name`; the defaults when it is not registered."""
        return self.repositories.get(name) or RepositoryConfig(name=name)

    def tasks_location(self) -> tuple[Path | None, bool]:
        """Where the operator's tasks file is, and whether it must exist: the ``tasks_file``
        set (required), else ``tasks.toml`` beside the configuration file (optional), else
        none."""
        if self.tasks_file is not None:
            return self.tasks_file, True
        if self.source is not None:
            return self.source.resolve().parent / TASKS_NAME, False
        return None, False

    def settings(self) -> dict[str, Any]:
        """The effective settings as plain data, the database password masked."""
        data: dict[str, Any] = _CONFIG.dump_python(self, mode="json", by_alias=True)
        data["database_url"] = mask_url(self.database_url)
        return data


_CONFIG = TypeAdapter(Config)


def find_config_file(
    environ: Mapping[str, str], system_dir: Path = SYSTEM_CONFIG_DIR
) -> Path | None:
    """The operator's configuration file, by the search order; None when there is none."""
    if environ.get("VERIFIER_CONFIG"):
        return Path(environ["VERIFIER_CONFIG"])
    for candidate in config_candidates(environ, system_dir):
        if candidate.is_file():
            return candidate
    return None


def config_candidates(
    environ: Mapping[str, str], system_dir: Path = SYSTEM_CONFIG_DIR
) -> list[Path]:
    """Where a configuration file is looked for when none is named."""
    xdg = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(xdg) / "verifier" / CONFIG_NAME, system_dir / CONFIG_NAME]


def mask_url(url: str) -> str:
    """A database URL with its password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
    return _absolute_paths(data, path.resolve().parent)


def _absolute_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Resolve the relative path values of one file against its folder."""

    def fix(table: Any, keys: tuple[str, ...]) -> Any:
        if not isinstance(table, dict):
            return table
        return {
            k: str(base / v) if k in keys and isinstance(v, str) and v else v
            for k, v in table.items()
        }

    out = dict(data)
    if "verifier" in out:
        out["verifier"] = fix(out["verifier"], _PATH_KEYS["verifier"])
    if "evidence" in out:
        out["evidence"] = fix(out["evidence"], _PATH_KEYS["evidence"])
    if isinstance(out.get("agents"), dict):
        out["agents"] = {name: _relative_keys(table, base) for name, table in out["agents"].items()}
    if isinstance(out.get("repositories"), dict):
        out["repositories"] = {
            name: fix(table, _PATH_KEYS["repository"])
            for name, table in out["repositories"].items()
        }
    return out


def _relative_keys(table: Any, base: Path) -> Any:
    """An agent's ``ed25519:<path>`` keys, relative to the folder of their file."""
    if not isinstance(table, dict) or not isinstance(table.get("public_keys"), list):
        return table
    keys = []
    for key in table["public_keys"]:
        if isinstance(key, str) and key.startswith("ed25519:"):
            rest = key.removeprefix("ed25519:")
            if rest and _raw_ed25519(rest) is None and not rest.startswith("/"):
                key = "ed25519:" + str(base / rest)
        keys.append(key)
    return {**table, "public_keys": keys}


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, tables merged key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _results_table(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """TOML's ``results = { junit = [globs] }`` as the two fields of `RepositoryConfig`."""
    out = dict(table)
    value = out.pop("results", "auto")
    if value in ("auto", "exit-code"):
        return {**out, "results": value}
    if not isinstance(value, Mapping) or set(value) != {"junit"}:
        raise ConfigError(
            f'{where}: expected "auto", "exit-code" or {{ junit = [globs] }}, got {value!r}'
        )
    globs = value["junit"]
    if not isinstance(globs, list) or not globs or not all(isinstance(g, str) for g in globs):
        raise ConfigError(f"{where}.junit: expected a list of glob strings, got {globs!r}")
    for glob in globs:
        parts = glob.replace("\\", "/").split("/")
        if not glob or glob.startswith("/") or ".." in parts or "\0" in glob:
            raise ConfigError(
                f"{where}.junit: {glob!r} is not a relative path inside the repository"
            )
    return {**out, "results": "junit", "results_junit": globs}


def _named_tables(tables: Any, key: str) -> dict[str, Any]:
    """``[key.NAME]`` tables, each given its name."""
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{key}: expected a table")
    named = {}
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"{key}.{name}: expected a table")
        named[name] = {**table, "name": name}
    return named


def _config_error(exc: ValidationError, source: Path | None) -> ConfigError:
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    if loc and loc[0] not in ("repositories", "service", "evidence", "webhooks", "agents"):
        loc.insert(0, "verifier")
    problem = error["msg"]
    if error["type"] == "unexpected_keyword_argument":
        problem = "unknown key"
    elif error["type"] == "value_error":
        problem = problem.removeprefix("Value error, ")
    elif "input" in error and error["type"] != "missing":
        problem = f"{problem} (got {error['input']!r})"
    where = f"{source}: " if source is not None else ""
    return ConfigError(f"config {where}{'.'.join(loc) or '$'}: {problem}")
