"""The miner's cue tables, every language in this one module: first-person statements of a preference, a
habit or a value ("I prefer…", "prefiero…", "我喜欢…", "please don't…"), what each one claims, and what
is never claimed (personality labels, diagnoses, identity facts).

A cue is a stance and the words that state it in one language; the object is what follows, up to the end
of its clause. A claim's text is the stance's label in the statement's language and the object in the
user's own words ("Prefers: tabs over spaces", "Prefiere: respuestas cortas", "偏好：简洁的回答"), so the
same statement made again finds its claim by normalised text. Opposite stances (prefer / avoid, always and
usually / never) contradict each other on the same object; "no longer" retracts a stance.

Languages: English, Spanish, Chinese, Portuguese, French, German, Italian (of the anchor's ten, those whose
first person and negation a regular expression reads reliably; Hindi, Arabic, Russian and Japanese need
morphology this table does not have, and are left out rather than guessed at).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

STANCES: Final = ("prefer", "avoid", "always", "usually", "never", "value")
OPPOSITE: Final[dict[str, tuple[str, ...]]] = {
    "prefer": ("avoid",),
    "avoid": ("prefer",),
    "always": ("never",),
    "usually": ("never",),
    "never": ("always", "usually"),
    "value": (),
}
LABELS: Final[dict[str, dict[str, str]]] = {
    "en": {"prefer": "Prefers", "avoid": "Does not want", "always": "Always", "usually": "Usually",
           "never": "Never", "value": "Values"},
    "es": {"prefer": "Prefiere", "avoid": "No quiere", "always": "Siempre", "usually": "Suele",
           "never": "Nunca", "value": "Valora"},
    "pt": {"prefer": "Prefere", "avoid": "Não quer", "always": "Sempre", "usually": "Costuma",
           "never": "Nunca", "value": "Valoriza"},
    "fr": {"prefer": "Préfère", "avoid": "Ne veut pas", "always": "Toujours", "usually": "D'habitude",
           "never": "Jamais", "value": "Tient à"},
    "de": {"prefer": "Bevorzugt", "avoid": "Möchte nicht", "always": "Immer", "usually": "Normalerweise",
           "never": "Nie", "value": "Legt Wert auf"},
    "it": {"prefer": "Preferisce", "avoid": "Non vuole", "always": "Sempre", "usually": "Di solito",
           "never": "Mai", "value": "Tiene a"},
    "zh": {"prefer": "偏好", "avoid": "不希望", "always": "总是", "usually": "通常", "never": "从不", "value": "看重"},
}  # fmt: skip

# (language, stance, retract, pattern): the pattern's `o` group is the object. `(?i)` and a word boundary
# before the cue everywhere but Chinese. Verbs that carry the person (prefiero, prefiro, preferisco) need
# no pronoun; a habit needs the first-person verb after "siempre"/"sempre", caught as part of the object.
_W = r"[^\W\d_]"  # a letter of any script
# fmt: off
_TABLE: Final[tuple[tuple[str, str, bool, str], ...]] = (
    ("en", "retract", True, r"\bI (?:no longer|don'?t|do not) (?:really )?(?P<s>prefer|always) (?P<o>.+?) any ?more\b"),
    ("en", "prefer", True, r"\bI no longer (?:prefer|like to|want) (?P<o>.+)"),
    ("en", "avoid", False, r"\bI(?:'d| would)? (?:much |really )?prefer not to (?P<o>.+)"),
    ("en", "prefer", False, r"\bI(?:'d| would)? (?:much |really |strongly |generally |usually |definitely )?"
                            r"(?:prefer|rather) (?P<o>.+)"),
    ("en", "prefer", False, r"\bmy (?:strong )?preference is (?:for |to )?(?P<o>.+)"),
    ("en", "prefer", False, r"\bI (?:really )?(?:like|love) (?:it when |to |my |having )(?P<o>.+)"),
    ("en", "avoid", False, r"\bI (?:really )?(?:don'?t|do not) (?:like|want|enjoy) (?P<o>.+)"),
    ("en", "avoid", False, r"\bI (?:hate|dislike|can'?t stand) (?P<o>.+)"),
    ("en", "avoid", False, r"\bplease,? (?:don'?t|do not|never|stop|avoid) (?P<o>.+)"),
    ("en", "always", False, r"\bI (?:always|invariably) (?P<o>.+)"),
    ("en", "usually", False, r"\bI (?:usually|normally|typically|generally|tend to) (?P<o>.+)"),
    ("en", "never", False, r"\bI (?:never|don'?t ever|do not ever) (?P<o>.+)"),
    ("en", "value", False, r"\bI (?:really )?(?:value|care (?:a lot |deeply )?about) (?P<o>.+)"),
    ("en", "value", False, r"\b(?:it'?s|it is) (?:really |very )?important to me (?:that |to )?(?P<o>.+)"),
    ("es", "prefer", True, r"\bya no (?:prefiero|quiero|me gusta) (?P<o>.+)"),
    ("es", "avoid", False, r"\bprefiero (?:que )?no (?P<o>.+)"),
    ("es", "prefer", False, r"\b(?:yo )?prefiero (?P<o>.+)"),
    ("es", "prefer", False, r"\bme gustan? más (?P<o>.+)"),
    ("es", "avoid", False, r"\bno me gustan? (?P<o>.+)"),
    ("es", "avoid", False, r"\b(?:odio|detesto|no quiero) (?P<o>.+)"),
    ("es", "avoid", False, r"\bpor favor,? (?:no|nunca) (?P<o>.+)"),
    ("es", "always", False, r"\b(?:yo )?siempre (?P<o>[^\W\d_]+o\b.*)"),
    ("es", "usually", False, r"\b(?:suelo|normalmente|por lo general) (?P<o>[^\W\d_]+.*)"),
    ("es", "never", False, r"\b(?:yo )?(?:nunca|jamás) (?P<o>[^\W\d_]+o\b.*)"),
    ("es", "value", False, r"(?<!no )\b(?:valoro|para mí es (?:muy )?importante (?:que )?|me importan? mucho )"
                           r"(?P<o>.+)"),
    ("pt", "prefer", True, r"\bjá não (?:prefiro|quero|gosto de) (?P<o>.+)"),
    ("pt", "avoid", False, r"\bprefiro (?:que )?não (?P<o>.+)"),
    ("pt", "prefer", False, r"\b(?:eu )?prefiro (?P<o>.+)"),
    ("pt", "prefer", False, r"\beu gosto (?:mais )?de (?P<o>.+)"),
    ("pt", "avoid", False, r"\b(?:eu )?não (?:gosto de|quero) (?P<o>.+)"),
    ("pt", "avoid", False, r"\b(?:por favor|pfv),? (?:não|nunca) (?P<o>.+)"),
    ("pt", "always", False, r"\beu sempre (?P<o>.+)"),
    ("pt", "usually", False, r"\b(?:eu )?costumo (?P<o>.+)"),
    ("pt", "never", False, r"\beu nunca (?P<o>.+)"),
    ("pt", "value", False, r"\b(?:eu )?valorizo (?P<o>.+)"),
    ("fr", "prefer", True, r"\bje ne (?:préfère|veux) plus (?P<o>.+)"),
    ("fr", "avoid", False, r"\bje préfère ne pas (?P<o>.+)"),
    ("fr", "prefer", False, r"\bje préfère (?P<o>.+)"),
    ("fr", "prefer", False, r"\bj'aime (?:bien |mieux )?(?:quand |que )?(?P<o>.+)"),
    ("fr", "avoid", False, r"\bje n'aime pas (?P<o>.+)"),
    ("fr", "avoid", False, r"\bje ne veux pas (?P<o>.+)"),
    ("fr", "avoid", False, r"\bs'il (?:te|vous) pla[iî]t,? (?:ne |n')(?P<o>.+)"),
    ("fr", "always", False, r"\b(?:je |j')(?P<o>[^\W\d_]+ toujours .+)"),
    ("fr", "usually", False, r"\bd'habitude,? (?:je |j')(?P<o>.+)"),
    ("fr", "never", False, r"\bje ne (?P<o>[^\W\d_]+ jamais .+)"),
    ("fr", "value", False, r"\b(?:j'accorde (?:beaucoup )?d'importance à|ce qui compte pour moi,? c'est) (?P<o>.+)"),
    ("de", "prefer", True, r"\bich (?:bevorzuge|mag|will) (?P<o>.+?) nicht mehr\b"),
    ("de", "prefer", False, r"\bich bevorzuge (?P<o>.+)"),
    ("de", "prefer", False, r"\bich (?:mag|habe) (?:es )?lieber (?P<o>.+)"),
    ("de", "prefer", False, r"\bich (?P<o>[^\W\d_]+ lieber .+)"),
    ("de", "avoid", False, r"\bich (?:mag|will) (?:keine?n?|nicht) (?P<o>.+)"),
    ("de", "avoid", False, r"\bbitte,? (?:keine?n?|nicht|nie) (?P<o>.+)"),
    ("de", "always", False, r"\bich (?P<o>[^\W\d_]+ immer .+)"),
    ("de", "usually", False, r"\bnormalerweise (?P<o>[^\W\d_]+ ich .+)"),
    ("de", "never", False, r"\bich (?P<o>[^\W\d_]+ nie(?:mals)? .+)"),
    ("de", "value", False, r"\b(?:mir ist (?:es )?(?:sehr )?wichtig,? (?:dass )?|ich lege (?:gro(?:ß|ss)en )?wert auf )"
                           r"(?P<o>.+)"),
    ("it", "prefer", True, r"\bnon (?:preferisco|voglio) più (?P<o>.+)"),
    ("it", "avoid", False, r"\bpreferisco non (?P<o>.+)"),
    ("it", "prefer", False, r"\b(?:io )?preferisco (?P<o>.+)"),
    ("it", "avoid", False, r"\bnon mi piacciono (?P<o>.+)|\bnon mi piace (?P<o2>.+)"),
    ("it", "avoid", False, r"\b(?:per favore|per piacere),? non (?P<o>.+)"),
    ("it", "always", False, r"\b(?:io )?(?P<o>[^\W\d_]+o sempre .+)"),
    ("it", "usually", False, r"\bdi solito (?P<o>[^\W\d_]+o\b.*)"),
    ("it", "never", False, r"\bnon (?P<o>[^\W\d_]+o mai .+)"),
    ("it", "value", False, r"\bper me è (?:molto )?importante (?:che )?(?P<o>.+)"),
    ("zh", "prefer", True, r"我不再(?:喜欢|偏好|想要)?(?P<o>.+)"),
    ("zh", "avoid", False, r"我(?:不喜欢|讨厌|不想要|不希望)(?P<o>.+)"),
    ("zh", "avoid", False, r"(?:(?:请|麻烦|你)?(?<!要)不要|(?:^|请|麻烦|你)别再?|请勿)(?P<o>.+)"),
    ("zh", "prefer", False, r"我(?:更|比较|还是|一般)?(?:喜欢|偏好|倾向于?|偏爱)(?P<o>.+)"),
    ("zh", "always", False, r"我(?:总是|一直都?|每次都)(?P<o>.+)"),
    ("zh", "usually", False, r"我(?:通常|习惯|一般都|经常)(?P<o>.+)"),
    ("zh", "never", False, r"我(?:从不|从来不|从来没有)(?P<o>.+)"),
    ("zh", "value", False, r"(?:我(?:很|非常)?(?:看重|重视|在乎|在意)|对我来说(?:最)?重要的是)(?P<o>.+)"),
)

# What an agent writes about the user in a memory ("User prefers…", "El usuario prefiere…", "用户喜欢…"):
# read in memories only. In a conversation "the user" is as often the user's own users.
_ABOUT_USER: Final[tuple[tuple[str, str, bool, str], ...]] = (
    ("en", "avoid", False, r"\b(?:the )?user (?:doesn'?t|does not) (?:like|want|enjoy) (?P<o>.+)"),
    ("en", "avoid", False, r"\b(?:the )?user (?:dislikes|hates) (?P<o>.+)"),
    ("en", "prefer", False, r"\b(?:the )?user (?:strongly |generally |usually )?(?:prefers|likes|wants) (?P<o>.+)"),
    ("en", "always", False, r"\b(?:the )?user always (?P<o>.+)"),
    ("en", "usually", False, r"\b(?:the )?user (?:usually|typically|normally|tends to) (?P<o>.+)"),
    ("en", "never", False, r"\b(?:the )?user never (?P<o>.+)"),
    ("en", "value", False, r"\b(?:the )?user (?:values|cares (?:a lot )?about) (?P<o>.+)"),
    ("es", "avoid", False, r"\b(?:al usuario no le gustan?|el usuario no quiere) (?P<o>.+)"),
    ("es", "prefer", False, r"\bel usuario prefiere (?P<o>.+)"),
    ("es", "always", False, r"\bel usuario siempre (?P<o>.+)"),
    ("es", "never", False, r"\bel usuario nunca (?P<o>.+)"),
    ("pt", "prefer", False, r"\bo usuário prefere (?P<o>.+)"),
    ("fr", "prefer", False, r"\bl'utilisateur préfère (?P<o>.+)"),
    ("de", "prefer", False, r"\bder (?:be)?nutzer bevorzugt (?P<o>.+)"),
    ("zh", "avoid", False, r"用户(?:不喜欢|不希望|不想要|讨厌)(?P<o>.+)"),
    ("zh", "prefer", False, r"用户(?:更)?(?:喜欢|偏好|倾向于?)(?P<o>.+)"),
    ("zh", "always", False, r"用户(?:总是|一直)(?P<o>.+)"),
    ("zh", "never", False, r"用户(?:从不|从来不)(?P<o>.+)"),
)
# fmt: on


OBJECT_SCAN: Final = 160  # characters after a cue read for its object (MAX_OBJECT_CHARS and a clause end)
MAX_SENTENCE_CHARS: Final = 1_000  # longer is pasted text, not a statement


@dataclass(frozen=True)
class Cue:
    lang: str
    stance: str
    retract: bool
    pattern: re.Pattern[str]


def _bounded(pattern: str) -> str:
    """The object never reaches past OBJECT_SCAN characters: no cue scans a long run-on text to its end once
    per place it could start."""
    bound = f"{{1,{OBJECT_SCAN}}}"
    return pattern.replace(".+?", f".{bound}?").replace(".+", f".{bound}").replace(".*", f".{{0,{OBJECT_SCAN}}}")


def _compiled(table: tuple[tuple[str, str, bool, str], ...]) -> tuple[Cue, ...]:
    return tuple(
        Cue(lang, stance, back, re.compile(_bounded(p) if lang == "zh" else "(?i)" + _bounded(p)))
        for lang, stance, back, p in table
    )


CUES: Final = _compiled(_TABLE)
MEMORY_CUES: Final = _compiled(_ABOUT_USER) + CUES
# One cheap test per language before its cues: a sentence none of a language's cue words appear in skips
# that language's part of the table (most sentences skip all but one).
_TRIGGERS: Final = {
    lang: re.compile(p if lang == "zh" else r"(?i)\b(?:" + p + r")\b")
    for lang, p in (
        ("en", r"i|i'd|my|please|it'?s|it is|user"),
        ("es", r"prefiero|me|no|ya|yo|suelo|normalmente|por|para|odio|detesto|valoro|siempre|nunca|jamás|usuario"),
        ("pt", r"prefiro|eu|não|já|por|pfv|costumo|valorizo|usuário"),
        ("fr", r"je|j'\w+|s'il|d'habitude|ce|utilisateur"),
        ("de", r"ich|bitte|mir|normalerweise|nutzer|benutzer"),
        ("it", r"preferisco|non|io|di|per|sempre|mai"),
        ("zh", r"我|不要|别|勿|请|对我来说|用户"),
    )
}

# Clause ends: the object stops here. Chinese and Japanese punctuation included.
_CLAUSE_END: Final = re.compile(
    r"[.!?;:\n。！？；：，、,()\[\]\"“”]|\s(?:because|since|but|unless|so that|porque|pero|aunque|mas|parce que|"
    r"mais|weil|aber|denn|perché|ma|se no)\s|因为|但是|不过|所以"
)
_SENTENCES: Final = re.compile(r"(?<=[.!?。！？\n])\s*")
_CLAUSES: Final = re.compile(r"(?<=[；，;])\s*")  # a Chinese sentence often holds two statements
# A statement about something else: a question, a condition, reported speech.
_HEDGE: Final = re.compile(
    r"(?i)\b(?:if|whether|when|unless|do you|did you|should|would you|si|cuando|quand|wenn|falls|ob|se|quando|"
    r"he|she|they|he said|she said|él|ella|ellos|il|elle|er|sie)\s+(?:\w+\s+){0,2}$|如果|要是|假如|他|她"
)
_DEICTIC: Final = frozenset(
    str.split(
        "it that this these those them one ones eso esto este esta ese esa esos esas isso isto ce cela ça ceci "
        "questo questa quello quella es dies diese dieser 这 那 这个 那个 这样 那样 它"
    )
)
_SPLIT_WORDS: Final = re.compile(r"[\w'’]+")
_LEAD: Final = re.compile(r"(?i)^(?:that|you to|you|que|dass|che|de que)\s+(?=\S+\s+\S)")
# A habit cue followed by one of these is talk about an occasion, not a habit ("I never said that").
_NOT_HABIT: Final = frozenset(
    str.split(
        "said say says told tell asked ask meant mean thought think knew know heard hear saw see forget forgot got "
        "get understood understand wanted had was am have did do noticed realised realized todo algo esto eso como "
        "mismo poco nuevo solo mucho primero luego tampoco dijo hizo pensé dije supe"
    )
)
MAX_OBJECT_CHARS: Final = 90
MAX_OBJECT_WORDS: Final = 12
MIN_OBJECT_CHARS: Final = 2

# Never claimed, in any language: health and diagnoses, identity facts, personality labels. A sentence that
# names one is passed over whole (the statement may well be true; it is not the user model's to keep).
_REFUSED: Final = re.compile(
    r"(?i)\b(?:adhd|adhs|tdah|autis\w*|asperger\w*|depress\w*|anxiety|ansiedad|ansiedade|anxiété|angst\w*|bipolar|"
    r"ocd|ptsd|dyslex\w*|dislex\w*|diagnos\w*|disorder|trastorno|transtorno|störung|schizo\w*|therap\w*|"
    r"terap\w*|medicat\w*|medicament\w*|introvert\w*|extrovert\w*|extravert\w*|introverti\w*|narcissis\w*|"
    r"(?:[ie][ns][tf][jp])|my name|me llamo|mi nombre|me chamo|meu nome|je m'appelle|mon nom|ich heiße|"
    r"mein name|mi chiamo|years old|\d+ (?:años|anos|ans|jahre|anni)|i live in|vivo en|moro em|j'habite|"
    r"ich wohne|abito|my address|mi dirección|religio\w*|muslim|christian|jewish|catholic|gay|lesbian|"
    r"transgender|pregnan\w*|embarazad\w*|salary|sueldo|salario)\b|"
    r"多动症|自闭症|抑郁|焦虑|诊断|障碍|内向|外向|性格|我叫|我的名字|我住在|岁|宗教|怀孕|工资"
)
_TRAILING: Final = re.compile(r"(?i)[\s,]+(?:please|thanks|thank you|por favor|gracias|obrigad[oa]|merci|danke|"
                              r"bitte|grazie|谢谢|吧|啊|呢|了)$")  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One statement read out of a text: a stance on an object, or the retraction of one."""

    lang: str
    stance: str
    obj: str
    retract: bool
    sentence: str

    @property
    def text(self) -> str:
        return claim_text(self.stance, self.lang, self.obj)

    @property
    def domain(self) -> str:
        return domain_of(self.stance, self.obj)


def claim_text(stance: str, lang: str, obj: str) -> str:
    sep = "：" if lang == "zh" else ": "
    return f"{LABELS[lang][stance]}{sep}{obj}"


def normalise(text: str) -> str:
    """What two texts must share to be one claim: case, width, punctuation and spacing aside."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(ch if ch.isalnum() else " " for ch in folded).split())


def keys(stance: str, obj: str) -> list[str]:
    """The normalised claim texts of `stance` on `obj` in every language's label."""
    return [normalise(claim_text(stance, lang, obj)) for lang in LABELS]


def find(text: str, *, memory: bool = False) -> Iterator[Finding]:
    """The statements of a preference, habit or value in `text` (already stripped of quoted and pasted
    parts), at most one per clause: the cue that starts first. `memory`: also what an agent wrote about
    the user in a memory."""
    cues = MEMORY_CUES if memory else CUES
    for sentence in _SENTENCES.split(text):
        sentence = sentence.strip()
        if not 4 <= len(sentence) <= MAX_SENTENCE_CHARS or sentence.endswith(("?", "？")):
            continue
        langs = {lang for lang, trigger in _TRIGGERS.items() if trigger.search(sentence)}
        if not langs or refused(sentence):
            continue
        for clause in _CLAUSES.split(sentence):
            found = _read(clause.strip(), [c for c in cues if c.lang in langs])
            if found is not None:
                yield found


def refused(text: str) -> bool:
    return _REFUSED.search(text) is not None


def _read(sentence: str, cues: list[Cue]) -> Finding | None:
    """The cue that starts first in `sentence` (the table's order between two at one place)."""
    best: tuple[Cue, re.Match[str]] | None = None
    for cue in cues:
        match = cue.pattern.search(sentence)
        if match is not None and (best is None or match.start() < best[1].start()):
            best = (cue, match)
    if best is not None:
        cue, match = best
        if _HEDGE.search(sentence[: match.start()]):
            return None
        raw = match.group("o") if match.group("o") is not None else match.groupdict().get("o2") or ""
        stance = cue.stance
        if cue.stance == "retract":  # "I don't prefer X anymore": which stance it takes back
            stance = "always" if match.group("s").lower() == "always" else "prefer"
        obj = _object(raw, stance)
        if obj is None:
            return None
        return Finding(cue.lang, stance, obj, cue.retract, sentence)
    return None


def _object(raw: str, stance: str) -> str | None:
    cut = _CLAUSE_END.search(raw)
    obj = _LEAD.sub("", (raw[: cut.start()] if cut else raw).strip(" \t-–—'\""))
    obj = _TRAILING.sub("", obj).strip()
    words = _SPLIT_WORDS.findall(obj)
    if len(obj) < MIN_OBJECT_CHARS or len(obj) > MAX_OBJECT_CHARS or len(words) > MAX_OBJECT_WORDS:
        return None
    first = words[0].casefold() if words else obj
    if stance in ("always", "usually", "never") and first in _NOT_HABIT:
        return None
    if first in _DEICTIC or obj in _DEICTIC or any(obj.startswith(d) for d in ("这", "那", "它")):
        return None
    return obj


_DOMAIN_WORDS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("communication", re.compile(
        r"(?i)\b(?:answers?|repl(?:y|ies)|responses?|explain\w*|explanations?|summar\w*|tone|emojis?|jargon|"
        r"concise|verbose|brief|short|long|wordy|praise|respuestas?|explicaci\w+|resumen|respostas?|explica\w*|"
        r"réponses?|explication\w*|antwort\w*|erklär\w*|rispost\w*|spiegazion\w*|language|idioma|inglés|english)\b|"
        r"回答|回复|解释|总结|语气|表情|简洁|啰嗦"
    )),
    ("workflow", re.compile(
        r"(?i)\b(?:tests?|testing|tdd|commits?|committing|branch\w*|pull requests?|prs?|reviews?|deploy\w*|"
        r"plans?|planning|tickets?|ci|merge\w*|rebase\w*|pruebas?|tests?|testes|commit\w*|rama|revis\w*|"
        r"planific\w*|plano|tester|teste|prova|prove)\b|测试|提交|分支|评审|部署|计划"
    )),
    ("technical", re.compile(
        r"(?i)\b(?:tabs?|spaces|python|typescript|javascript|rust|golang|java|kotlin|swift|sql|postgres\w*|sqlite|"
        r"docker|kubernetes|vim|neovim|emacs|vscode|editor|librar\w*|framework\w*|types?|typing|mypy|ruff|lint\w*|"
        r"format\w*|api|rest|graphql|orm|async|functional|classes|indent\w*|camelcase|snake_case|monorepo|"
        r"bibliotecas?|librería\w*|tipos?|pip|uv|poetry|npm|pnpm|yarn|bun|react|vue|svelte)\b|类型|框架|缩进|函数"
    )),
)  # fmt: skip


def domain_of(stance: str, obj: str) -> str:
    """The claim's domain: `values` for a value, else the first domain whose words the object uses; a habit
    with none is `workflow`, a preference `style`."""
    if stance == "value":
        return "values"
    for domain, words in _DOMAIN_WORDS:
        if words.search(obj):
            return domain
    return "workflow" if stance in ("always", "usually", "never") else "style"
