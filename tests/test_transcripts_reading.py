"""Incremental, exact reading: files that grow, shrink, rotate or are rewritten; damaged and hostile
input; the counters and the alarm a silent source raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from threadloom.transcripts import (
    ClaudeCode,
    Codex,
    Cursor,
    Gemini,
    Message,
    ParseResult,
    Problem,
    SourceStats,
    alarms,
    scan,
)
from threadloom.transcripts.reader import MAX_LINE

SOURCE = ClaudeCode()


def line(number: int, text: str = "", session: str = "s1") -> str:
    body = {
        "type": "user",
        "uuid": f"u-{number}",
        "sessionId": session,
        "cwd": "/home/ada/src/loom",
        "timestamp": "2026-11-02T09:00:00.000Z",
        "message": {"role": "user", "content": text or f"message {number}"},
    }
    return json.dumps(body) + "\n"


def session_file(home: Path, name: str = "s1.jsonl") -> Path:
    path = home / ".claude" / "projects" / "-home-ada-src-loom" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def read_through(path: Path, cursor: Cursor | None) -> ParseResult:
    """Parse calls until the end of the file, as a caller does, merged into one result."""
    messages: list[Message] = []
    problems: list[Problem] = []
    while True:
        result = SOURCE.parse(path, cursor)
        messages += result.messages
        problems += result.problems
        cursor = result.cursor
        if not result.more:
            return ParseResult(messages, cursor, problems)


def test_reparsing_from_the_returned_cursor_yields_nothing_new(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text("".join(line(n) for n in range(3)))
    first = SOURCE.parse(path, None)
    assert texts(first.messages) == ["message 0", "message 1", "message 2"]
    assert first.cursor is not None
    cursor = Cursor.from_json(first.cursor.to_json())  # as a caller persists it
    assert cursor == first.cursor
    again = SOURCE.parse(path, cursor)
    assert again.messages == [] and again.problems == [] and again.records == 0


def test_a_partial_last_line_waits_until_it_is_complete(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    whole = line(1)
    path.write_text(line(0) + whole[:40])  # the writer is mid-record
    first = SOURCE.parse(path, None)
    assert texts(first.messages) == ["message 0"] and first.cursor is not None
    assert first.cursor.offset == len(line(0))
    assert [(p.reason, p.offset) for p in first.problems] == [("incomplete_tail", len(line(0)))]
    with path.open("a") as handle:
        handle.write(whole[40:] + line(2))
    second = SOURCE.parse(path, first.cursor)
    assert texts(second.messages) == ["message 1", "message 2"]
    assert SOURCE.parse(path, second.cursor).messages == []


def test_a_truncated_file_is_read_again_from_the_start_with_the_same_keys(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text("".join(line(n) for n in range(5)))
    first = SOURCE.parse(path, None)
    path.write_text(line(0) + line(9))  # shorter than the cursor's offset
    second = SOURCE.parse(path, first.cursor)
    assert [p.reason for p in second.problems] == ["truncated"]
    assert texts(second.messages) == ["message 0", "message 9"]
    assert second.messages[0].key == first.messages[0].key  # a sink that holds it ignores it


def test_a_rotated_file_is_a_new_file(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0) + line(1))
    first = SOURCE.parse(path, None)
    path.rename(path.with_suffix(".old"))
    path.write_text(line(0) + line(1) + line(2))  # longer than before, but another inode
    second = SOURCE.parse(path, first.cursor)
    assert [p.reason for p in second.problems] == ["replaced"]
    assert texts(second.messages) == ["message 0", "message 1", "message 2"]


def test_a_file_rewritten_in_place_is_read_from_the_start(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0, "aaaa") + line(1))
    first = SOURCE.parse(path, None)
    assert first.cursor is not None
    inode = first.cursor.inode
    with path.open("r+") as handle:  # same inode, same size, other head
        handle.write(line(0, "bbbb") + line(1) + line(2))
    assert path.stat().st_ino == inode
    second = SOURCE.parse(path, first.cursor)
    assert [p.reason for p in second.problems] == ["replaced"]
    assert texts(second.messages) == ["bbbb", "message 1", "message 2"]


def test_a_small_budget_reads_in_steps_and_loses_nothing(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text("".join(line(n) for n in range(200)))
    seen: list[str] = []
    cursor = None
    steps = 0
    while True:
        result = SOURCE.parse(path, cursor, budget=1000)
        seen.extend(texts(result.messages))
        cursor = result.cursor
        steps += 1
        if not result.more:
            break
    assert seen == [f"message {n}" for n in range(200)] and steps > 10


def test_lines_appended_between_steps_are_read_exactly_once(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text("".join(line(n) for n in range(50)))
    seen: list[str] = []
    cursor, written = None, 50
    while True:
        result = SOURCE.parse(path, cursor, budget=2000)
        seen.extend(texts(result.messages))
        cursor = result.cursor
        if written < 80:  # the client keeps writing while ingest reads, a partial line included
            with path.open("a") as handle:
                handle.write(line(written) + line(written + 1)[:25])
            with path.open("a") as handle:
                handle.write(line(written + 1)[25:])
            written += 2
        elif not result.more:
            break
    assert seen == [f"message {n}" for n in range(80)]


def test_a_backfill_since_a_date_leaves_older_files_out(tmp_path: Path) -> None:
    old, new = session_file(tmp_path, "old.jsonl"), session_file(tmp_path, "new.jsonl")
    old.write_text(line(0))
    new.write_text(line(1))
    os.utime(old, (1_700_000_000, 1_700_000_000))
    stats = SourceStats(SOURCE.name)
    read = [path.name for path, _ in scan(SOURCE, tmp_path, {}, stats, modified_since_ms=1_750_000_000_000)]
    assert read == ["new.jsonl"] and stats.files_seen == 1


def test_a_50_mb_line_is_skipped_in_bounded_memory_and_reported(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    with path.open("w") as handle:
        handle.write(line(0))
        handle.write('{"type":"user","message":{"content":"' + "x" * (50 << 20) + '"}}\n')
        handle.write(line(2))
    tracemalloc.start()
    try:
        result = SOURCE.parse(path, None, budget=1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert texts(result.messages) == ["message 0", "message 2"]
    assert [p.reason for p in result.problems] == ["line_too_long"]
    assert result.skipped == {"line_too_long": 1}
    assert peak < 3 * MAX_LINE < 50 << 20  # never the whole line in memory


def test_an_over_long_line_still_being_written_is_skipped_across_calls(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0) + "y" * (MAX_LINE + 10))
    first = read_through(path, None)
    assert texts(first.messages) == ["message 0"] and first.cursor is not None and first.cursor.skipping
    assert [p.reason for p in first.problems] == ["line_too_long"]
    with path.open("a") as handle:
        handle.write("y" * 1000 + "\n" + line(1))
    second = read_through(path, first.cursor)
    assert texts(second.messages) == ["message 1"] and second.problems == []
    assert second.cursor is not None and not second.cursor.skipping


def test_invalid_utf8_is_replaced_and_reported(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_bytes(
        line(0, "caf\u00e9 ok").encode() + line(1, "bad BYTES here").encode().replace(b"BYTES", b"\xff\xfe")
    )
    result = SOURCE.parse(path, None)
    assert texts(result.messages) == ["caf\u00e9 ok", "bad \ufffd\ufffd here"]
    assert [p.reason for p in result.problems] == ["invalid_utf8"]


def test_a_record_cut_mid_way_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0) + line(1)[:30] + "\n" + line(2))
    result = SOURCE.parse(path, None)
    assert texts(result.messages) == ["message 0", "message 2"]
    assert result.skipped == {"invalid_json": 1} and [p.reason for p in result.problems] == ["invalid_json"]


def test_hostile_records_are_skipped_not_raised(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    deep = "[" * 100_000 + "]" * 100_000
    nested = {"type": "user", "uuid": "u-n", "message": {"content": [{"type": "text", "text": ["x"]}]}}
    with path.open("w") as handle:
        handle.write(deep + "\n" + json.dumps(nested) + "\n")
        handle.write(
            json.dumps({"type": "user", "uuid": "u-t", "timestamp": 1e300, "message": {"content": "late"}}) + "\n"
        )
        handle.write(json.dumps({"type": "assistant", "message": {"content": 7}}) + "\n")
        handle.write('"just a string"\n[1, 2]\nnull\n' + line(5))
    result = SOURCE.parse(path, None)
    assert texts(result.messages) == ["late", "message 5"]
    assert result.messages[0].timestamp is None and result.messages[0].epoch_ms is None
    assert result.skipped == {"invalid_json": 1, "empty": 1, "unknown_shape": 1, "unknown_record": 3}


def test_a_damaged_cursor_is_refused_or_read_from_the_start(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0))
    with pytest.raises(ValueError):
        Cursor.from_json('{"path": "x"}')
    good = SOURCE.parse(path, None).cursor
    assert good is not None
    wild = good.advanced(head_len=1 << 40, offset=-5)
    again = SOURCE.parse(path, wild)
    assert texts(again.messages) == ["message 0"] and [p.reason for p in again.problems] == ["replaced"]


def test_a_whole_json_session_cut_mid_record_is_reported_then_read_once_whole(tmp_path: Path) -> None:
    chats = tmp_path / ".gemini/tmp/p/chats"
    chats.mkdir(parents=True)
    whole = (Path(__file__).parent / "fixtures/transcripts/gemini/session-2025-11-03T14-20-7c1d2e3f.json").read_text()
    path = chats / "session-x.json"
    path.write_text(whole[: len(whole) // 2])
    first = Gemini().parse(path, None)
    assert first.messages == [] and [p.reason for p in first.problems] == ["invalid_json"]
    path.write_text(whole)
    second = Gemini().parse(path, first.cursor)
    assert len(second.messages) == 3
    assert Gemini().parse(path, second.cursor).messages == []


def test_a_symlink_loop_and_links_out_of_the_folder_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "secret.jsonl"
    outside.parent.mkdir()
    outside.write_text(line(0))
    real = session_file(tmp_path, "real.jsonl")
    real.write_text(line(1))
    project = real.parent
    (project / "loop").symlink_to(project, target_is_directory=True)
    (project.parent / "up").symlink_to(project.parent.parent, target_is_directory=True)
    (project / "out.jsonl").symlink_to(outside)
    (project / "alias.jsonl").symlink_to(real)
    (project / "dangling.jsonl").symlink_to(project / "missing.jsonl")
    found = sorted(p.name for p in SOURCE.discover(tmp_path))
    assert found == ["alias.jsonl", "real.jsonl"]


def test_a_file_that_vanishes_before_it_is_read_is_reported(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    path.write_text(line(0))
    (listed,) = SOURCE.discover(tmp_path)
    listed.unlink()
    result = SOURCE.parse(listed, None)
    assert result.cursor is None and result.messages == []
    assert [p.reason for p in result.problems] == ["vanished"]


def test_a_fifo_named_like_a_transcript_does_not_block(tmp_path: Path) -> None:
    path = session_file(tmp_path, "pipe.jsonl")
    os.mkfifo(path)
    result = SOURCE.parse(path, None)
    assert result.cursor is None and [p.reason for p in result.problems] == ["not_regular"]


def test_scan_counts_and_a_second_pass_reads_nothing(tmp_path: Path) -> None:
    session_file(tmp_path, "a.jsonl").write_text(line(0) + line(1))
    session_file(tmp_path, "b.jsonl").write_text(line(2, session="s2"))
    stats = SourceStats(SOURCE.name)
    cursors = {}
    for path, result in scan(SOURCE, tmp_path, {}, stats):
        assert result.cursor is not None
        cursors[str(path)] = result.cursor
    assert (stats.files_seen, stats.files_read, stats.records, stats.messages) == (2, 2, 3, 3)
    assert alarms([stats]) == []
    again = SourceStats(SOURCE.name)
    assert [r.messages for _, r in scan(SOURCE, tmp_path, cursors, again)] == [[], []]
    assert SourceStats.from_dict(json.loads(json.dumps(stats.to_dict()))) == stats


def test_a_source_that_yields_files_but_no_message_raises_an_alarm(tmp_path: Path) -> None:
    rollout = tmp_path / ".codex/sessions/2027/01/02/rollout-2027-01-02T00-00-00-q.jsonl"
    rollout.parent.mkdir(parents=True)
    future = {"ts": 1, "kind": "turn", "body": {"speaker": "user", "words": "hello"}}
    rollout.write_text("".join(json.dumps(future) + "\n" for _ in range(30)))
    stats = SourceStats("codex")
    results = [result for _, result in scan(Codex(), tmp_path, {}, stats)]
    assert results[0].messages == [] and stats.skipped == {"unknown_record": 30}
    (alarm,) = alarms([stats])
    assert alarm.source == "codex" and "no message recognised" in alarm.message


def test_mostly_unknown_records_raise_an_alarm_even_when_some_messages_parse() -> None:
    stats = SourceStats("gemini", files_seen=2, files_read=2, records=100, messages=10)
    stats.by_role.update({"user": 5, "assistant": 5})
    stats.skipped.update({"unknown_record": 60, "unknown_shape": 5})
    (alarm,) = alarms([stats])
    assert "65 of 100 records" in alarm.message
    stats.skipped["unknown_record"] = 10
    assert alarms([stats]) == []


def test_turns_of_one_role_only_raise_an_alarm() -> None:
    stats = SourceStats("codex", files_seen=3, files_read=3, records=90, messages=40)
    stats.by_role.update({"assistant": 30, "tool": 10})
    (alarm,) = alarms([stats])
    assert "none from the user" in alarm.message
    stats.by_role["user"] = 5
    assert alarms([stats]) == []


@pytest.mark.slow
def test_a_200_mb_transcript_streams_in_bounded_memory(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    block = "".join(line(n, "z" * 400) for n in range(1000))
    with path.open("w") as handle:
        blocks = (200 << 20) // len(block) + 1
        for _ in range(blocks):
            handle.write(block)
    size = path.stat().st_size
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from threadloom.transcripts import ClaudeCode\n"
        "source, cursor, count = ClaudeCode(), None, 0\n"
        "while True:\n"
        "    result = source.parse(Path(sys.argv[1]), cursor)\n"
        "    count += len(result.messages)\n"
        "    cursor = result.cursor\n"
        "    if not result.more: break\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (large) pytest parent.
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print(count, cursor.offset, peak)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, timeout=600
    )
    count, offset, max_rss_kb = (int(part) for part in done.stdout.split())
    print(f"200 MB transcript: peak RSS {max_rss_kb // 1024} MiB")
    assert offset == size and count == blocks * 1000
    assert max_rss_kb * 1024 < size // 4  # the file never sits in memory
