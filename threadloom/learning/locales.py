"""Decision- and rule-shaped cues, per locale, in one place: what makes a sentence worth queueing as a
learning candidate ("always ...", "next time ...", "we decided ...", "don't ...").

Each locale holds regular expressions (matched case-insensitively on one sentence):

- `decision`: a choice was made ("we decided", "from now on", "let's go with").
- `rule`: a standing instruction wherever it stands ("next time", "make sure", "remember to").
- `always`: the words for always/never. They are the commonest cue and the noisiest ("the test always
  fails"), so one counts only as the sentence's first word, after a `modal` ("you should", "bitte"), or
  right after an opening verb when the sentence does not open with a `subject` (an article or pronoun:
  "the test always fails" is a description, "run always" an instruction).
- `starts`: cues that count only at the start of a sentence ("don't ...", "avoid ...").
- `veto`: phrases that cancel a match ("haven't decided yet", "never mind", "don't worry", "has always
  been").
- `headers`: headings of rule lists ("Conventions:", "Regeln:"), whose bullets are all candidates.

Locales with words separated by spaces match at word boundaries; Chinese, Japanese and Korean cues
match anywhere, and their always-words need an imperative ending in the sentence (`imperative`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Final

from threadloom.learning.prefilter import any_of, required

# Words a sentence may open with before its cue ("OK, and please never ...").
_FILLER_WORDS: Final = (
    "ok(?:ay)?|so|and|also|but|oh|please|pls|bitte|s'il te plaît|por favor|per favore|alsjeblieft|proszę|пожалуйста"
)
FILLERS: Final = rf"(?:(?:{_FILLER_WORDS})[,:]?\s+)*"


@dataclass(frozen=True)
class Cues:
    decision: tuple[str, ...]
    rule: tuple[str, ...]
    always: tuple[str, ...] = ()
    starts: tuple[str, ...] = ()
    modals: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    veto: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    spaced: bool = True
    imperative: str = ""  # CJK: an ending that makes an always-word an instruction
    descriptive: str = ""  # a verb form right after an always-word that makes it a description


LOCALES: Final[dict[str, Cues]] = {
    "en": Cues(
        decision=(
            r"(?:we|i)(?:'ve| have)? (?:decided|agreed|settled on|chose|opted)",
            r"let'?s (?:go with|stick with|settle on|keep)",
            r"the decision (?:is|was)",
            r"decision:",
            r"from now on",
            r"we(?:'ll| will) (?:go with|stick with)",
        ),
        rule=(
            r"next time",
            r"going forward",
            r"in the future",
            r"make sure",
            r"be sure to",
            r"remember to",
            r"rule of thumb",
            r"lessons? learned",
            r"note to self",
            r"(?:should|must) (?:always|never|not)",
            r"i (?:prefer|want you to|'d rather)",
        ),
        always=(r"always", r"never"),
        starts=(r"don'?t", r"do not", r"avoid", r"prefer", r"stop", r"no more"),
        modals=(r"you", r"we", r"should", r"must", r"please", r"to"),
        subjects=(r"the", r"this", r"that", r"it", r"its", r"it's", r"he", r"she", r"they", r"my", r"our", r"i"),
        veto=(
            r"(?:not|n't) (?:yet )?(?:decided|agreed)",
            r"never mind",
            r"don'?t (?:worry|know|think|see|understand|remember|get|care|mind)",
            r"(?:always|never) been",
        ),
        headers=(r"rules?", r"conventions?", r"guidelines?", r"lessons?(?: learned)?", r"dos and don'?ts", r"policy"),
        descriptive=r"\w*[^s\W]s",  # "always fails": a third person's habit
    ),
    "de": Cues(
        decision=(
            r"wir haben (?:uns )?(?:entschieden|beschlossen|geeinigt|festgelegt)",
            r"(?:ich|wir) (?:entscheide|entscheiden|beschließe|beschließen)",
            r"ab (?:jetzt|sofort)",
            r"künftig",
            r"entscheidung:",
            r"lass(?:t)? uns (?:bei|mit)",
        ),
        rule=(
            r"(?:beim )?nächste[sn]? mal",
            r"in zukunft",
            r"achte darauf",
            r"denk(?:e)? daran",
            r"vergiss nicht",
            r"auf keinen fall",
            r"(?:du )?(?:darfst|sollst) (?:nie|niemals|nicht)",
        ),
        always=(r"immer", r"stets", r"nie", r"niemals"),
        starts=(r"keine?n?", r"vermeide", r"bitte nicht"),
        modals=(r"du", r"wir", r"sollte[n]?", r"musst", r"müssen", r"bitte"),
        subjects=(r"der", r"die", r"das", r"dieser", r"es", r"er", r"ich", r"mein", r"unser"),
        veto=(r"noch nicht (?:entschieden|beschlossen)", r"immer noch", r"schon immer", r"noch nie", r"wie immer"),
        headers=(r"regeln", r"konventionen", r"richtlinien", r"lektionen"),
    ),
    "fr": Cues(
        decision=(
            r"(?:on a|nous avons|j'ai) (?:décidé|choisi|convenu|opté)",
            r"à partir de maintenant",
            r"désormais",
            r"dorénavant",
            r"décision\s?:",
        ),
        rule=(
            r"la prochaine fois",
            r"à l'avenir",
            r"assure-toi",
            r"n'oublie pas",
            r"pense à",
            r"il faut (?:toujours|jamais)",
        ),
        always=(r"toujours", r"jamais"),
        starts=(r"évite", r"ne (?:fais|mets) pas"),
        modals=(r"il faut", r"tu dois", r"on doit", r"faut"),
        subjects=(r"le", r"la", r"les", r"il", r"elle", r"ça", r"ce", r"cet", r"cette", r"je", r"on"),
        veto=(r"pas encore (?:décidé|choisi)", r"toujours été", r"laisse tomber", r"ne sais pas"),
        headers=(r"règles", r"conventions", r"consignes", r"leçons"),
    ),
    "es": Cues(
        decision=(
            r"(?:hemos|he) (?:decidido|elegido|acordado|optado)",
            r"decidimos",
            r"a partir de ahora",
            r"de ahora en adelante",
            r"decisión:",
        ),
        rule=(r"la próxima vez", r"en el futuro", r"asegúrate", r"no olvides", r"recuerda"),
        always=(r"siempre", r"nunca", r"jamás"),
        starts=(r"evita", r"no (?:uses|hagas|subas|borres)"),
        modals=(r"hay que", r"debes", r"tienes que", r"debemos"),
        subjects=(r"el", r"la", r"los", r"las", r"esto", r"este", r"esta", r"yo"),
        veto=(r"no hemos decidido", r"todavía no", r"siempre (?:ha sido|fue)", r"no sé"),
        headers=(r"reglas", r"convenciones", r"normas", r"lecciones"),
    ),
    "it": Cues(
        decision=(
            r"abbiamo (?:deciso|scelto|concordato|optato)",
            r"ho deciso",
            r"d'ora in poi",
            r"da (?:adesso|ora) in poi",
            r"decisione:",
        ),
        rule=(r"la prossima volta", r"in futuro", r"assicurati", r"ricordati", r"non dimenticare"),
        always=(r"sempre", r"mai"),
        starts=(r"evita", r"non (?:usare|fare|committare|cancellare)"),
        modals=(r"bisogna", r"devi", r"dobbiamo"),
        subjects=(r"il", r"lo", r"la", r"i", r"gli", r"le", r"questo", r"questa", r"è", r"io"),
        veto=(r"(?:non|ancora) \w* ?deciso", r"sempre stato", r"non so", r"lascia stare"),
        headers=(r"regole", r"convenzioni", r"linee guida", r"lezioni"),
    ),
    "pt": Cues(
        decision=(r"(?:nós )?(?:decidimos|optamos|escolhemos|combinamos)", r"a partir de agora", r"decisão:"),
        rule=(
            r"da próxima vez",
            r"daqui (?:para|pra) frente",
            r"no futuro",
            r"certifique-se",
            r"não (?:se )?esqueça",
            r"lembre-se",
        ),
        always=(r"sempre", r"nunca", r"jamais"),
        starts=(r"evite", r"não (?:use|faça|apague)"),
        modals=(r"você deve", r"deve", r"temos que", r"tem que"),
        subjects=(r"o", r"a", r"os", r"as", r"isso", r"este", r"esta", r"eu"),
        veto=(r"(?:ainda )?não decidimos", r"sempre foi", r"não sei"),
        headers=(r"regras", r"convenções", r"diretrizes", r"lições"),
    ),
    "nl": Cues(
        decision=(
            r"we hebben (?:besloten|gekozen|afgesproken)",
            r"ik heb besloten",
            r"vanaf nu",
            r"voortaan",
            r"besluit:",
        ),
        rule=(r"volgende keer", r"in de toekomst", r"zorg (?:ervoor|er voor|dat)", r"vergeet niet", r"denk eraan"),
        always=(r"altijd", r"nooit"),
        starts=(r"geen", r"vermijd"),
        modals=(r"je moet", r"moet", r"we moeten", r"graag"),
        subjects=(r"de", r"het", r"dit", r"dat", r"deze", r"ik", r"hij", r"zij"),
        veto=(r"nog niet (?:besloten|gekozen)", r"altijd al", r"weet niet", r"laat maar"),
        headers=(r"regels", r"afspraken", r"richtlijnen", r"lessen"),
    ),
    "pl": Cues(
        decision=(r"zdecydowaliśmy", r"postanowiliśmy", r"ustaliliśmy", r"od (?:teraz|tej pory|dziś)", r"decyzja:"),
        rule=(r"następnym razem", r"w przyszłości", r"upewnij się", r"pamiętaj", r"nie zapomnij"),
        always=(r"zawsze", r"nigdy"),
        starts=(r"unikaj", r"nie (?:używaj|rób|usuwaj)"),
        modals=(r"musisz", r"trzeba", r"należy", r"proszę"),
        subjects=(r"ten", r"ta", r"to", r"ja", r"on", r"ona"),
        veto=(r"(?:jeszcze )?nie zdecydowaliśmy", r"zawsze (?:tak )?było", r"nie wiem", r"nieważne"),
        headers=(r"zasady", r"reguły", r"konwencje", r"wnioski"),
        descriptive=r"\w+[aei]",  # "zawsze pada": a third person's habit, not an instruction (-aj, -uj)
    ),
    "ru": Cues(
        decision=(r"мы решили", r"решили", r"договорились", r"с этого момента", r"отныне", r"впредь", r"решение:"),
        rule=(r"в следующий раз", r"в будущем", r"убедись", r"не забыва(?:й|йте)", r"не забудь", r"запомни"),
        always=(r"всегда", r"никогда"),
        starts=(r"не (?:используй|делай|удаляй)", r"избегай"),
        modals=(r"нужно", r"надо", r"должен", r"должны", r"пожалуйста"),
        subjects=(r"это", r"этот", r"эта", r"он", r"она", r"я"),
        veto=(r"(?:ещё|еще) не решили", r"было всегда", r"всегда было", r"не знаю", r"неважно"),
        headers=(r"правила", r"соглашения", r"уроки"),
        descriptive=r"\w+(?:ет|ит|ут|ют|ат|ят)",  # third person present: "всегда падает"
    ),
    "ja": Cues(
        decision=(r"ことに(?:決め|しま)", r"決定しま", r"今後は", r"これからは", r"にしましょう"),
        rule=(r"次回(?:から|は)", r"必ず", r"絶対に", r"忘れないで", r"ようにして", r"しないで(?:ください|ね)"),
        always=(r"いつも", r"常に"),
        veto=(r"まだ決めて", r"ずっと"),
        headers=(r"ルール", r"規則", r"方針", r"教訓"),
        spaced=False,
        imperative=r"(?:ください|ように|こと)",
    ),
    "zh": Cues(
        decision=(r"我们决定", r"决定了", r"定下来", r"从现在(?:开始|起)", r"今后", r"就这么定"),
        rule=(r"下次", r"一定要", r"务必", r"永远不要", r"千万(?:不要|别)", r"记得", r"确保", r"以后(?:每次|都|要)"),
        always=(r"总是", r"始终", r"每次都"),
        starts=(r"不要", r"别"),
        veto=(r"还没(?:有)?决定", r"一直都", r"以后再说"),
        headers=(r"规则", r"约定", r"规范", r"教训"),
        spaced=False,
        imperative=r"要",
    ),
    "ko": Cues(
        decision=(r"하기로 (?:했|결정)", r"결정했", r"앞으로(?:는)?", r"이제부터"),
        rule=(r"다음부터", r"다음 번에", r"잊지 마", r"반드시", r"꼭", r"절대[^?]*지 마", r"지 마세요"),
        always=(r"항상", r"늘", r"언제나"),
        veto=(r"아직 결정하지", r"항상 이랬"),
        headers=(r"규칙", r"원칙", r"교훈"),
        spaced=False,
        imperative=r"(?:세요|십시오|해야|하자|주세요)",
    ),
}


@dataclass(frozen=True)
class Compiled:
    locale: str
    decision: re.Pattern[str]
    rule: re.Pattern[str]
    always: re.Pattern[str] | None
    starts: re.Pattern[str] | None
    modal_before: re.Pattern[str] | None
    subject_start: re.Pattern[str] | None
    veto: re.Pattern[str] | None
    header: re.Pattern[str] | None
    imperative: re.Pattern[str] | None
    descriptive: re.Pattern[str] | None


def _any(parts: tuple[str, ...], spaced: bool) -> re.Pattern[str] | None:
    if not parts:
        return None
    body = "|".join(f"(?:{p})" for p in parts)
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)" if spaced else f"(?:{body})", re.IGNORECASE)


@cache
def compiled() -> tuple[Compiled, ...]:
    """Every locale's cues, compiled once per process (on first use, not at import)."""
    out = []
    for name, c in LOCALES.items():
        words = "|".join(c.always)
        out.append(
            Compiled(
                locale=name,
                decision=_any(c.decision, c.spaced) or re.compile("(?!)"),
                rule=_any(c.rule, c.spaced) or re.compile("(?!)"),
                always=_any(c.always, c.spaced),
                starts=re.compile(rf"^{FILLERS}(?:{'|'.join(c.starts)})(?!\w)", re.IGNORECASE) if c.starts else None,
                modal_before=re.compile(rf"(?<!\w)(?:{'|'.join(c.modals)})\s+(?:\w+\s+)?(?:{words})(?!\w)", re.I)
                if c.modals and words
                else None,
                subject_start=re.compile(rf"^{FILLERS}(?:{'|'.join(c.subjects)})(?!\w)", re.I) if c.subjects else None,
                veto=_any(c.veto, c.spaced),
                header=re.compile(rf"^\W*(?:{'|'.join(c.headers)})\b", re.I) if c.headers else None,
                imperative=re.compile(c.imperative) if c.imperative else None,
                descriptive=re.compile(rf"(?<!\w)(?:{words})\s+{c.descriptive}(?!\w)", re.I)
                if c.descriptive and words
                else None,
            )
        )
    return tuple(out)


@cache
def any_cue() -> re.Pattern[str]:
    """Every locale's cue words in one pattern: a sentence none of them touches (most of them) costs one
    search, not one per locale and shape. Also what paraphrase clustering strips before comparing."""
    parts = [p for c in LOCALES.values() for p in (*c.decision, *c.rule, *c.always, *c.starts)]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


@cache
def _keywords() -> dict[str, re.Pattern[str]]:
    """Per locale, the literals one of which every match of one of its cues contains (learning/prefilter.py):
    a pattern of plain literals over a lowered sentence, which the regex engine scans by first character."""
    out = {}
    for name, c in LOCALES.items():
        words: set[str] = set()
        for p in (*c.decision, *c.rule, *c.always, *c.starts):
            need = required(p)
            if need is None:  # a cue that promises no literal: the locale cannot be filtered
                need = {""}
            words |= need
        # Case-sensitive over a lowered sentence: IGNORECASE costs the engine its first-character scan (8x).
        out[name] = re.compile(any_of(words))
    return out


@cache
def any_keyword() -> re.Pattern[str]:
    """Every locale's cue words in one plain-literal pattern, for a lowered text: no match, no cue of any
    locale (most sentences and most messages cost this one search)."""
    words: set[str] = set()
    for c in LOCALES.values():
        for p in (*c.decision, *c.rule, *c.always, *c.starts):
            words |= required(p) or {""}
    return re.compile(any_of(words))


def cue_locales(sentence: str) -> set[str]:
    """The locales one of whose cue words occurs in `sentence`: a superset of those whose cues match, found
    with plain-literal searches (most sentences name no cue word and cost only the first)."""
    lowered = sentence.lower()
    if not any_keyword().search(lowered):
        return set()
    return {name for name, words in _keywords().items() if words.search(lowered)}


@cache
def any_veto() -> re.Pattern[str] | None:
    """Every locale's vetoes in one pattern ("nie wiem" is no German "nie"): one search for all."""
    parts = [f"(?:{c.veto.pattern})" for c in compiled() if c.veto is not None]
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


@cache
def leading_fillers() -> re.Pattern[str]:
    return re.compile(rf"^{FILLERS}", re.IGNORECASE)
