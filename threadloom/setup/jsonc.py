"""JSON with comments and trailing commas (VS Code's and Copilot's settings are JSONC), edited as text.

A parser that keeps where each value sits in the text, and edits that splice only what changes:
the user's other entries, their order, their comments and their indentation stay byte for byte.
Every edit is checked by parsing the result again (`edited`), so a splice that would lose or
change anything else is refused instead of written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

Json = Any  # what json.loads returns
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS: Final = {"true": True, "false": False, "null": None}
_SPACE: Final = re.compile(r"[ \t\r\n\ufeff]*")
_DECODER: Final = json.JSONDecoder()


class JsoncError(ValueError):
    """The text is not JSON (with comments); the message says where."""


@dataclass
class Node:
    kind: str  # "object", "array" or "scalar"
    start: int
    end: int  # exclusive
    text: str = ""
    lazy: bool = False  # a container read whole by the C decoder: its entries are found when asked for
    scalar: Json = None  # a scalar's value, or a lazy container's
    _members: list[Member] = field(default_factory=list)
    _items: list[Node] = field(default_factory=list)

    def _expand(self) -> None:
        if self.lazy:
            parser = _Parser(self.text)
            parser.pos = self.start
            full = parser.container(self.start, "}" if self.kind == "object" else "]", object_=self.kind == "object")
            self._members, self._items, self.lazy = full._members, full._items, False

    @property
    def members(self) -> list[Member]:
        self._expand()
        return self._members

    @property
    def items(self) -> list[Node]:
        self._expand()
        return self._items

    def value(self) -> Json:
        if self.lazy or self.kind == "scalar":
            return self.scalar  # shared with the tree: callers that change a value use fresh_value
        if self.kind == "object":
            return {m.key: m.node.value() for m in self._members}
        return [item.value() for item in self._items]

    def member(self, key: str) -> Member | None:
        found = [m for m in self.members if m.key == key]
        return found[-1] if found else None  # a repeated key: the last wins, as in json.loads


@dataclass
class Member:
    key: str
    start: int  # where the key's quote opens
    node: Node

    @property
    def end(self) -> int:
        return self.node.end


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> JsoncError:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return JsoncError(f"{what} at line {line}, column {col}")

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            self.pos = _SPACE.match(text, self.pos).end()  # type: ignore[union-attr]
            if text.startswith("//", self.pos):
                eol = text.find("\n", self.pos)
                self.pos = len(text) if eol < 0 else eol
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("an unclosed /* comment")
                self.pos = close + 2
            else:
                return

    def document(self) -> Node:
        self.skip()
        ch = self.text[self.pos : self.pos + 1]
        if ch in ("{", "["):  # the top level is read entry by entry: setup edits inside it
            node = self.container(self.pos, "}" if ch == "{" else "]", object_=ch == "{")
        else:
            node = self.value()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("unexpected text after the value")
        return node

    def value(self) -> Node:
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.fail("unexpected end of the file")
        ch = text[start]
        if ch in "{[":
            try:  # plain JSON (most of a config, all of ~/.claude.json) is read at C speed
                whole, end = _DECODER.raw_decode(text, start)
            except ValueError:
                return self.container(start, "}" if ch == "{" else "]", object_=ch == "{")
            self.pos = end
            return Node("object" if ch == "{" else "array", start, end, text, lazy=True, scalar=whole)
        if ch == '"':
            string = self.string()
            return Node("scalar", start, self.pos, scalar=string)
        for word, literal in _LITERALS.items():
            if text.startswith(word, start):
                self.pos = start + len(word)
                return Node("scalar", start, self.pos, scalar=literal)
        number = _NUMBER.match(text, start)
        if number:
            self.pos = number.end()
            return Node("scalar", start, self.pos, scalar=json.loads(number.group()))
        raise self.fail(f"unexpected {ch!r}")

    def string(self) -> str:
        """The string that opens at `pos` (moving past it), decoded as json does."""
        try:
            string: str
            string, self.pos = json.decoder.scanstring(self.text, self.pos + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError:
            raise self.fail("a broken string") from None
        return string

    def container(self, start: int, close: str, *, object_: bool) -> Node:
        node = Node("object" if object_ else "array", start, start, self.text)
        self.pos += 1
        expecting_more = False
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            if (node._members or node._items) and not expecting_more:
                raise self.fail(f"expected ',' or '{close}'")
            if object_:
                if not self.text.startswith('"', self.pos):
                    raise self.fail("expected a quoted key")
                key_start = self.pos
                key = self.string()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                self.skip()
                node._members.append(Member(key, key_start, self.value()))
            else:
                node._items.append(self.value())
            self.skip()
            expecting_more = self.text.startswith(",", self.pos)
            if expecting_more:
                self.pos += 1


def parse(text: str) -> Node:
    """The document's tree; JsoncError when it is not JSON with comments."""
    return _Parser(text).document()


def fresh_value(text: str) -> tuple[Json, bool]:
    """The document's value as new objects, free to change, and whether it is plain JSON."""
    try:
        return json.loads(text), True
    except ValueError:
        return parse(text).value(), False


# editing


def indent_unit(text: str) -> str:
    """The file's indentation step: the smallest indentation of a line that opens with a key."""
    found = [m.group(1) for m in re.finditer(r"\n([ \t]+)\"", text)]
    if not found:
        return "  "
    return "\t" if found[0].startswith("\t") else min(found, key=len)


def line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group() if match else ""


def render(value: Json, indent: str, unit: str) -> str:
    """`value` as JSON whose continuation lines start at `indent`."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _starts_line(text: str, pos: int) -> bool:
    return text[text.rfind("\n", 0, pos) + 1 : pos].strip() == ""


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def insert(text: str, container: Node, key: str | None, value: Json) -> str:
    """`text` with `value` added at the end of `container` (as member `key` of an object)."""
    unit, nl = indent_unit(text), _newline(text)
    entries = container.members if container.kind == "object" else container.items
    close = container.end - 1
    name = json.dumps(key, ensure_ascii=False) + ": " if key is not None else ""
    if not entries:
        child = line_indent(text, container.start) + unit
        entry = name + render(value, child, unit).replace("\n", nl)
        inner = text[container.start + 1 : close]
        if "\n" in inner:
            return text[: container.start + 1] + nl + child + entry + text[container.start + 1 :]
        tail = nl + line_indent(text, container.start)
        return text[: container.start + 1] + nl + child + entry + tail + text[close:]
    last = entries[-1]
    first_start = entries[0].start
    inline = not _starts_line(text, first_start)
    child = line_indent(text, first_start)
    body = json.dumps(value, ensure_ascii=False) if inline else render(value, child, unit).replace("\n", nl)
    probe = _Parser(text)
    probe.pos = last.end
    probe.skip()
    trailing = text.startswith(",", probe.pos) and probe.pos < close
    after = probe.pos + 1 if trailing else last.end
    comma = "" if trailing else ","
    if inline:
        return text[: last.end] + comma + text[last.end : after] + " " + name + body + text[after:]
    eol = text.find("\n", after)
    at = eol if 0 <= eol < close else after
    if at == eol and text[eol - 1] == "\r":
        at -= 1
    return text[: last.end] + comma + text[last.end : at] + nl + child + name + body + text[at:]


def replace(text: str, node: Node, value: Json) -> str:
    rendered = render(value, line_indent(text, node.start), indent_unit(text)).replace("\n", _newline(text))
    return text[: node.start] + rendered + text[node.end :]


def remove(text: str, container: Node, index: int) -> str:
    """`text` without the container's entry at `index` (and the comma that joined it)."""
    entries: list[Any] = container.members if container.kind == "object" else container.items
    entry = entries[index]
    if index + 1 < len(entries):
        return text[: entry.start] + text[entries[index + 1].start :]
    if index > 0:
        prev_end = entries[index - 1].end
        if not _starts_line(text, entry.start):
            return text[:prev_end] + text[entry.end :]
        # Keep a comment that follows the previous entry on its line; drop the comma before it, the
        # entry's own line(s), and a trailing comma of the entry (it would land after that comment).
        comma = 1 if text.startswith(",", prev_end) else 0
        cut = text.rfind("\n", 0, entry.start)
        cut -= 1 if text[cut - 1] == "\r" else 0
        kept = text[prev_end + comma : cut]
        rest = text[entry.end :]
        if rest.lstrip(" \t").startswith(","):
            rest = rest.lstrip(" \t")[1:]
        return text[:prev_end] + kept + rest
    return text[: container.start + 1] + text[container.end - 1 :]


def edited(after: str, expected: Json, strict: bool) -> str:
    """`after`, once it parses to exactly `expected` (as plain JSON when the file was plain JSON):
    else JsoncError, since nothing else may change."""
    try:
        got = json.loads(after) if strict else parse(after).value()
    except ValueError as exc:
        raise JsoncError(f"the merged text would not parse as {'plain ' if strict else ''}JSON ({exc})") from None
    if got != expected:
        raise JsoncError("the merge would change other entries")
    return after


def is_strict(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
