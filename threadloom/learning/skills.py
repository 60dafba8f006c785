"""A skill in the open SKILL.md format: a folder named for the skill, holding `SKILL.md` (YAML front matter
with `name` and `description`, then a Markdown body) and optional `references/<file>` documents.

The format and its limits follow the Agent Skills specification (https://agentskills.io/specification):
`name` is 1-64 lowercase letters, digits and single hyphens and matches the folder; `description` is
1-1024 characters. Codex enforces the same lengths when it loads a skill (openai/codex,
codex-rs/core/src/skills/loader.rs: MAX_NAME_LEN 64, MAX_DESCRIPTION_LEN 1024), and Copilot asks for
lowercase, hyphenated folder names (docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/
create-skills). A name that passes can therefore never hold `/` or `..`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import yaml

from threadloom.errors import InvalidInput

SKILL_FILE: Final = "SKILL.md"
REFERENCES: Final = "references"
MAX_NAME: Final = 64
MAX_DESCRIPTION: Final = 1024
# Claude Code's guidance is a SKILL.md under 500 lines, details in references; 64 KiB is far past that and
# keeps one loop-written body from flooding every session's context.
MAX_BODY: Final = 64 * 1024
MAX_REFERENCE: Final = 64 * 1024
MAX_REFERENCES: Final = 20
MAX_FILE: Final = MAX_BODY + 4 * 1024  # a whole SKILL.md read back: the body and its front matter
_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_REFERENCE: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}\.(?:md|txt)")
_FENCE: Final = "---"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    references: Mapping[str, str] = field(default_factory=dict)

    def files(self) -> dict[str, str]:
        """Every file of the skill's folder by its path inside the folder."""
        files = {SKILL_FILE: render(self)}
        files.update({f"{REFERENCES}/{name}": text for name, text in sorted(self.references.items())})
        return files

    def digest(self) -> str:
        """A hash of the folder's whole content (what a mirror compares to find edits made by hand)."""
        return files_digest(self.files())


def files_digest(files: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return h.hexdigest()[:32]


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInput("a skill name is required")
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        shown = name if len(name) <= 80 else name[:80] + "..."
        raise InvalidInput(
            f"skill name {shown!r} is not valid: 1-{MAX_NAME} lowercase letters, digits and single hyphens "
            "(e.g. run-the-tests), no slashes or dots"
        )
    return name


def check_reference(name: object) -> str:
    if not isinstance(name, str) or not _REFERENCE.fullmatch(name):
        raise InvalidInput(
            f"reference file name {str(name)[:80]!r} is not valid: lowercase letters, digits, - and _, "
            "ending .md or .txt, no folders"
        )
    return name


def checked(name: object, description: object, body: object, references: object = None) -> Skill:
    """A skill from untrusted parts, every limit checked before anything is written."""
    name = check_name(name)
    if not isinstance(description, str) or not description.strip():
        raise InvalidInput("a skill needs a description: what it does and when to use it")
    description = " ".join(description.split())  # one line, as loaders show it
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput(f"a skill's description is at most {MAX_DESCRIPTION} characters, not {len(description)}")
    if not isinstance(body, str) or not body.strip():
        raise InvalidInput("a skill needs a body: the instructions")
    if len(body.encode()) > MAX_BODY:
        raise InvalidInput(
            f"a skill's body is at most {MAX_BODY // 1024} KiB, not {len(body.encode()) // 1024} KiB: keep "
            "SKILL.md short and put details in references"
        )
    refs: dict[str, str] = {}
    if references is not None:
        if not isinstance(references, Mapping):
            raise InvalidInput("references maps file names to their text")
        if len(references) > MAX_REFERENCES:
            raise InvalidInput(f"a skill has at most {MAX_REFERENCES} reference files")
        for ref_name, text in references.items():
            if not isinstance(text, str) or len(text.encode()) > MAX_REFERENCE:
                raise InvalidInput(f"reference {str(ref_name)[:80]!r} is text of at most {MAX_REFERENCE // 1024} KiB")
            refs[check_reference(ref_name)] = text
    return Skill(name, description, body.strip("\n") + "\n", refs)


def render(skill: Skill) -> str:
    """SKILL.md's text. Values are written as JSON strings, which YAML reads as double-quoted scalars, so
    no description can end the front matter or add a key."""
    name = json.dumps(skill.name)
    description = json.dumps(skill.description, ensure_ascii=False)
    return f"{_FENCE}\nname: {name}\ndescription: {description}\n{_FENCE}\n\n{skill.body}"


def parse(text: str, folder: str | None = None) -> Skill:
    """A SKILL.md's name, description and body; InvalidInput saying what is wrong with a broken one. With
    `folder`, the name must match the folder's (loaders key skills by either)."""
    if len(text.encode()) > MAX_FILE:
        raise InvalidInput(f"SKILL.md is larger than {MAX_FILE // 1024} KiB")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != _FENCE:
        raise InvalidInput("SKILL.md does not start with a front matter (a --- line)")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") == _FENCE), None)
    if end is None:
        raise InvalidInput("SKILL.md's front matter is never closed (no second --- line)")
    try:
        meta = yaml.load("".join(lines[1:end]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise InvalidInput(f"SKILL.md's front matter is not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise InvalidInput("SKILL.md's front matter is not a mapping of keys to values")
    for key in ("name", "description"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise InvalidInput(f"SKILL.md's front matter has no {key}")
    name = check_name(meta["name"])
    if folder is not None and name != folder:
        raise InvalidInput(f"SKILL.md names the skill {name!r} but its folder is {folder!r}")
    description = " ".join(str(meta["description"]).split())
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput(f"SKILL.md's description is longer than {MAX_DESCRIPTION} characters")
    body = "".join(lines[end + 1 :]).lstrip("\n")
    return Skill(name, description, body)
