"""Core memory: the few memories shown in every brief, each under a key with a priority. A core
memory is a pinned memory with a key, not a second store; categories can become core by
themselves (auto), wait for approval, or never (excluded).
"""

from __future__ import annotations

from threadloom import requests
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.memory.model import MAX_CORE_CHARS, Memory, NewMemory, check_core_key, check_id, content_digest
from threadloom.memory.service import MemoryService
from threadloom.sessions import record_event
from threadloom.store import memories, memory_upkeep
from threadloom.store.base import Store, Writer


class CoreMemory:
    def __init__(self, store: Store, memory: MemoryService) -> None:
        self._store = store
        self._memory = memory

    def set_core(
        self, key: str, content: str, prov: Provenance, priority: int = 50, category: str | None = None
    ) -> Memory:
        """Upsert the core memory under `key`: shown in every brief, highest priority first. A changed
        text supersedes the previous version, which stays for audit."""
        self._checked_key(key)
        content = self._memory.scrubber.text(content)  # compared with the stored text, which is scrubbed
        if not 0 <= priority <= 100:
            raise InvalidInput("priority is 0-100 (higher is shown first)")
        existing = self._store.read(lambda r: memories.by_core_key(r, prov.user, prov.project, key))
        if existing is None:
            stored = self._memory.store(
                NewMemory(content=content, category=category, kind="fact", pinned=True), prov, key, priority
            )
            if not stored.created:
                return self.make_core(stored.memory.id, key, priority, prov)
            return stored.memory
        if content_digest(content) == content_digest(existing.content):
            return self._memory.update_flags(existing.id, prov, "memory.core", core_priority=priority)
        # the call's idempotency key goes with the priority's write: killed between, the retry finds the new text
        with requests.unclaimed():
            result = self._memory.amend(existing.id, prov, content=content, reason=f"core memory {key} rewritten")
        new = self._memory.get(result["new"]["id"], prov)
        return self._memory.update_flags(new.id, prov, "memory.core", core_priority=priority)

    def _checked_key(self, key: str) -> str:
        check_core_key(key)
        if self._memory.scrubber.text(key) != key:  # a key is kept verbatim in the store and the journal
            raise InvalidInput("a core key is a name, and this one looks like a credential; choose another")
        return key

    def make_core(self, memory_id: str, key: str, priority: int, prov: Provenance) -> Memory:
        self._checked_key(key)
        memory = self._memory.owned(check_id(memory_id), prov, "make core")
        if len(memory.content) > MAX_CORE_CHARS:
            raise InvalidInput(f"a core memory is at most {MAX_CORE_CHARS:,} characters: it is shown in every brief")
        taken = self._store.read(lambda r: memories.by_core_key(r, prov.user, memory.project, key))
        if taken is not None and taken.id != memory_id:
            raise InvalidInput(f"you already have core key {key!r} on {taken.id}")
        return self._memory.update_flags(memory_id, prov, "memory.core", core_key=key, core_priority=priority, pinned=1)

    def remove_core(self, key: str, prov: Provenance) -> Memory:
        existing = self._store.read(lambda r: memories.by_core_key(r, prov.user, prov.project, check_core_key(key)))
        if existing is None:
            raise NotFound(f"you have no core memory under {key!r} in this project")
        return self._memory.update_flags(existing.id, prov, "memory.core_removed", core_key=None, core_priority=None)

    def set_preferences(
        self, prov: Provenance, auto: list[str], approval: list[str], excluded: list[str]
    ) -> dict[str, list[str]]:
        """Which categories become core by themselves (auto), wait for approval, or never do (excluded)."""
        scrub = self._memory.scrubber.text  # a category is free text, kept in the store and the journal
        lists = {"auto": [scrub(c) for c in auto], "approval": [scrub(c) for c in approval],
                 "excluded": [scrub(c) for c in excluded]}  # fmt: skip
        seen: dict[str, str] = {}
        for name, categories in lists.items():
            for category in categories:
                if not 1 <= len(category) <= 64:
                    raise InvalidInput("a category is 1-64 characters")
                if category in seen and seen[category] != name:
                    raise InvalidInput(f"category {category!r} is in both {seen[category]} and {name}")
                seen[category] = name
        prefs = {name: sorted(set(categories)) for name, categories in lists.items()}

        def tx(w: Writer) -> dict[str, list[str]]:
            memory_upkeep.set_preferences(w, prov.viewer().user, prov.project or "", prefs, now_ms())
            record_event(w, prov, "memory.preferences", prefs)
            return prefs

        return self._store.write(tx)
