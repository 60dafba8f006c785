"""SQL written for the seam, made PostgreSQL's: placeholders and the few SQLite spellings that remain.

Services write named `:param` placeholders and the SQL both engines share (store/base.py). What the shared
subset cannot spell the same way is rewritten here, once per distinct statement (cached), so a call site keeps
one text: `:name` becomes psycopg's `%(name)s`; `instr`, `group_concat`, the two-argument scalar `max`/`min`,
`substr(x, -n)`, `LIKE` (case-blind for ASCII in SQLite, and no escape character unless named: `ILIKE ..
ESCAPE ''` here), `CAST(.. AS INTEGER)` (64-bit in SQLite), `rowid`, SQLite's join-order and index hints
(`CROSS JOIN .. ON`, `INDEXED BY`, a unary `+`), the `user` and `offset` columns (reserved words here),
equality on the case-blind `entity`, and the JSON helpers (`json_each`, `json_extract`: functions of the same
behaviour made by the PostgreSQL schema's bootstrap). Full-text, vectors and upserts that differ are not
rewritten: they live in the backend (`postgres_*`).
"""

from __future__ import annotations

import re
from functools import lru_cache

# A string literal, a quoted identifier, a `::` cast, a placeholder, or a word: scanned in that order.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|::|:(?P<param>[A-Za-z_]\w*)|(?P<word>[A-Za-z_]\w*)|.", re.S)
_WORDS = {
    "instr": "strpos",
    "group_concat": "string_agg",
    "json_each": "tl_json_each",
    "json_extract": "tl_json_extract",
    "rowid": "ctid",
    "user": '"user"',
}
_FUNCTIONS = frozenset({"instr", "group_concat", "json_each", "json_extract"})
_SCALAR = {"max": "GREATEST", "min": "LEAST"}
_NEG_SUBSTR = re.compile(r"substr\(([\w.]+), -(\d+)\)", re.I)
_CAST_INT = re.compile(r"\bAS\s+INTEGER\s*\)", re.I)
_UNARY_PLUS = re.compile(r"(?<![\w)])\+(\w+\.\w+)")  # SQLite's "no index here" hint
_KEYWORD_OFFSET = re.compile(r"\s+(:|\d|%)")
_CROSS_ON = re.compile(r"\bCROSS\s+JOIN(\s+\w+(?:\s+(?!ON\b)\w+)?\s+ON\b)", re.I)  # SQLite's join order hint
_INDEXED = re.compile(r"\s+(?:INDEXED\s+BY\s+\w+|NOT\s+INDEXED)\b", re.I)  # SQLite's index choice
# memory_entities.entity is COLLATE NOCASE in SQLite: compared case-blind here (an index on lower(entity)).
_NOCASE_EQUALS = re.compile(r"\b((?:\w+\.)?entity)\s*=\s*(:\w+)")
# SQLite's `a IS b` / `a IS NOT b` compare any two values, NULL-safe.
_IS_NOT_VALUE = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|TRUE\b|FALSE\b|DISTINCT\b)", re.I)
_IS_VALUE = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|TRUE\b|FALSE\b|DISTINCT\b)", re.I)
# A parameter only tested for NULL has no type PostgreSQL can infer: given one.
_PARAM_IS_NULL = re.compile(r"(?<![\w:])(:\w+)\s+IS\s+(NOT\s+)?NULL\b", re.I)
_LIKE = re.compile(r"\bNOT\s+LIKE\b|\bLIKE\b", re.I)
# SQLite's LIKE has no escape character unless given one; PostgreSQL's takes a backslash by default. A pattern
# that is one literal or one parameter gets `ESCAPE ''` (none); a built one (`id || '-%'`) keeps the default.
_LIKE_OPERAND = re.compile(r"'(?:[^']|'')*'|\b(NOT\s+)?LIKE\s+('(?:[^']|'')*'|:\w+)(?!\s*(?:\|\||ESCAPE\b))", re.I)


def _like_escapes(sql: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(2) is None:
            return m.group(0)  # a string literal outside any LIKE: left alone
        return f"{'NOT ' if m.group(1) else ''}ILIKE {m.group(2)} ESCAPE ''"

    return _LIKE_OPERAND.sub(one, sql)


def _top_level_commas(sql: str, start: int) -> tuple[int, int]:
    """From the '(' at `start`: (commas at depth 1, index of the matching ')')."""
    depth, commas, i = 0, 0, start
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            i = sql.index("'", i + 1)
            while i + 1 < len(sql) and sql[i + 1] == "'":
                i = sql.index("'", i + 2)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return commas, i
        elif ch == "," and depth == 1:
            commas += 1
        i += 1
    return commas, len(sql)


_LITERAL = re.compile(r"'(?:[^']|'')*'")


def _rewrite(part: str) -> str:
    """The pattern rewrites, on a stretch of SQL outside string literals."""
    part = _NEG_SUBSTR.sub(r"right(\1, \2)", part)
    part = _CAST_INT.sub("AS BIGINT)", part)
    part = _UNARY_PLUS.sub(r"\1", part)
    part = _CROSS_ON.sub(r"JOIN\1", part)
    part = _INDEXED.sub("", part)
    part = _NOCASE_EQUALS.sub(r"lower(\1) = lower(\2)", part)
    part = _PARAM_IS_NULL.sub(r"CAST(\1 AS TEXT) IS \2NULL", part)
    part = _IS_NOT_VALUE.sub("IS DISTINCT FROM ", part)
    part = _IS_VALUE.sub("IS NOT DISTINCT FROM ", part)
    return _LIKE.sub(lambda m: "NOT ILIKE" if m.group(0).upper().startswith("NOT") else "ILIKE", part)


@lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """The statement as PostgreSQL and psycopg take it."""
    sql = _like_escapes(sql)
    pieces, last = [], 0
    for literal in _LITERAL.finditer(sql):
        pieces += [_rewrite(sql[last : literal.start()]), literal.group(0)]
        last = literal.end()
    sql = "".join([*pieces, _rewrite(sql[last:])])
    out: list[str] = []
    for match in _TOKEN.finditer(sql):
        text = match.group(0)
        if match.group("param"):
            out.append(f"%({match.group('param')})s")
            continue
        word = match.group("word")
        if word is None:
            out.append(text.replace("%", "%%"))
            continue
        lower = word.lower()
        following = sql[match.end() : match.end() + 1]
        if lower in _SCALAR and following == "(" and _top_level_commas(sql, match.end())[0] >= 1:
            out.append(_SCALAR[lower])
        elif lower in _WORDS and (following == "(") == (lower in _FUNCTIONS):
            out.append(_WORDS[lower])
        elif lower == "offset" and not _KEYWORD_OFFSET.match(sql, match.end()):
            out.append('"offset"')  # a column of transcript_messages, not `OFFSET :n`
        else:
            out.append(word)
    return "".join(out)


# DDL: a SQLite migration's statements as PostgreSQL's.

_STATEMENT_END = re.compile(r";\s*(?=\n|$)")
_TRIGGER = re.compile(r"CREATE\s+TRIGGER\b.*?\bEND\s*;", re.S | re.I)
_COMMENT = re.compile(r"--[^\n]*")


def _statements(sql: str) -> list[str]:
    """Statements of a migration, triggers whole, comments gone (splits at `;` outside literals)."""
    sql = _COMMENT.sub("", sql)
    parts: list[str] = []
    for trigger in _TRIGGER.findall(sql):
        parts.append(trigger)
    sql = _TRIGGER.sub("", sql)
    current: list[str] = []
    for match in re.finditer(r"'(?:[^']|'')*'|;|[^';]+", sql):
        if match.group(0) == ";":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(match.group(0))
    parts.append("".join(current).strip())
    return [p for p in parts if p]


_TYPES = (
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\b", re.I), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b", re.I), "BIGINT"),
    (re.compile(r"\bREAL\b", re.I), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b", re.I), "BYTEA"),
    (re.compile(r"\)\s*WITHOUT\s+ROWID", re.I), ")"),
    (re.compile(r"\(\s*(\w+)\s+COLLATE\s+NOCASE\s*\)", re.I), r"(lower(\1))"),
    (re.compile(r"\s+COLLATE\s+NOCASE\b", re.I), ""),
)
_SKIPPED = re.compile(r"^(CREATE\s+VIRTUAL|CREATE\s+TRIGGER|DROP\s+TRIGGER)|\btemp\.", re.I)
_DATA = re.compile(r"^UPDATE\b", re.I)


def ddl(sql: str, *, baseline: bool) -> str:
    """A SQLite migration as PostgreSQL statements. FTS5 tables and triggers are left out: the PostgreSQL
    schema keeps its own (postgres_schema.py). In a baseline migration (a database made by these
    migrations from empty), statements that only move existing rows are left out too."""
    kept: list[str] = []
    for statement in _statements(sql):
        if _SKIPPED.search(statement) or (baseline and _DATA.match(statement)):
            continue
        for pattern, replacement in _TYPES:
            statement = pattern.sub(replacement, statement)
        statement = re.sub(r"(?<![\w\"'])(user|offset)(?![\w\"'(])", r'"\1"', statement)
        kept.append(statement + ";")
    return "\n".join(kept)
