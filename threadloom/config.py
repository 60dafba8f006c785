"""Settings: `THREADLOOM_*` environment variables over `<home>/.env` over defaults.

Built once, by `load_settings()`, in the composition root (the CLI entry or the
daemon); nothing reads configuration at import time.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from threadloom.agents import PER_SESSION_KEYS
from threadloom.errors import ConfigError, InvalidInput
from threadloom.home import HomeLayout, default_home
from threadloom.identity import check_user

ENV_PREFIX = "THREADLOOM_"
# The largest Unix socket path the kernel accepts is 108 bytes including the NUL.
MAX_SOCKET_PATH = 104
# Passages the local model embeds at once, each run on one thread (search/local_model.py says why not two per run).
LOCAL_EMBEDDER_THREADS = 2
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MIN_DAEMON_MEMORY_MB = 32  # a cap below what the interpreter alone holds would only restart it
# A node beats its lease at least every sixth of it: six missed beats, and other nodes take its tasks for lost.
# Under 6 s the beat would come more than once a second.
MIN_NODE_LEASE_S = 6


RETENTION_FIELDS = tuple(f"retention_{kind}_days" for kind in ("transcripts", "signals", "journal", "tasks", "restore"))
MAX_RETENTION_DAYS = 36_500  # a hundred years: the way to say "keep"


def retention_days(value: object) -> int:
    """A retention window: whole days from 1 to MAX_RETENTION_DAYS. Zero, a negative number or a word would
    otherwise read as "keep nothing", so each is refused at load rather than deleting everything."""
    text = str(value).strip()
    keep = f"give 1-{MAX_RETENTION_DAYS} days ({MAX_RETENTION_DAYS} keeps everything)"
    if isinstance(value, bool) or not re.fullmatch(r"[+-]?[0-9]{1,12}", text):
        raise ValueError(f"{value!r} is not a whole number of days; {keep}")
    days = int(text)
    if days < 1:
        raise ValueError(f"{days} days would delete everything of this kind at once; {keep}")
    if days > MAX_RETENTION_DAYS:
        raise ValueError(f"{days} days is past {MAX_RETENTION_DAYS}; {keep}")
    return days


def _login_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local"


class Settings(BaseSettings):
    """Every setting threadloom reads. The environment name is `THREADLOOM_` + the field name in capitals."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    home: Path = Field(default_factory=default_home, description="Folder of the store, socket and .env.")
    toolset: str = Field("default", description="Comma-separated tool groups, or `full`.")
    log_level: str = Field("WARNING", description="Logging level for stderr and the daemon log.")
    daemon_idle_timeout: float = Field(
        900.0, ge=0, description="Seconds the daemon stays up with no session; 0 keeps it up."
    )
    daemon_memory_mb: int = Field(
        1024,
        ge=0,
        le=1 << 20,
        description="The daemon's own resident memory cap (MB; 0: none): over it, the "
        "model is unloaded, then the daemon restarts itself.",
    )
    daemon_client_stall_s: float = Field(
        60.0, ge=1, le=3600, description="Seconds a daemon session may leave its answers unread before it is dropped."
    )
    daemon_log_max_kb: int = Field(
        10240, ge=16, le=1 << 22, description="Size (KB) at which the daemon log is rotated to daemon.log.1."
    )
    daemon_log_keep: int = Field(3, ge=1, le=100, description="Rotated daemon logs kept (daemon.log.1 ... .N).")
    busy_timeout_ms: int = Field(2000, ge=0, description="How long one write waits on a locked store.")
    write_attempts: int = Field(5, ge=1, description="Attempts of one write transaction when the store is busy.")
    store_url: SecretStr | None = Field(
        None, description="postgresql://... to keep the store in PostgreSQL (with pgvector); unset: SQLite in the home."
    )
    http_token: SecretStr | None = Field(None, description="Bearer token required by `serve --http` when set.")
    http_allowed_origins: str = Field("", description="Extra comma-separated Origin values accepted by `serve --http`.")
    http_roots: str = Field(
        "", description="Comma-separated absolute folders an HTTP client may name as its root, beyond the server's own."
    )
    http_header_timeout: float = Field(
        10.0, gt=0, le=300, description="Seconds an HTTP client has to send a request's headers."
    )
    http_max_connections: int = Field(
        1024, ge=8, le=65536, description="Connections `serve --http` holds at once (fewer if open files are short)."
    )
    http_account_sessions: int = Field(
        256, ge=1, le=10000, description="MCP sessions one account may hold open at once on a team server node."
    )
    embedder: Literal["auto", "local", "openai", "none"] = Field(
        "auto", description="Vector embedder: the bundled local model when installed (auto), local, openai or none."
    )
    embedder_threads: int = Field(
        LOCAL_EMBEDDER_THREADS, ge=1, le=64, description="Passages the local embedder runs at once, one thread each."
    )
    embedder_url: str = Field("", description="Base URL of an OpenAI-compatible embeddings API (embedder=openai).")
    embedder_model: str = Field("", description="Model name for the OpenAI-compatible embeddings API.")
    embedder_api_key: SecretStr | None = Field(None, description="API key for the embeddings API, if it needs one.")
    user: str = Field(
        default_factory=_login_name, min_length=1, max_length=100, description="Who owns the memories written here."
    )
    author: str = Field("", max_length=100, description="Author id on thread files; empty: from git config.")
    org: str = Field("", max_length=100, description="The user's organisation (org visibility); empty: the user.")
    spawn_command: str = Field(
        "", description="Command template for spawned agents (agent=custom); `{model}` is replaced, prompt on stdin."
    )
    spawn_max_children: int = Field(4, ge=1, le=64, description="Spawned agents that may run at once.")
    spawn_memory_mb: int = Field(4096, ge=64, description="Resident memory the running children may hold together.")
    spawn_daily_tokens: int = Field(
        0, ge=0, description="Tokens children may use in 24 h (as their CLIs report); 0: no ceiling."
    )
    spawn_daily_cost_usd: float = Field(0.0, ge=0, description="Dollars children may spend in 24 h; 0: no ceiling.")
    spawn_grace_s: float = Field(5.0, ge=0, le=300, description="Seconds between SIGTERM and SIGKILL at a timeout.")
    node: str = Field(
        "",
        max_length=64,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="This server's name among several on one database; empty: its machine's (spawned tasks' owner).",
    )
    node_lease_seconds: float = Field(
        90.0,
        ge=MIN_NODE_LEASE_S,
        le=3600,
        description="Seconds other nodes count this node's tasks as running past its last beat (at least every sixth).",
    )
    maintenance_interval: float = Field(
        600.0, ge=0, description="Seconds between memory maintenance passes in the daemon; 0 turns them off."
    )
    memory_half_life_days: float = Field(30.0, gt=0, description="Idle days that halve a memory's relevance.")
    memory_min_connectivity: float = Field(
        0.3, gt=0, le=1, description="Connectivity factor of a memory with no edges."
    )
    memory_min_reactivation: float = Field(
        0.5, gt=0, le=1, description="Reactivation factor of a never-recalled memory."
    )
    memory_dormant_below: float = Field(0.1, ge=0, le=1, description="Score under which a memory is dormant.")
    memory_fading_below: float = Field(0.04, ge=0, le=1, description="Score under which a memory is fading.")
    memory_forget_below: float = Field(0.01, ge=0, le=1, description="Score under which a memory may be pruned.")
    memory_min_idle_days: float = Field(30.0, ge=0, description="Idle days before a memory may be pruned.")
    memory_max_auto_links: int = Field(3, ge=0, le=20, description="Auto-links per stored memory; 0 turns them off.")
    scrub_secrets: bool = Field(
        True, description="Replace credentials with [secret:<kind>] before text is stored; false keeps it verbatim."
    )
    ingest: bool = Field(True, description="Ingest agent CLIs' local transcripts (daemon, session end, CLI).")
    ingest_interval: float = Field(
        30.0, ge=0, description="Seconds between the daemon's transcript passes; 0: only at session end and by CLI."
    )
    ingest_exclude: str = Field(
        "", description="Comma-separated folder globs whose transcripts are never stored (a folder excludes below it)."
    )
    ingest_children: bool = Field(True, description="Ingest the transcripts of agents threadloom spawned.")
    learn_extract: bool = Field(False, description="Queue decision- and rule-shaped utterances as learning candidates.")
    learn_extract_interval: float = Field(
        600.0, ge=0, description="Seconds between the daemon's extract passes (learn_extract on); 0: only by CLI."
    )
    learn_review: bool = Field(False, description="Spawn a reviewer (learn_agent) over the pending candidates.")
    learn_review_interval: float = Field(3600.0, gt=0, description="Seconds between candidate reviewer passes.")
    learn_auto_review: bool = Field(
        False, description="Spawn a reviewer over a finished thread with at least 5 notes, for lasting lessons."
    )
    learn_shadow: bool = Field(False, description="Spawn a reviewer over recent user turns, for class-level rules.")
    learn_shadow_interval: float = Field(900.0, gt=0, description="Seconds between shadow review passes.")
    learn_agent: Literal["claude", "custom"] = Field(
        "claude", description="The reviewers' agent: claude (its own tools off) or custom (THREADLOOM_SPAWN_COMMAND)."
    )
    learn_daily_tokens: int = Field(
        400_000, ge=0, description="Tokens each reviewer loop's children may use in 24 h (their usage lines)."
    )
    learn_curate: bool = Field(False, description="Let the scheduled curator review skills and lessons.")
    learn_curate_review: bool = Field(
        False, description="After a curator pass, spawn a reviewer (learn_agent) for its repair and split findings."
    )
    learn_curate_delete_budget: int = Field(5, ge=0, le=100, description="Entries a curator pass may delete or merge.")
    learn_stale_days: float = Field(90.0, gt=0, description="Days without view, use or edit before deprecation.")
    learn_retention_days: float = Field(30.0, gt=0, description="Days snapshots and trashed entries are kept.")
    learn_insight_votes: int = Field(3, ge=1, le=1000, description="Net votes an insight needs to be exported.")
    probe_interval: float = Field(
        21600.0, ge=0, description="Seconds between the daemon's self-tests (doctor --probe); 0 turns them off."
    )
    consolidate_interval: float = Field(
        86400.0, ge=0, description="Seconds between the daemon's consolidation passes; 0 turns them off."
    )
    consolidate_apply: bool = Field(
        False, description="Let the daemon's consolidation pass merge and release; else it only reports (dry run)."
    )
    usermodel_mine: bool = Field(
        False, description="Mine the user's messages and memories for preference, habit and value hypotheses."
    )
    usermodel_validate: bool = Field(
        False, description="Spawn an agent (THREADLOOM_USERMODEL_AGENT) to weigh what the miner observed."
    )
    usermodel_interval: float = Field(
        900.0, ge=0, description="Seconds between the daemon's user-model passes; 0: only `threadloom user mine`."
    )
    usermodel_agent: Literal["claude", "custom"] = Field(
        "claude", description="The validator's agent: claude (its own tools off) or custom (THREADLOOM_SPAWN_COMMAND)."
    )
    retention_transcripts_days: int = Field(365, description="Days ingested transcript messages are kept.")
    retention_signals_days: int = Field(30, description="Days signals (whispers, broadcasts, asks) are kept.")
    retention_journal_days: int = Field(
        90, description="Days the journal (events, tool-call records, job runs, self-test results) is kept."
    )
    retention_tasks_days: int = Field(30, description="Days a finished spawned task's row and logs are kept.")
    retention_restore_days: int = Field(30, description="Days a pruned memory stays restorable.")
    retention_interval: float = Field(
        86400.0, ge=0, description="Seconds between the daemon's retention and compaction passes; 0 turns them off."
    )
    egress: Literal["all", "same-vendor", "none"] = Field(
        "all",
        description="Which vendors' models receive personal memory (claims, style, profile, quotes): all, "
        "same-vendor (the company whose CLI recorded it) or none.",
    )

    @property
    def layout(self) -> HomeLayout:
        return HomeLayout(self.home)

    @property
    def node_beat_s(self) -> float:
        """How often a serving node refreshes its lease while it has tasks: a sixth of the lease."""
        return self.node_lease_seconds / 6

    def allowed_origins(self) -> list[str]:
        return [o.strip() for o in self.http_allowed_origins.split(",") if o.strip()]

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("user", "author", "org")
    @classmethod
    def _a_name(cls, value: str) -> str:
        """The rule each session's identity is checked by (identity.check_user), said when the settings load:
        `stats` took a THREADLOOM_USER with a NUL that `memory store` refused."""
        if value:
            try:
                check_user(value, "a name")
            except InvalidInput:
                raise ValueError("1-100 printable characters without surrounding spaces") from None
        return value

    @field_validator("daemon_memory_mb")
    @classmethod
    def _room_to_start(cls, value: int) -> int:
        if 0 < value < MIN_DAEMON_MEMORY_MB:
            raise ValueError(f"under {MIN_DAEMON_MEMORY_MB} MB no daemon can start; 0 turns the cap off")
        return value

    @field_validator("http_roots")
    @classmethod
    def _absolute_roots(cls, value: str) -> str:
        for root in (r.strip() for r in value.split(",")):
            if root and not Path(root).expanduser().is_absolute():
                raise ValueError(f"{root!r} is not an absolute path")
        return value

    @field_validator(*RETENTION_FIELDS, mode="before")
    @classmethod
    def _retention_days(cls, value: object) -> int:
        return retention_days(value)

    def http_root_paths(self) -> list[Path]:
        return [Path(r.strip()).expanduser() for r in self.http_roots.split(",") if r.strip()]


# Set by threadloom itself in a spawned child's environment for the agent to read (its task id): not a setting.
CHILD_KEYS = frozenset({"THREADLOOM_TASK"})
# Read only by `serve --remote` (server/remote_auth.py), which must not need a home's settings to start.
REMOTE_KEYS = frozenset({"THREADLOOM_REMOTE_TOKEN", "THREADLOOM_REMOTE_PROJECT", "THREADLOOM_REMOTE_TIMEOUT"})


def known_env_keys() -> frozenset[str]:
    names = frozenset(ENV_PREFIX + name.upper() for name in Settings.model_fields)
    return names | set(PER_SESSION_KEYS) | CHILD_KEYS | REMOTE_KEYS


def _read_env_file_keys(path: Path) -> list[str]:
    if not path.is_file():
        return []
    keys = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or "=" not in stripped:
            continue
        key = stripped.split("=", 1)[0].removeprefix("export ").strip()
        keys.append(key)
    return keys


def unknown_keys(environ: Mapping[str, str], env_file: Path) -> list[str]:
    """`THREADLOOM_*` names in the environment or the .env file that no setting reads."""
    known = known_env_keys()
    seen = [k for k in environ if k.upper().startswith(ENV_PREFIX)]
    seen += [k for k in _read_env_file_keys(env_file) if k.upper().startswith(ENV_PREFIX)]
    return sorted({k for k in seen if k.upper() not in known})


def load_settings(*, warn: bool = True) -> Settings:
    """Build the settings once from the process environment and `<home>/.env`.

    Unknown `THREADLOOM_*` keys are reported on stderr, not silently ignored.
    """
    env = os.environ
    home = default_home(env)
    layout = HomeLayout(home)
    if warn:
        for key in unknown_keys(env, layout.env_file):
            print(f"threadloom: warning: unknown setting {key} is ignored", file=sys.stderr)
        for key in sorted(set(_read_env_file_keys(layout.env_file)) & set(PER_SESSION_KEYS) - {"THREADLOOM_TOOLSET"}):
            print(
                f"threadloom: warning: {key} belongs to one session; set it in the agent's MCP server env, "
                f"not in {layout.env_file}",
                file=sys.stderr,
            )
    try:
        settings = Settings(_env_file=layout.env_file, home=home)  # type: ignore[call-arg]
    except ValidationError as exc:
        problems = "; ".join(
            f"{ENV_PREFIX}{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from None
    if len(str(settings.layout.socket)) > MAX_SOCKET_PATH:
        raise ConfigError(
            f"THREADLOOM_HOME is too long for a Unix socket path ({settings.layout.socket}); use a shorter one"
        )
    return settings


def configure_logging(settings: Settings) -> None:
    """Logs go to stderr (the daemon's stderr is its log file); stdout stays the protocol's."""
    import logging

    logging.basicConfig(
        level=getattr(logging, settings.log_level.upper(), logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
