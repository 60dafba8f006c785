"""What setup adds to a file, as edits that can be applied and taken back one by one.

Each edit turns a file's text (None when it does not exist) into the new text and a record of what
it added (None when the file already had it: setup is idempotent). The record is what `--undo` needs
to remove exactly that entry from a file the user has edited since (`revert`); an untouched file is
restored from its backup instead, byte for byte.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from threadloom.errors import InvalidInput
from threadloom.setup import jsonc
from threadloom.threads.agent_files import BEGIN, END, with_block

Record = dict[str, Any]


def _contains(value: Any, marker: str) -> bool:
    if isinstance(value, str):
        return marker in value
    if isinstance(value, dict):
        return any(_contains(v, marker) for v in value.values())
    if isinstance(value, list):
        return any(_contains(v, marker) for v in value)
    return False


def _nested(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _parse_root(text: str | None) -> tuple[str, jsonc.Node]:
    body = "{}\n" if text is None or not text.strip() else text
    try:
        root = jsonc.parse(body)
    except jsonc.JsoncError as exc:
        raise InvalidInput(f"cannot parse it as JSON: {exc}") from None
    if root.kind != "object":
        raise InvalidInput("its top level is not a JSON object")
    return body, root


def _json_root(text: str | None) -> tuple[str, jsonc.Node, Any, bool]:
    """The text to edit, its tree, its value as new objects, and whether it is plain JSON."""
    body, root = _parse_root(text)
    return body, root, *jsonc.fresh_value(body)


def _descend(root: jsonc.Node, path: tuple[str, ...]) -> tuple[jsonc.Node, int]:
    """The deepest object along `path` and how many keys of it exist."""
    node = root
    for depth, key in enumerate(path):
        member = node.member(key)
        if member is None:
            return node, depth
        if member.node.kind != "object":
            raise InvalidInput(f"{'.'.join(path[: depth + 1])} is not an object")
        node = member.node
    return node, len(path)


def _get(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


@dataclass(frozen=True)
class JsonEntry:
    """`value` at the object key `path` (parents made as needed)."""

    client: str
    path: tuple[str, ...]
    value: Any
    keep_existing: bool = False  # a value already there, whatever it is, is left alone

    def apply(self, text: str | None) -> tuple[str, Record | None]:
        body, root, before, strict = _json_root(text)
        parent, depth = _descend(root, self.path[:-1])
        expected = before
        record: Record = {"client": self.client, "kind": "json", "path": list(self.path)}
        if depth < len(self.path) - 1:
            rest = self.path[depth:]
            new = jsonc.insert(body, parent, rest[0], _nested(rest[1:], self.value))
            record["created"] = depth
            _get(expected, self.path[:depth])[rest[0]] = _nested(rest[1:], self.value)
        else:
            member = parent.member(self.path[-1])
            if member is not None and (self.keep_existing or member.node.value() == self.value):
                return text or body, None
            if member is not None:
                new = jsonc.replace(body, member.node, self.value)
                record["previous"] = member.node.value()
            else:
                new = jsonc.insert(body, parent, self.path[-1], self.value)
                record["created"] = len(self.path) - 1
            _get(expected, self.path[:-1])[self.path[-1]] = self.value
        return _checked(new, expected, strict), record


@dataclass(frozen=True)
class JsonItem:
    """`value` as an element of the array at `path`; the element that holds `marker` is ours."""

    client: str
    path: tuple[str, ...]
    value: Any
    marker: str

    def apply(self, text: str | None) -> tuple[str, Record | None]:
        body, root, before, strict = _json_root(text)
        parent, depth = _descend(root, self.path[:-1])
        expected = before
        record: Record = {"client": self.client, "kind": "json_item", "path": list(self.path), "marker": self.marker}
        member = parent.member(self.path[-1]) if depth == len(self.path) - 1 else None
        if member is None:
            rest = self.path[depth:]
            new = jsonc.insert(body, parent, rest[0], _nested(rest[1:], [self.value]))
            record["created"] = depth
            _get(expected, self.path[:depth])[rest[0]] = _nested(rest[1:], [self.value])
            return _checked(new, expected, strict), record
        node = member.node
        if node.kind != "array":
            raise InvalidInput(f"{'.'.join(self.path)} is not a list")
        items = _get(expected, self.path)
        mine = [i for i, item in enumerate(node.items) if _contains(item.value(), self.marker)]
        if mine and node.items[mine[0]].value() == self.value:
            return text or body, None
        if mine:
            record["previous"] = node.items[mine[0]].value()
            new = jsonc.replace(body, node.items[mine[0]], self.value)
            items[mine[0]] = self.value
        else:
            new = jsonc.insert(body, node, None, self.value)
            items.append(self.value)
        return _checked(new, expected, strict), record


def _checked(after: str, expected: Any, strict: bool) -> str:
    try:
        return jsonc.edited(after, expected, strict)
    except jsonc.JsoncError as exc:
        raise InvalidInput(f"cannot merge into it safely: {exc}") from None


@dataclass(frozen=True)
class TomlEntry:
    """The table `value` at `path` of a TOML file, written with tomlkit so the rest keeps its form."""

    client: str
    path: tuple[str, ...]
    value: dict[str, Any]

    def apply(self, text: str | None) -> tuple[str, Record | None]:
        body = text or ""
        doc = _toml(body)
        expected = tomllib.loads(body)
        record: Record = {"client": self.client, "kind": "toml", "path": list(self.path)}
        table: Any = doc
        for depth, key in enumerate(self.path[:-1]):
            if key not in table:
                table.append(key, tomlkit.table(is_super_table=True))
                record.setdefault("created", depth)
            elif not isinstance(table[key], dict):
                raise InvalidInput(f"{'.'.join(self.path[: depth + 1])} is not a table")
            table = table[key]
        leaf = self.path[-1]
        node = expected
        for key in self.path[:-1]:
            node = node.setdefault(key, {})
        node[leaf] = self.value
        if leaf in table:
            old = table[leaf]
            old_value = old.unwrap() if hasattr(old, "unwrap") else old
            if old_value == self.value:
                return body, None
            record["previous"] = old_value
            table[leaf] = _table(self.value, inline=isinstance(table, tomlkit.items.InlineTable))
            return _toml_checked(tomlkit.dumps(doc), expected), record
        # A new table goes at the end as text of its own, so that undo can take exactly that text out.
        nl = "\r\n" if "\r\n" in body else "\n"
        chunk = ("" if not body or body.endswith("\n") else nl) + (nl if body.strip() else "")
        chunk += f"[{'.'.join(self.path)}]{nl}" + "".join(f"{k} = {_toml_value(v)}{nl}" for k, v in self.value.items())
        record["appended"] = chunk
        record.setdefault("created", len(self.path) - 1)
        try:
            return _toml_checked(body + chunk, expected), record
        except InvalidInput:  # e.g. `mcp_servers = { ... }` inline: it cannot be extended by a header
            del record["appended"]
        table.append(leaf, _table(self.value, inline=isinstance(table, tomlkit.items.InlineTable)))
        return _toml_checked(tomlkit.dumps(doc), expected), record


def _toml(text: str) -> tomlkit.TOMLDocument:
    try:
        tomllib.loads(text)
        return tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.ParseError) as exc:
        raise InvalidInput(f"cannot parse it as TOML: {exc}") from None


def _toml_checked(new: str, expected: Any) -> str:
    try:
        same = tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise InvalidInput("cannot merge into it safely: the merge would change other entries")
    return new


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return str(_table(value, inline=True).as_string())
    return str(tomlkit.item(value).as_string())


def _table(value: dict[str, Any], inline: bool = False) -> Any:
    table = tomlkit.inline_table() if inline else tomlkit.table()
    for key, item in value.items():
        table.append(key, _table(item, inline=True) if isinstance(item, dict) else item)
    return table


@dataclass(frozen=True)
class Block:
    """threadloom's managed instruction block (the one `threadloom init` writes)."""

    client: str
    target: str  # agent_files' target: "cursor" gets the rule's front matter in a new file

    def apply(self, text: str | None) -> tuple[str, Record | None]:
        new = with_block(text, self.target)
        if new == text:
            return new, None
        return new, {"client": self.client, "kind": "block"}


Edit = JsonEntry | JsonItem | TomlEntry | Block


def revert(text: str, record: Record) -> str:
    """`text` without what `record` added (or with the value it replaced put back)."""
    kind = record["kind"]
    path = tuple(record["path"]) if "path" in record else ()
    if kind == "block":
        start, end = text.find(BEGIN), text.find(END)
        if start < 0 or end < start:
            return text
        head, tail = text[:start].rstrip("\n"), text[end + len(END) :].lstrip("\n")
        return head + ("\n" if head and not tail else "\n\n" if head else "") + tail
    if kind == "toml":
        return _revert_toml(text, path, record)
    return _revert_json(text, path, record)


def _revert_json(text: str, path: tuple[str, ...], record: Record) -> str:
    _, root = _parse_root(text)
    try:
        container, depth = _descend(root, path[:-1])
    except InvalidInput:
        return text  # the user reshaped it since: nothing of setup's is left there
    if record["kind"] == "json_item":
        member = container.member(path[-1]) if depth == len(path) - 1 else None
        if member is None or member.node.kind != "array":
            return text
        container = member.node
        mine = [i for i, item in enumerate(container.items) if _contains(item.value(), record["marker"])]
        if not mine:
            return text
        if "previous" in record:
            return jsonc.replace(text, container.items[mine[0]], record["previous"])
        text = jsonc.remove(text, container, mine[0])
        top = len(path)
    else:
        if depth < len(path) - 1 or container.member(path[-1]) is None:
            return text
        if "previous" in record:
            member = container.member(path[-1])
            assert member is not None
            return jsonc.replace(text, member.node, record["previous"])
        text = jsonc.remove(text, container, [m.key for m in container.members].index(path[-1]))
        top = len(path) - 1
    # Remove the parents setup made, once they are empty.
    for level in range(top, record.get("created", top), -1):
        _, root = _parse_root(text)
        parent, _ = _descend(root, path[: level - 1])
        member = parent.member(path[level - 1])
        if member is None or member.node.value() not in ({}, []):
            break
        text = jsonc.remove(text, parent, [m.key for m in parent.members].index(path[level - 1]))
    return text


def _revert_toml(text: str, path: tuple[str, ...], record: Record) -> str:
    chunk = record.get("appended")
    if chunk and chunk in text:
        return text.replace(chunk, "", 1)
    doc = _toml(text)
    tables: list[Any] = [doc]
    for key in path[:-1]:
        if key not in tables[-1]:
            return text
        tables.append(tables[-1][key])
    if path[-1] not in tables[-1]:
        return text
    if "previous" in record:
        tables[-1][path[-1]] = _table(record["previous"])
        return tomlkit.dumps(doc)
    del tables[-1][path[-1]]
    for level in range(len(path) - 1, record.get("created", len(path) - 1), -1):
        if len(tables[level]) == 0:
            del tables[level - 1][path[level - 1]]
    return tomlkit.dumps(doc)


def describe(record: Record) -> str:
    if record["kind"] == "block":
        return "instruction block"
    return ".".join(record["path"]) + (f" [{record['marker'].strip()}]" if "marker" in record else "")
