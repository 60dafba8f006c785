"""The capsule's own words in each language style memory writes it in (style/language.py detects them)."""

from __future__ import annotations

from typing import Final

_EN: Final = {
    "header": "Mirror the user's style lightly, never mechanically; keep slang, dialect and emoji out of serious, "
    "legal or medical replies.",
    "profile": "How they like to work",
    "voice": "How they write",
    "example": "e.g.",
    "empty": "Nothing learned yet: reply in the user's language and a neutral register.",
    "catchphrase": "catchphrase",
    "emoji": "emoji",
    "emoticon": "emoticon",
    "dialect": "dialect",
    "idiolect": "their own phrase",
    "register": "register",
    "punctuation": "punctuation",
}
STRINGS: Final[dict[str, dict[str, str]]] = {
    "en": _EN,
    "es": {
        "header": "Refleja el estilo del usuario con moderación, nunca de forma mecánica; nada de jerga, dialecto "
        "ni emojis en respuestas serias, legales o médicas.",
        "profile": "Cómo prefiere trabajar",
        "voice": "Cómo escribe",
        "example": "p. ej.",
        "empty": "Aún no se ha aprendido nada: responde en el idioma del usuario y con un registro neutro.",
        "catchphrase": "muletilla",
        "emoji": "emoji",
        "emoticon": "emoticono",
        "dialect": "dialecto",
        "idiolect": "expresión propia",
        "register": "registro",
        "punctuation": "puntuación",
    },
    "zh": {
        "header": "适度贴近用户的风格，切勿机械模仿；严肃、法律或医疗类回答中不用俚语、方言和表情。",
        "profile": "协作偏好",
        "voice": "说话习惯",
        "example": "例：",
        "empty": "尚未学到任何习惯：用用户的语言、以中性语气回答。",
        "catchphrase": "口头禅",
        "emoji": "表情符号",
        "emoticon": "颜文字",
        "dialect": "方言",
        "idiolect": "个人用语",
        "register": "语体",
        "punctuation": "标点",
    },
    "ja": {
        "header": "ユーザーの文体は控えめに反映し、機械的に真似しない。"
        "深刻・法律・医療の回答ではスラング・方言・絵文字を使わない。",
        "profile": "協働の好み",
        "voice": "書き方の癖",
        "example": "例：",
        "empty": "まだ何も学習していません。ユーザーの言語で、中立的な文体で答えてください。",
        "catchphrase": "口癖",
        "emoji": "絵文字",
        "emoticon": "顔文字",
        "dialect": "方言",
        "idiolect": "独自の表現",
        "register": "文体",
        "punctuation": "句読点",
    },
    "fr": {
        "header": "Refléter le style de l'utilisateur avec légèreté, jamais mécaniquement ; pas d'argot, de "
        "dialecte ni d'emoji dans les réponses sérieuses, juridiques ou médicales.",
        "profile": "Comment il aime travailler",
        "voice": "Comment il écrit",
        "example": "ex.",
        "empty": "Rien d'appris encore : répondre dans la langue de l'utilisateur, sur un ton neutre.",
        "catchphrase": "tic de langage",
        "emoji": "emoji",
        "emoticon": "émoticône",
        "dialect": "dialecte",
        "idiolect": "expression à lui",
        "register": "registre",
        "punctuation": "ponctuation",
    },
    "pt": {
        "header": "Espelhe o estilo do usuário com leveza, nunca mecanicamente; nada de gíria, dialeto ou emoji em "
        "respostas sérias, jurídicas ou médicas.",
        "profile": "Como prefere trabalhar",
        "voice": "Como escreve",
        "example": "ex.",
        "empty": "Nada aprendido ainda: responda no idioma do usuário, em tom neutro.",
        "catchphrase": "bordão",
        "emoji": "emoji",
        "emoticon": "emoticon",
        "dialect": "dialeto",
        "idiolect": "expressão própria",
        "register": "registro",
        "punctuation": "pontuação",
    },
    "de": {
        "header": "Den Stil des Nutzers behutsam spiegeln, nie mechanisch; kein Slang, Dialekt oder Emoji in "
        "ernsten, rechtlichen oder medizinischen Antworten.",
        "profile": "Wie er arbeiten möchte",
        "voice": "Wie er schreibt",
        "example": "z. B.",
        "empty": "Noch nichts gelernt: in der Sprache des Nutzers und neutral antworten.",
        "catchphrase": "Redewendung",
        "emoji": "Emoji",
        "emoticon": "Emoticon",
        "dialect": "Dialekt",
        "idiolect": "eigene Wendung",
        "register": "Tonlage",
        "punctuation": "Zeichensetzung",
    },
}


def words(language: str) -> dict[str, str]:
    return STRINGS.get(language, _EN)
