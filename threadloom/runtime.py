"""The composition root: settings, store and services, built once per process."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, ParamSpec, TypeVar

import anyio
import anyio.to_thread

from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.coordination.presence import HEARTBEAT_S, PresenceService
from threadloom.coordination.signals import SignalService
from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.coordination.waiting import CHANNEL, SignalWaiters
from threadloom.errors import ThreadloomError
from threadloom.memory.core import CoreMemory
from threadloom.memory.maintenance import Maintenance
from threadloom.memory.reactivation import FLUSH_INTERVAL_S, REINFORCE_INTERVAL_S, Reactivations
from threadloom.memory.recall import MemoryRecall
from threadloom.memory.scoring import ScoringConfig
from threadloom.memory.service import LinkingConfig, MemoryService
from threadloom.scrub import Scrubber
from threadloom.search.embedders import LazyEmbedder
from threadloom.search.engine import SearchEngine
from threadloom.sessions import SessionInfo, SessionService
from threadloom.status import StatusService
from threadloom.store.base import Store
from threadloom.store.select import open_selected
from threadloom.store.sqlite import ensure_private_dir
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.notes import NoteService
from threadloom.threads.service import ThreadService

Mode = Literal["daemon", "in-process", "http", "cli"]
EMBED_INTERVAL_S = 5.0
# How often a serving process looks for sessions past the liveness bound (a read; a write only when
# one is found): a killed session's claims are released at most LIVENESS_MS + this after it was last seen.
LIVENESS_SWEEP_S = 15.0
EMBED_LOOKBACK_MS = 60_000
log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class Runtime:
    settings: Settings
    store: Store
    mode: Mode
    sessions: SessionService
    status: StatusService
    search: SearchEngine
    embedder: LazyEmbedder
    memory: MemoryService
    recall: MemoryRecall
    core: CoreMemory
    maintenance: Maintenance
    threads: ThreadService
    notes: NoteService
    hygiene: ThreadHygiene
    presence: PresenceService
    signals: SignalService
    spawner: SpawnService
    started_at_ms: int = field(default_factory=now_ms)
    _started_monotonic: float = field(default_factory=time.monotonic)
    live: dict[str, SessionInfo] = field(default_factory=dict)
    store_lock_fd: int | None = None
    waiters: SignalWaiters = field(init=False)
    scrubber: Scrubber = field(init=False)

    def __post_init__(self) -> None:
        self.waiters = SignalWaiters(lambda: self.call(self.signals.latest_id), lambda: self.store.listen(CHANNEL))
        # What every write path scrubs credentials with before it persists text (THREADLOOM_SCRUB_SECRETS).
        self.scrubber = Scrubber(self.settings.scrub_secrets)
        self.memory.scrubber = self.notes.scrubber = self.signals.scrubber = self.threads.scrubber = self.scrubber
        self.spawner.scrubber = self.scrubber  # the command a task ran (a custom one may carry a key)
        self.recall.egress = self.settings.egress  # which models may receive the user's quotes

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self._started_monotonic

    @property
    def pid(self) -> int:
        return os.getpid()

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run blocking store or model work off the event loop."""
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    def start_embedder(self) -> None:
        """Begin loading the vector model in the background (once); search uses it when it is ready."""
        self.embedder.start()

    def embedder_state(self) -> dict[str, object]:
        loaded = self.embedder.get()
        state = "not started" if not self.embedder.started else "loading" if self.embedder.loading else "ready"
        if self.embedder.error:
            state = "failed: " + self.embedder.error
        elif not self.embedder.loading and loaded is None and self.embedder.started:
            state = "none configured"
        return {
            "setting": self.settings.embedder,
            "state": state,
            "fingerprint": loaded.fingerprint if loaded else None,
        }

    async def run_background_jobs(self) -> None:
        """Every background job of a serving process, until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.keep_vectors_current)
            tg.start_soon(self.keep_memories_maintained)
            tg.start_soon(self.keep_recalls_recorded)
            tg.start_soon(self.waiters.poll)
            tg.start_soon(self.keep_sessions_present)
            tg.start_soon(self.keep_sessions_live)

    async def keep_sessions_present(self) -> None:
        """Heartbeat: a connected session counts as present even while it only waits (and one expired while
        this process slept is resumed)."""
        while True:
            await anyio.sleep(HEARTBEAT_S)
            try:
                resumed = await self.call(self.presence.heartbeat, list(self.live))
            except ThreadloomError as exc:
                log.warning("heartbeat failed: %s", exc.message)
                continue
            if resumed:
                log.info("resumed %d session(s) expired while this process was away", len(resumed))

    async def keep_sessions_live(self) -> None:
        """Liveness from the heartbeat, not a clean close: end the sessions of any process that stopped
        heartbeating (killed -9, OOM-killed), release their thread claims, and record the spawned tasks
        whose spawning process died as their supervisors saw them end. Idempotent, so every serving
        process may run it."""
        while True:
            await anyio.sleep(min(LIVENESS_SWEEP_S, self.settings.node_beat_s))  # the sweep beats the node's lease
            try:
                expired = await self.call(self.presence.expire_absent, list(self.live))
                released = await self.call(self.hygiene.release_orphans) if expired else 0
                settled = await self.call(self.spawner.settle)  # children whose spawning process died
            except ThreadloomError as exc:
                log.warning("liveness sweep failed: %s", exc.message)
                continue
            if expired:
                log.info("expired %d silent session(s), released %d thread claim(s)", len(expired), released)
            if settled:
                log.info("recorded %d task(s) whose spawning process had gone", settled)

    async def keep_recalls_recorded(self) -> None:
        """Journal the recalls waiting (memory/reactivation.py), in one transaction, every few seconds (a
        failed write keeps them for the next); every REINFORCE_INTERVAL_S, reinforce what was recalled."""
        reactivations = self.recall.reactivations
        reinforced = time.monotonic()
        while True:
            await anyio.sleep(FLUSH_INTERVAL_S)
            try:
                if reactivations.waiting():
                    await self.call(reactivations.flush)
                if time.monotonic() - reinforced >= REINFORCE_INTERVAL_S:
                    reinforced = time.monotonic()
                    await self.call(self.maintenance.apply_recalls)
            except ThreadloomError as exc:
                log.warning("recording recalls failed, kept for the next try: %s", exc.message)

    async def keep_memories_maintained(self) -> None:
        """Background job, every `maintenance_interval` seconds (0: never): the memory maintenance pass
        (single-flight across processes) and releasing thread claims of sessions that ended."""
        interval = self.settings.maintenance_interval
        if interval <= 0:
            return
        while True:
            await anyio.sleep(interval)
            try:
                await self.call(self.recall.reactivations.flush)  # the pass scores what was recalled
                report = await self.call(self.maintenance.run)
                released = await self.call(self.hygiene.release_orphans)
            except ThreadloomError as exc:
                log.warning("maintenance failed: %s", exc.message)
                continue
            if released:
                log.info("released %d thread claim(s) of ended sessions", released)
            if report.ran and (report.pruned or report.transitions):
                log.info("memory maintenance: %s", report.as_dict())

    async def keep_vectors_current(self) -> None:
        """Background job: embed new and changed documents once the model is loaded.

        The first pass looks at every document; later ones only at those written since the
        previous pass began (less a margin for writers whose clocks or commits lag).
        """
        since = 0
        while True:
            await anyio.sleep(EMBED_INTERVAL_S)
            if self.search.embedder is None:
                continue
            started = now_ms()
            try:
                count = await self.call(self.search.embed_pending, None, since)
                since = started - EMBED_LOOKBACK_MS
            except ThreadloomError as exc:
                log.warning("embedding pass failed: %s", exc.message)
                continue
            if count:
                log.info("embedded %d document(s)", count)

    def close(self) -> None:
        self.recall.reactivations.close()
        self.store.close()
        if self.store_lock_fd is not None:
            os.close(self.store_lock_fd)
            self.store_lock_fd = None


def hold_store_lock(settings: Settings) -> int:
    """A shared lock that says "a server is using this store" for as long as the fd stays open (the home is
    made first: every command that opens the store takes this lock, on a fresh machine too)."""
    ensure_private_dir(settings.home)
    fd = os.open(settings.layout.store_lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while `backup restore` holds it exclusively
    return fd


def open_settings_store(settings: Settings) -> Store:
    """The store the settings name: PostgreSQL at THREADLOOM_STORE_URL, else the home's SQLite file."""
    url = settings.store_url.get_secret_value() if settings.store_url is not None else None
    return open_selected(
        url, settings.layout.database, busy_timeout_ms=settings.busy_timeout_ms, write_attempts=settings.write_attempts
    )


@contextmanager
def settings_store(settings: Settings) -> Iterator[Store]:
    """The store the settings name, opened under the store lock, for a command that needs no runtime."""
    lock = hold_store_lock(settings)
    try:
        store = open_settings_store(settings)
        try:
            yield store
        finally:
            store.close()
    finally:
        os.close(lock)


def open_runtime(settings: Settings, mode: Mode) -> Runtime:
    lock_fd = hold_store_lock(settings)
    store = open_settings_store(settings)
    search = SearchEngine(store)
    scoring = scoring_config(settings)
    memory = MemoryService(store, search, scoring, LinkingConfig(max_auto_links=settings.memory_max_auto_links))
    threads = ThreadService(store, search, settings.author)
    return Runtime(
        settings=settings,
        store=store,
        mode=mode,
        sessions=SessionService(store),
        status=StatusService(store),
        search=search,
        embedder=LazyEmbedder(settings, on_ready=search.attach_embedder),
        memory=memory,
        recall=MemoryRecall(store, search, scoring, Reactivations(store)),
        core=CoreMemory(store, memory),
        maintenance=Maintenance(store, scoring),
        threads=threads,
        notes=NoteService(store, search, threads),
        hygiene=ThreadHygiene(store, threads),
        presence=PresenceService(store),
        signals=SignalService(store),
        spawner=SpawnService(
            store,
            settings.home,
            SpawnConfig(
                max_children=settings.spawn_max_children,
                memory_budget_mb=settings.spawn_memory_mb,
                grace_s=settings.spawn_grace_s,
                command=settings.spawn_command,
                daily_tokens=settings.spawn_daily_tokens,
                daily_cost_usd=settings.spawn_daily_cost_usd,
                toolset=settings.toolset,
                node=settings.node,
                node_lease_ms=round(settings.node_lease_seconds * 1000),
            ),
        ),
        store_lock_fd=lock_fd,
    )


def scoring_config(settings: Settings) -> ScoringConfig:
    return ScoringConfig(
        half_life_days=settings.memory_half_life_days,
        min_connectivity=settings.memory_min_connectivity,
        min_reactivation=settings.memory_min_reactivation,
        dormant_below=settings.memory_dormant_below,
        fading_below=settings.memory_fading_below,
        forget_below=settings.memory_forget_below,
        min_idle_days=settings.memory_min_idle_days,
        archive_days=settings.retention_restore_days,
    )
