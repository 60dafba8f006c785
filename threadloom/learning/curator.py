"""The curator: a review of every skill and lesson of a user, acted on within bounds, reported in a dated
Markdown file under the home (`<home>/curator/<user>/<UTC time>.md`).

A pass audits first (`curator_audit.py`: duplicates, broken files and links, staleness, size), then acts on
the verdicts a loop may act on: merge (the survivor gets the loser's paragraphs it lacks and references it
lacks; the loser goes to the trash), delete (an entry deprecated by an earlier pass and still unused after
the grace period), deprecate (marked; nothing removed). Repair, split and human review are reported for a
person. Rules:
- nothing destructive before a snapshot of the user's whole library is taken (one a pass);
- at most THREADLOOM_LEARN_CURATE_DELETE_BUDGET entries leave the library in a pass (a merge is one); the
  rest wait for the next pass, reported as deferred;
- every change goes through the library as a loop, so a protected entry is refused even if the audit erred;
- one pass at a time per user, across processes (the `learning.curate:<user>` lease); each pass recorded
  (`job_runs`, same name) for `status`.

The scheduled run is off until THREADLOOM_LEARN_CURATE is on; `threadloom learn curate` runs when asked.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import check_user
from threadloom.learning.curator_audit import Verdict, audit, findings, normalised
from threadloom.learning.library import Library, owner_folder
from threadloom.learning.skills import MAX_BODY, REFERENCES, SKILL_FILE, parse
from threadloom.learning.snapshots import Snapshots
from threadloom.memory.similarity import link_floor
from threadloom.search.embedder import Embedder
from threadloom.store import jobs
from threadloom.store.base import Reader, Writer
from threadloom.threads.repository import Repository

if TYPE_CHECKING:
    from threadloom.runtime import Runtime

JOB: Final = "learning.curate"
LEASE_MS: Final = 15 * 60_000
INTERVAL_MS: Final = 86_400_000  # the scheduled pass: once a day per user


def job_name(owner: str) -> str:
    return f"{JOB}:{owner}"


class Curator:
    def __init__(
        self,
        library: Library,
        reports: Path,
        *,
        delete_budget: int = 5,
        stale_days: float = 90.0,
        retention_days: float = 30.0,
        embedder: Embedder | None = None,
    ) -> None:
        self.library = library
        self.store = library.store
        self.snapshots = Snapshots(library, retention_days)
        self.reports = reports
        self.delete_budget = delete_budget
        self.stale_days = stale_days
        self.embedder = embedder
        self._holder = jobs.holder_id()

    def run(self, owner: str, dry_run: bool = False) -> dict[str, Any]:
        """One pass over `owner`'s library: {busy} when another process holds it, else what it found and did."""
        owner = check_user(owner, "the owner")
        began, started = time.perf_counter(), now_ms()
        name = job_name(owner)
        if not self.store.write(lambda w: jobs.acquire(w, name, self._holder, started, LEASE_MS)):
            return {"busy": True}
        try:
            report = self._pass(owner, dry_run, started)
            report["seconds"] = round(time.perf_counter() - began, 3)
            if not dry_run:  # status tells what the last pass did; a dry run did nothing
                outcome = {k: report[k] for k in ("counts", "done", "snapshot", "report")}
                outcome["for_review"] = findings(report["verdicts"])  # what the spawned reviewer may fix
                self.store.write(lambda w: jobs.record_run(w, name, started, now_ms(), False, outcome))
        finally:
            self.store.write(lambda w: jobs.release(w, name, self._holder))
        return report

    def run_due(self) -> dict[str, dict[str, Any]]:
        """The scheduled pass: every user with skills or lessons whose last recorded pass (any process's) is a
        day old or more; that high-water mark keeps a restarted daemon or a second server from running it
        again. What each pass found and did, by user."""
        now = now_ms()

        def due(r: Reader) -> list[str]:
            owners = [str(row["owner"]) for row in r.rows("SELECT DISTINCT owner FROM learning_entries ORDER BY owner")]
            last = {o: (jobs.last_run(r, job_name(o)) or {}).get("started_at", 0) for o in owners}
            return [o for o in owners if now - int(last[o]) >= INTERVAL_MS]

        return {owner: self.run(owner) for owner in self.store.read(due)}

    def preview(self, owner: str) -> dict[str, Any]:
        """What a pass would decide now, without the lease and without a record: it changes nothing."""
        return self._pass(check_user(owner, "the owner"), True, now_ms())

    def _pass(self, owner: str, dry_run: bool, now: int) -> dict[str, Any]:
        purged = 0 if dry_run else self.snapshots.purge(owner)
        with self.library._locked(owner):
            entries = self.snapshots._capture(owner)
        states = self.store.read(lambda r: _states(r, owner))
        similarity, floor = self._similarity()
        verdicts = audit(entries, states, now, self.stale_days, similarity, floor)
        done = {"merged": 0, "deleted": 0, "deprecated": 0, "deferred": 0, "refused": 0, "revived": 0}
        snapshot: str | None = None
        if not dry_run:
            snapshot = self._act(owner, entries, verdicts, states, done, now)
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[v.verdict] = counts.get(v.verdict, 0) + 1
        report = {
            "owner": owner,
            "dry_run": dry_run,
            "at": now,
            "counts": counts,
            "done": done,
            "snapshot": snapshot,
            "purged": purged,
            "verdicts": [v.as_dict() for v in verdicts],
        }
        report["report"] = None if dry_run else str(self._write_report(owner, report))
        return report

    def _act(
        self,
        owner: str,
        entries: list[dict[str, Any]],
        verdicts: list[Verdict],
        states: dict[tuple[str, str], tuple[str, int]],
        done: dict[str, int],
        now: int,
    ) -> str | None:
        by_key = {(e["kind"], e["name"]): e for e in entries}
        removed: set[tuple[str, str]] = set()
        targets = {(v.kind, v.into) for v in verdicts if v.verdict == "merge"}
        snapshot_id: int | None = None
        budget = self.delete_budget
        for v in verdicts:
            key = (v.kind, v.name)
            if v.verdict == "keep" and key in states:  # used again since it was deprecated
                self._mark(owner, key, None, now)
                done["revived"] += 1
            if v.verdict == "deprecate" and key not in states:
                self._mark(owner, key, "deprecated", now)
                v.action, done["deprecated"] = "marked deprecated", done["deprecated"] + 1
            if v.verdict not in ("merge", "delete"):
                continue
            if v.verdict == "delete" and key in targets:
                v.action, done["deferred"] = "deferred: a duplicate merges into it this pass", done["deferred"] + 1
                continue
            if v.into is not None and (v.kind, v.into) in removed:
                v.action, done["deferred"] = "deferred: what it merges into left this pass", done["deferred"] + 1
                continue
            if budget <= 0:
                v.action, done["deferred"] = "deferred: the pass's delete budget is spent", done["deferred"] + 1
                continue
            if snapshot_id is None:
                snapshot_id = self.snapshots.take(owner, f"before the curator pass of {_stamp(now)}")
            try:
                if v.verdict == "merge" and v.into is not None:
                    self._merge_into(owner, by_key[(v.kind, v.into)], by_key[key], now)
                self.snapshots.trash(owner, v.kind, v.name, f"curator {v.verdict}", snapshot_id)
            except (InvalidInput, NotFound) as exc:
                v.action, done["refused"] = f"refused: {exc.message}", done["refused"] + 1
                continue
            self._mark(owner, key, None, now)
            removed.add(key)
            budget -= 1
            merged = v.verdict == "merge"
            v.action = f"merged into {v.into}; in the trash" if merged else "deleted; in the trash"
            done["merged" if merged else "deleted"] += 1
        return None if snapshot_id is None else f"s{snapshot_id}"

    def _mark(self, owner: str, key: tuple[str, str], state: str | None, now: int) -> None:
        self.store.write(lambda w: _set_state(w, owner, key, state, now))

    def _merge_into(self, owner: str, keep: dict[str, Any], drop: dict[str, Any], now: int) -> None:
        """Give the survivor (a skill no person owns) the paragraphs and references of the duplicate it lacks;
        a protected survivor or a lesson stays as it is."""
        if keep["kind"] != "skill" or keep["pinned"] or keep["origin"] != "loop":
            return
        try:
            kept, gone = parse(keep["files"][SKILL_FILE]), parse(drop["files"][SKILL_FILE])
        except (KeyError, InvalidInput):
            return
        have = {normalised(p) for p in kept.body.split("\n\n")}
        extra = [p.strip("\n") for p in gone.body.split("\n\n") if p.strip() and normalised(p) not in have]
        refs = {p.split("/", 1)[1]: t for p, t in keep["files"].items() if p.startswith(f"{REFERENCES}/")}
        for p, t in drop["files"].items():
            if p.startswith(f"{REFERENCES}/"):
                refs.setdefault(p.split("/", 1)[1], t)
        body = kept.body.rstrip("\n") + ("\n\n" + "\n\n".join(extra) if extra else "")
        if len(body.encode()) > MAX_BODY:
            body = kept.body
        if body == kept.body and len(refs) == sum(p.startswith(f"{REFERENCES}/") for p in keep["files"]):
            return
        self.library.write_skill(
            owner, kept.name, kept.description, body, "loop", f"curator {_stamp(now)}: merged {drop['name']}", refs
        )

    def _similarity(self) -> tuple[Any, float]:
        import numpy as np

        embedder = self.embedder
        if embedder is None:
            return None, 1.0

        def cosines(texts: Any) -> list[list[float]]:
            m = np.asarray(embedder.embed_documents(list(texts)), dtype=np.float32)
            m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
            result: list[list[float]] = (m @ m.T).tolist()
            return result

        return cosines, link_floor(embedder.dense_floor)

    def _write_report(self, owner: str, report: dict[str, Any]) -> Path:
        folder = self.reports / owner_folder(owner)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = f"{_stamp(report['at'])}.md"
        Repository(folder).write_text(name, render(report))
        return folder / name


def for_runtime(runtime: Runtime, library: Library) -> Curator:
    """The curator with the settings' budget, staleness and retention, and the loaded embedder if any."""
    s = runtime.settings
    return Curator(
        library, s.layout.home / "curator", delete_budget=s.learn_curate_delete_budget, stale_days=s.learn_stale_days,
        retention_days=s.learn_retention_days, embedder=runtime.search.embedder,
    )  # fmt: skip


def render(report: dict[str, Any]) -> str:
    """The pass's report as Markdown: what it found, what it did, every entry's verdict and why."""
    at = datetime.fromtimestamp(report["at"] / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Curator report, {at}", ""]
    lines.append("Verdicts: " + (", ".join(f"{k} {v}" for k, v in sorted(report["counts"].items())) or "none"))
    lines.append("Done: " + (", ".join(f"{k} {v}" for k, v in report["done"].items() if v) or "nothing"))
    if report["snapshot"]:
        lines.append(f"Snapshot taken first: {report['snapshot']} (`threadloom learn restore {report['snapshot']}`)")
    lines += ["", "| kind | name | verdict | why | done |", "|---|---|---|---|---|"]
    for v in report["verdicts"]:
        verdict = v["verdict"] + (f" into {v['into']}" if v.get("into") else "")
        why = "; ".join(v["reasons"]) or "-"
        lines.append(f"| {v['kind']} | {_cell(v['name'])} | {verdict} | {_cell(why)} | {_cell(v.get('action', ''))} |")
    return "\n".join(lines) + "\n"


def curator_status(r: Reader, owner: str, enabled: bool) -> dict[str, Any]:
    """For `status`: whether the scheduled curator is on, and `owner`'s last pass (when, what it did)."""
    last = jobs.last_run(r, job_name(owner))
    return {
        "enabled": enabled,
        "last_pass": None
        if last is None
        else {"finished_at": last["finished_at"], "dry_run": last["dry_run"]} | last["outcome"],
    }


def _states(r: Reader, owner: str) -> dict[tuple[str, str], tuple[str, int]]:
    rows = r.rows("SELECT kind, name, state, since FROM learning_curation WHERE owner = :o", {"o": owner})
    return {(row["kind"], row["name"]): (row["state"], int(row["since"])) for row in rows}


def _set_state(w: Writer, owner: str, key: tuple[str, str], state: str | None, now: int) -> None:
    params = {"o": owner, "k": key[0], "n": key[1], "s": state, "now": now}
    if state is None:
        w.execute("DELETE FROM learning_curation WHERE owner = :o AND kind = :k AND name = :n", params)
        return
    w.execute(
        "INSERT INTO learning_curation (owner, kind, name, state, since) VALUES (:o, :k, :n, :s, :now) "
        "ON CONFLICT (owner, kind, name) DO NOTHING",
        params,
    )


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H%M%SZ")


def _cell(text: str) -> str:
    return " ".join(str(text).replace("|", "\\|").split())[:300]
