"""The write-time screen: what a learning loop writes (a skill, a lesson) is loaded into every later session
of every agent CLI, so a loop-written body that tells the reader to drop its instructions, or to fetch and run
code from the network, is refused before anything is written. A person's own writes are not screened: they
may document such commands on purpose.

The loops read third-party text (transcripts echo web pages, issues, pasted files), and a model that
summarises it can carry an injected order into a skill. The screen is a last line behind the reviewer's data
fence, not the fence itself: it matches idioms, after folding the tricks that hide them (compatibility forms,
case, zero-width characters, runs of spaces).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

from threadloom.errors import InvalidInput

# Characters that render as nothing, used to split a phrase so that a plain match misses it.
_INVISIBLE: Final = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None)

_PRIOR = (
    r"(?:all\s+|any\s+|the\s+|your\s+|my\s+|of\s+)*"
    r"(?:previous|prior|above|earlier|preceding|former|system|original)"
)
_ORDERS = r"(?:instructions?|rules?|prompts?|directions?|guidelines?|constraints?|directives?|context)"


_FETCHERS = ("curl", "wget", "fetch", "iwr", "invoke-webrequest")
# Words one of which an idiom's match must hold: a substring test skips the regex for most text (a 64 KiB
# body took ~40x longer through the regexes alone).
_TRIGGERS: Final[dict[str, tuple[str, ...]]] = {
    "ignore previous instructions": ("ignore", "disregard", "forget", "skip", "drop"),
    "ignore your rules": ("ignore", "disregard", "forget", "bypass", "override"),
    "new instructions": ("instructions",),
    "you are now": ("you are now",),
    "hide from the user": ("the user",),
    "delete everything": ("delete", "remove", "erase", "wipe"),
    "ignore previous instructions (fr)": ("ignor",),
    "ignore previous instructions (es)": ("ignora",),
    "ignore previous instructions (pt)": ("ignor",),
    "ignore previous instructions (it)": ("ignora",),
    "ignore previous instructions (de)": ("ignorier",),
    "ignore previous instructions (nl)": ("negeer",),
    "ignore previous instructions (ru)": ("игнорир",),
    "ignore previous instructions (zh)": ("忽略", "无视", "忽视"),
    "ignore previous instructions (ja)": ("無視", "忘れ"),
    "ignore previous instructions (ko)": ("무시",),
    "download piped to a shell": _FETCHERS,
    "decoded text piped to a shell": ("base64", "base32", "xxd"),
    # what opens the substitution and its fetcher, as folding leaves them (one space at most)
    "shell running a download": tuple(f"{o}{sp}{f}" for o in ("<(", "$(", "`") for sp in ("", " ") for f in _FETCHERS),
    "eval of a download": ("eval",),
    "powershell download and run": ("iex", "invoke-expression"),
    "powershell encoded command": ("powershell",),
    "reverse shell": ("/dev/tcp/", "nc", "mkfifo"),
    "wipe the disk or home": ("rm",),
}


@dataclass(frozen=True)
class Idiom:
    name: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]

    def search(self, folded: str) -> bool:
        return any(t in folded for t in self.triggers) and self.pattern.search(folded) is not None


def _idiom(name: str, *parts: str) -> Idiom:
    # No IGNORECASE: the text is case-folded first, and every pattern is lower case.
    return Idiom(name, re.compile("".join(parts)), _TRIGGERS[name])


def _ignore_previous(lang: str, *parts: str) -> Idiom:
    return _idiom(f"ignore previous instructions ({lang})", *parts)


# Instruction override, in the languages agents are most often used in. Each pattern needs the verb and its
# object together, so a skill that explains prompt injection in other words still passes.
OVERRIDE: Final = (
    _idiom("ignore previous instructions", rf"\b(?:ignore|disregard|forget|skip|drop)\s+{_PRIOR}\s+{_ORDERS}"),
    _idiom(
        "ignore your rules",
        r"\b(?:ignore|disregard|forget|bypass|override)\s+",
        rf"(?:all\s+)?(?:your|the)\s+{_ORDERS}",
    ),
    _idiom("new instructions", r"\b(?:new|updated|real)\s+(?:system\s+)?instructions\s*:"),
    _idiom(
        "you are now", r"\byou\s+are\s+now\s+(?:in\s+)?", r"(?:dan|developer\s+mode|jailbroken|unrestricted|root)\b"
    ),
    _idiom("hide from the user", r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|show|alert)\s+the\s+user\b"),
    _idiom(
        "delete everything",
        r"\b(?:delete|remove|erase|wipe)\s+(?:all|every)\s+",
        r"(?:skills?|lessons?|memories|files)\b",
    ),
    _ignore_previous(
        "fr",
        r"\bignor(?:e|ez|er)\s+(?:toutes\s+)?les\s+",
        r"(?:instructions|consignes|règles)\s+(?:précédentes|antérieures)",
    ),
    _ignore_previous(
        "es", r"\bignora(?:r)?\s+(?:todas\s+)?las\s+", r"(?:instrucciones|reglas)\s+(?:anteriores|previas)"
    ),
    _ignore_previous("pt", r"\bignor(?:e|ar)\s+(?:todas\s+)?as\s+", r"(?:instruções|regras)\s+anteriores"),
    _ignore_previous("it", r"\bignora(?:re)?\s+(?:tutte\s+)?le\s+", r"(?:istruzioni|regole)\s+precedenti"),
    _ignore_previous(
        "de", r"\bignorier(?:e|en)?\s+(?:alle\s+)?", r"(?:vorherigen|bisherigen|obigen)\s+(?:anweisungen|regeln)"
    ),
    _ignore_previous("nl", r"\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere)\s+(?:instructies|regels)"),
    _ignore_previous(
        "ru", r"игнорируй(?:те)?\s+(?:все\s+)?", r"(?:предыдущие|прежние)\s+(?:инструкции|указания|правила)"
    ),
    _ignore_previous(
        "zh", r"(?:忽略|无视|忽视)(?:之前|以上|先前|前面|所有)(?:的)?", r"(?:所有)?(?:指令|指示|说明|规则)"
    ),
    _ignore_previous("ja", r"(?:以前|前|上記)の(?:すべての)?(?:指示|命令|ルール)を(?:無視|忘れ)"),
    _ignore_previous("ko", r"이전\s*(?:의\s*)?(?:모든\s*)?(?:지시|명령|규칙)(?:을|를)?\s*무시"),
)

# Remote execution: code fetched from the network, or smuggled encoded, handed to an interpreter.
# `| python -m json.tool` only pretty-prints: a common, harmless way to read an API's answer.
_SHELL = r"(?:sudo\s+)?(?:ba|z|k|da|fi)?sh|python[0-9.]*(?!\s+-m\s+json\.tool)|perl|ruby|node|php"
_FETCH = r"(?:curl|wget|fetch|iwr|invoke-webrequest)\b"
REMOTE: Final = (
    _idiom("download piped to a shell", rf"{_FETCH}\s+[^\s|;][^\n|;]*\|\s*(?:{_SHELL})\b"),
    _idiom(
        "decoded text piped to a shell", r"(?:base64|base32|xxd)\s+(?:-d|--decode|-r)\b", rf"[^\n]*\|\s*(?:{_SHELL})\b"
    ),
    _idiom("shell running a download", rf"(?:{_SHELL})\s+(?:-c\s+)?[\"']?(?:<\(|\$\(|`)\s*{_FETCH}"),
    _idiom("eval of a download", rf"\beval\s+[\"']?(?:\$\(|`)\s*{_FETCH}"),
    _idiom(
        "powershell download and run",
        r"\b(?:iex|invoke-expression)\b[^\n]*",
        r"(?:downloadstring|iwr|invoke-webrequest|net\.webclient)",
    ),
    _idiom(
        "powershell encoded command",
        r"\bpowershell(?:\.exe)?\b[^\n]*\s-(?:e|en|enc|encodedcommand)\s+[a-z0-9+/=]{16,}",
    ),
    _idiom("reverse shell", r"(?:/dev/tcp/|\bnc(?:at)?\b[^\n]*\s-e\s+/bin/|\bmkfifo\b[^\n]*\bnc\b)"),
    _idiom(
        "wipe the disk or home",
        r"\brm\s+-(?:rf|fr|r\s+-f|f\s+-r)\s+(?:--no-preserve-root\s+)?(?:/|~|\$home)(?:\s|$|/\*)",
    ),
)

IDIOMS: Final = OVERRIDE + REMOTE


def fold(text: str) -> str:
    """`text` as the screen reads it: compatibility forms folded (full-width letters, ligatures), invisible
    characters dropped, case folded, each run of whitespace in a line one space (lines are kept: a pipe
    to a shell is matched within one line)."""
    folded = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold()
    return "\n".join(" ".join(line.split()) for line in folded.splitlines())


def findings(text: str) -> list[str]:
    """The names of the idioms found in `text`, in the order of IDIOMS."""
    folded = fold(text)
    return [idiom.name for idiom in IDIOMS if idiom.search(folded)]


def check_loop_text(parts: dict[str, str]) -> None:
    """Refuse loop-written text holding an idiom, naming the part and the idioms (nothing is written)."""
    for where, text in parts.items():
        found = findings(text)
        if found:
            raise InvalidInput(
                f"refused: the {where} a learning loop wrote holds {', '.join(found)}; a loop may not write "
                "instructions that override the reader's or run code from the network (a person may, with "
                "origin person)"
            )
