"""A consolidation report for people: what merged (or would) into what, with the similarity and why, what was
kept apart and why, the threads idled, what gone holders left released."""

from __future__ import annotations

from typing import Any, Final

SHOWN: Final = 50
PLURAL: Final = {"memory": "memories", "note": "notes", "quote": "quotes"}


def render(report: dict[str, Any], near_misses: int = 10) -> str:
    if not report.get("ran", True):
        return f"consolidation did not run: {report.get('skipped_reason')}"
    dry = report["dry_run"]
    counts = report["would_merge" if dry else "merged"]
    stats = report["stats"]
    total = sum(counts.values())
    lines = [
        f"{'DRY RUN: would merge' if dry else 'merged'} {total} ("
        + ", ".join(f"{n} {PLURAL[kind] if n != 1 else kind}" for kind, n in counts.items())
        + f") among {stats['items']:,} items; similarity by {stats['similarity']}; {stats['total_s']} s",
    ]
    for m in report["merges"][:SHOWN]:
        cosine = f"cosine {m['cosine']:.3f}, " if m["cosine"] is not None else ""
        lines.append(f"  {m['kind']} {m['merged']} -> {m['survivor']}  ({cosine}words {m['words']:.2f})")
        lines.append(f"      merged:   {m['merged_text']}")
        lines.append(f"      survivor: {m['survivor_text']}")
    if len(report["merges"]) > SHOWN:
        lines.append(f"  ... and {len(report['merges']) - SHOWN} more (--json lists all)")
    for s in report["skipped"]:
        lines.append(f"  skipped {s['kind']} {s['merged']} -> {s['survivor']}: {s['skipped']}")
    for k in report["kept"]:
        lines.append(f"  kept {k['kind']} {k['ref']} (beside {k['survivor']}): {k['why']}")
    if report["near_miss_count"]:
        lines.append(f"not merged, though close: {report['near_miss_count']} pair(s)")
        for x in report["near_misses"][:near_misses]:
            lines.append(f"  {x['kind']} {x['a']} / {x['b']}: {x['why']}")
    stale = report["threads"]
    if stale:
        verb = "would idle" if dry else "idled"
        idled = sum(1 for t in stale if "id" in t and (dry or t.get("applied")))
        lines.append(f"threads: {verb} {idled} stale thread(s)")
        for t in stale:
            if "error" in t:
                lines.append(f"  {t['repo']}: {t['error']}")
                continue
            note = f" (skipped: {t['skipped']})" if t.get("skipped") else ""
            lines.append(f"  {t['id']} {t['title']!r}: {t['why']}{note}")
    if report["released"]:
        lines.append("gone holders: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report["released"].items()))
    if dry:
        lines.append("nothing was changed; run with --apply to do it")
    return "\n".join(lines)
