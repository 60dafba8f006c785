"""`threadloom setup`: every chosen client's files planned, checked, then written (or shown as diffs).

Every file is read and its new text made and checked (parsed again, permissions, links) before the
first one is written, so a refusal leaves every file as it was. Then each changed file is backed up
to `<home>/setup/backups/`, written whole, and recorded in the manifest for `--undo`.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from threadloom.errors import InvalidInput
from threadloom.setup import files
from threadloom.setup.edits import Record, revert
from threadloom.setup.manifest import Entry, Manifest, same_record
from threadloom.setup.model import Context, Plan, Target
from threadloom.threads.repository import Repository


@dataclass(frozen=True)
class Row:
    client: str
    what: str
    path: str
    status: str  # added, updated (an older entry of setup's replaced), unchanged, would change, restored, removed...


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    backups: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(r.status in ("added", "updated", "removed", "restored", "would change") for r in self.rows)


@dataclass
class _File:
    snap: files.Snapshot
    root: Path
    private: bool
    targets: list[Target] = field(default_factory=list)
    text: str | None = None
    records: list[Record] = field(default_factory=list)
    by_target: dict[int, list[Record]] = field(default_factory=dict)  # index in `targets` -> its records


def diff(shown: Path, old: str | None, new: str | None) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        (new or "").splitlines(keepends=True),
        fromfile=str(shown) if old is not None else "/dev/null",
        tofile=str(shown) if new is not None else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _plan_files(ctx: Context, plans: Iterable[Plan]) -> list[_File]:
    by_real: dict[Path, _File] = {}
    for plan in plans:
        for target in plan.targets:
            root = ctx.home
            if ctx.repo is not None and target.path.is_relative_to(ctx.repo):
                root = ctx.repo  # the repository's own gate first: no link out of it, none into .git
                Repository(ctx.repo).check(str(target.path.relative_to(ctx.repo)))
            snap = files.read(target.path, root)
            entry = by_real.setdefault(snap.real, _File(snap, root, target.private))
            entry.targets.append(target)
    for entry in by_real.values():
        text = entry.snap.text
        for index, target in enumerate(entry.targets):
            for edit in target.edits:
                try:
                    text, record = edit.apply(text)
                except InvalidInput as exc:
                    raise InvalidInput(f"{entry.snap.shown}: {exc.message}; nothing was changed") from None
                if record is not None:
                    entry.records.append(record)
                    entry.by_target.setdefault(index, []).append(record)
        entry.text = text
        if entry.records:
            files.check_writable(entry.snap)
    return list(by_real.values())


def setup(ctx: Context, plans: list[Plan], manifest: Manifest, dry_run: bool) -> Report:
    report = Report()
    for plan in plans:
        report.notes.extend(plan.notes)
    planned = _plan_files(ctx, plans)
    for entry in planned:
        for index, target in enumerate(entry.targets):
            mine = entry.by_target.get(index, [])
            status = "unchanged"
            if mine:
                replaced = all("previous" in r for r in mine)  # an older threadloom entry, now current
                status = "would change" if dry_run else "updated" if replaced else "added"
            report.rows.append(Row(target.client, target.what, str(entry.snap.shown), status))
        if entry.records and dry_run:
            report.diffs.append(diff(entry.snap.shown, entry.snap.text, entry.text))
    for plan in plans:
        report.rows.extend(Row(s.client, s.what, "", f"skipped ({s.why})") for s in plan.skips)
    order = {plan.targets[0].client if plan.targets else "": n for n, plan in enumerate(plans)}
    report.rows.sort(key=lambda row: order.get(row.client, len(order)))
    if not dry_run:
        for entry in planned:
            if entry.records:
                _write(entry, manifest, report)
    return report


def _write(entry: _File, manifest: Manifest, report: Report) -> None:
    """Back up, record, then write: the manifest names what is about to be written before it is, so a
    crash in between leaves undo able to take it out (an entry that never landed is simply not found)."""
    snap, key = entry.snap, str(entry.snap.real)
    assert entry.text is not None
    data = entry.text.encode("utf-8")
    before = manifest.entries.get(key)
    backup = manifest.backup(snap.real, snap.data) if snap.data is not None else None
    if backup is not None:
        report.backups.append(f"{snap.shown} -> {backup}")
    made = files.make_folders(snap.real.parent, 0o700 if entry.private else 0o755)
    if before is None:
        new: Entry = {
            "shown": str(snap.shown),
            "root": str(entry.root),
            "existed": snap.data is not None,
            "mode": snap.mode,
            "backup": str(backup) if backup else None,
            "baseline": True,
            "folders": [str(f) for f in made],
            "records": [],
        }
    else:
        new = copy.deepcopy(before)
        if snap.data is None or files.sha256(snap.data) != before["written_sha256"]:
            new["baseline"] = False  # changed by someone else since setup wrote it: its backup is stale
    new["records"] += [r for r in entry.records if not any(same_record(r, o) for o in new["records"])]
    new["written_sha256"] = files.sha256(data)
    manifest.entries[key] = new
    manifest.save()
    try:
        files.write(snap, data, 0o600 if entry.private else 0o644)
    except BaseException:
        if before is None:
            del manifest.entries[key]
        else:
            manifest.entries[key] = before
        manifest.save()
        raise


def undo(clients: set[str], manifest: Manifest, dry_run: bool) -> Report:
    report = Report()
    work: list[tuple[str, Entry, files.Snapshot, list[Record], bytes | None]] = []
    for key, entry in sorted(manifest.entries.items()):
        chosen = [r for r in entry["records"] if r["client"] in clients]
        if not chosen:
            continue
        snap = files.read(Path(entry["shown"]), Path(entry["root"]))
        if snap.data is None:
            work.append((key, entry, snap, chosen, None))
            continue
        whole = len(chosen) == len(entry["records"])
        untouched = entry["baseline"] and files.sha256(snap.data) == entry["written_sha256"]
        if entry["existed"] and not Path(entry["backup"] or "").is_file():
            untouched = False  # its backup was deleted: take the entries out one by one instead
        if whole and untouched:
            new = Path(entry["backup"]).read_bytes() if entry["existed"] else None
        else:
            text = snap.text or ""
            for record in reversed(chosen):
                try:
                    text = revert(text, record)
                except InvalidInput as exc:
                    raise InvalidInput(f"{snap.shown}: {exc.message}; nothing was changed") from None
            new = text.encode("utf-8")
        if new != snap.data:
            files.check_writable(snap)
        work.append((key, entry, snap, chosen, new))
    for key, entry, snap, chosen, new in work:
        _undo_one(key, entry, snap, chosen, new, manifest, report, dry_run)
    return report


def _undo_one(
    key: str,
    entry: Entry,
    snap: files.Snapshot,
    chosen: list[Record],
    new: bytes | None,
    manifest: Manifest,
    report: Report,
    dry_run: bool,
) -> None:
    clients = sorted({r["client"] for r in chosen})
    if snap.data is None:
        status = "skipped (the file is gone)"
    elif new == snap.data:
        status = "unchanged"
    elif dry_run:
        status = "would change"
        report.diffs.append(diff(snap.shown, snap.text, None if new is None else new.decode("utf-8")))
    else:
        restored = len(chosen) == len(entry["records"]) and entry["baseline"]
        restored = restored and files.sha256(snap.data) == entry["written_sha256"]
        restored = restored and (not entry["existed"] or Path(entry["backup"] or "").is_file())
        if not restored:
            report.backups.append(f"{snap.shown} -> {manifest.backup(snap.real, snap.data)}")
        if new is None:
            files.delete(snap)
            for folder in reversed(entry.get("folders", [])):
                try:
                    os.rmdir(folder)
                except OSError:
                    break  # not empty: the user put something there
            status = "removed (setup had created it)"
        else:
            files.write(snap, new, entry["mode"] or 0o600)
            if restored and entry["mode"] is not None:
                os.chmod(snap.real, entry["mode"])
            status = "restored" if restored else "removed (edited since setup: only threadloom's entries taken out)"
    for client in clients:
        report.rows.append(Row(client, "", str(snap.shown), status))
    if dry_run:
        return
    entry["records"] = [r for r in entry["records"] if r not in chosen]
    if entry["records"] and new is not None:
        entry["written_sha256"] = files.sha256(new)
        entry["baseline"] = False
    else:
        del manifest.entries[key]
    manifest.save()
