"""The interaction profile: how the user likes the agent to collaborate, from what they said outright.

Known preferences (conclusions first, plan -> implement -> verify, no vague praise, ...) are recognised in
the user's own messages in English, Spanish and Chinese and stored by name, so the capsule states them in
the language the user writes in. Anything else comes as the user's (or the host agent's) own words.
"""

from __future__ import annotations

import re
from typing import Final

# name -> the statements that express it (matched case-insensitively).
_STATEMENTS: Final[dict[str, str]] = {
    "conclusions_first": (
        r"\b(?:conclusions?|bottom line|tl;?dr|answers?|verdict) first\b|\b(?:lead|start) with the (?:conclusion|answer"
        r"|bottom line)\b|\b(?:primero|empieza (?:por|con)) (?:la )?(?:conclusi[oó]n|respuesta)\b"
        r"|\bconclusi[oó]n primero\b|先(?:说|给|讲)结论|结论先行|直接(?:说|给)结论"
    ),
    "plan_implement_verify": (
        r"\bplan first\b|\bplan,? (?:then )?implement,? (?:then )?(?:verify|test)|\bplan before (?:any )?(?:code|coding"
        r"|implementing)\b|\bprimero (?:el |un )?plan\b|\bplanifica(?:r)? antes de\b|先(?:做|出|写)?计划|先规划再"
        r"|计划.{0,4}实现.{0,4}验证"
    ),
    "no_vague_praise": (
        r"\b(?:no|stop|skip|don'?t|without) (?:the )?(?:vague |empty |generic )?(?:praise|flattery|compliments)\b"
        r"|\bdon'?t (?:flatter|praise) me\b|\b(?:sin|no (?:me )?(?:hagas|des)) (?:halagos|elogios|cumplidos)\b"
        r"|\bdeja de (?:halagar|elogiar|adular)|不要(?:夸|吹捧|恭维|拍马屁)|别(?:夸|吹捧|恭维)|少(?:夸|说客套)"
    ),
    "verdict_before_steps": (
        r"\b(?:first )?tell me (?:if|whether) (?:it'?s|this is|it is) worth\b|\bdime (?:primero )?si vale la pena\b"
        r"|先(?:告诉|说)(?:我)?值不值得"
    ),
    "concise": (
        r"\b(?:be|keep it) (?:brief|concise|short)\b|\bshorter answers?\b|\bno fluff\b|\bs[eé] (?:breve|concis[oa])\b"
        r"|\brespuestas? (?:m[aá]s )?cortas?\b|简洁一?点|简短一?点|别啰嗦|不要啰嗦"
    ),
    "ask_before_changes": (
        r"\bask (?:me )?before (?:you )?(?:changing|deleting|pushing|committing|making big changes)\b"
        r"|\bpreg[uú]ntame antes de\b|(?:改|删|提交|推送)之前(?:先)?问(?:我|一下)"
    ),
    "specific_recommendations": (
        r"\b(?:give me|i want|i need) (?:concrete|specific|actionable) (?:recommendations|suggestions|advice)\b"
        r"|\brecomendaciones (?:concretas|espec[ií]ficas)\b|(?:给|要)(?:我)?具体(?:的)?建议"
    ),
}
# A word each statement of a preference contains: the patterns run only on a message that has one (a message
# with none costs a few substring checks instead of seven regular expressions).
_CUES: Final[dict[str, tuple[str, ...]]] = {
    "conclusions_first": ("first", "lead with", "start with", "conclusi", "primero", "empieza", "结论"),
    "plan_implement_verify": ("plan", "计划", "规划"),
    "no_vague_praise": (
        "praise",
        "flatter",
        "compliment",
        "halag",
        "elogi",
        "cumplido",
        "adular",
        "夸",
        "恭维",
        "吹捧",
        "拍马屁",
        "客套",
    ),
    "verdict_before_steps": ("worth", "vale la pena", "值不值得"),
    "concise": ("brief", "concise", "short", "fluff", "breve", "concis", "corta", "简洁", "简短", "啰嗦"),
    "ask_before_changes": ("ask", "preg", "问"),
    "specific_recommendations": ("recommend", "suggestion", "advice", "recomendacion", "建议"),
}
_COMPILED: Final = [(name, _CUES[name], re.compile(pattern, re.IGNORECASE)) for name, pattern in _STATEMENTS.items()]
KNOWN: Final = tuple(_STATEMENTS)

# How each known preference reads in the capsule, per language.
TEXTS: Final[dict[str, dict[str, str]]] = {
    "conclusions_first": {
        "en": "Lead with the conclusion, then the details.",
        "es": "Primero la conclusión, después los detalles.",
        "zh": "先给结论，再讲细节。",
        "ja": "まず結論、その後に詳細。",
        "fr": "D'abord la conclusion, ensuite les détails.",
        "pt": "Primeiro a conclusão, depois os detalhes.",
        "de": "Zuerst das Fazit, dann die Details.",
    },
    "plan_implement_verify": {
        "en": "Technical work: plan, then implement, then verify.",
        "es": "Trabajo técnico: planificar, implementar y verificar.",
        "zh": "技术工作：先计划，再实现，最后验证。",
        "ja": "技術作業は、計画→実装→検証の順で。",
        "fr": "Travail technique : planifier, implémenter, puis vérifier.",
        "pt": "Trabalho técnico: planejar, implementar e depois verificar.",
        "de": "Technische Arbeit: planen, umsetzen, dann prüfen.",
    },
    "no_vague_praise": {
        "en": "No vague praise; say what is good or wrong, specifically.",
        "es": "Nada de elogios vagos; di en concreto qué está bien o mal.",
        "zh": "不要空泛的夸奖，具体指出好在哪里、错在哪里。",
        "ja": "曖昧な褒め言葉は不要。良い点・悪い点を具体的に。",
        "fr": "Pas d'éloges vagues ; dire précisément ce qui va ou non.",
        "pt": "Nada de elogios vagos; diga concretamente o que está bom ou errado.",
        "de": "Kein vages Lob; konkret sagen, was gut oder falsch ist.",
    },
    "verdict_before_steps": {
        "en": "Say whether it is worth doing before giving steps.",
        "es": "Di si vale la pena antes de dar los pasos.",
        "zh": "先判断值不值得做，再给步骤。",
        "ja": "手順の前に、やる価値があるかを述べる。",
        "fr": "Dire si cela vaut la peine avant de donner les étapes.",
        "pt": "Diga se vale a pena antes de dar os passos.",
        "de": "Erst sagen, ob es sich lohnt, dann die Schritte.",
    },
    "concise": {
        "en": "Keep answers short and to the point.",
        "es": "Respuestas breves y al grano.",
        "zh": "回答简洁，直奔主题。",
        "ja": "回答は短く要点だけ。",
        "fr": "Réponses courtes et directes.",
        "pt": "Respostas curtas e diretas.",
        "de": "Kurze Antworten, direkt zur Sache.",
    },
    "ask_before_changes": {
        "en": "Ask before large or destructive changes.",
        "es": "Pregunta antes de cambios grandes o destructivos.",
        "zh": "大改动或破坏性操作前先问。",
        "ja": "大きな変更や破壊的な操作の前に確認する。",
        "fr": "Demander avant tout changement important ou destructif.",
        "pt": "Pergunte antes de mudanças grandes ou destrutivas.",
        "de": "Vor großen oder zerstörerischen Änderungen fragen.",
    },
    "specific_recommendations": {
        "en": "Give concrete, specific recommendations.",
        "es": "Da recomendaciones concretas y específicas.",
        "zh": "给出具体、可执行的建议。",
        "ja": "具体的で実行可能な提案をする。",
        "fr": "Donner des recommandations concrètes et précises.",
        "pt": "Dê recomendações concretas e específicas.",
        "de": "Konkrete, spezifische Empfehlungen geben.",
    },
}
assert set(TEXTS) == set(_STATEMENTS) == set(_CUES)


def statements(text: str) -> list[str]:
    """The known preferences a user's message states outright."""
    folded = text.casefold()
    return [name for name, cues, pattern in _COMPILED if any(c in folded for c in cues) and pattern.search(text)]


def render(key: str, text: str, language: str) -> str:
    """A preference as the capsule shows it: a known one in `language`, the user's own words as given."""
    known = TEXTS.get(key)
    if known is None:
        return text
    return known.get(language, known["en"])
