"""The e5 tokenizer: SentencePiece unigram over XLM-R's vocabulary, as the model was trained with.

Text is normalised codepoint by codepoint (the map in the model file), runs of spaces
collapse, a leading space is added, and spaces become the metaspace `▁`. No vocabulary piece
has a metaspace anywhere but first, so every `▁` starts a piece: each word is segmented on
its own (highest total piece score, Viterbi) and words are cached.
"""

from __future__ import annotations

import re
from array import array
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from threadloom.search.e5_file import E5Vocabulary

METASPACE = "\u2581"
UNKNOWN_PENALTY = 10.0  # an unknown character scores this far under the rarest piece
WORD_CACHE = 1 << 16
_SPACES = re.compile(" {2,}")
_WORD = re.compile(METASPACE + "[^" + METASPACE + "]*")


class E5Tokenizer:
    def __init__(self, vocabulary: E5Vocabulary) -> None:
        self._normalise = str.maketrans(vocabulary.normalise)
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(vocabulary.pieces):
            if piece and index != vocabulary.unk:
                self._ids.setdefault(piece, index)
        self._scores = array("f", vocabulary.scores.tobytes())
        self._unk = vocabulary.unk
        self._unk_score = float(vocabulary.scores.min()) - UNKNOWN_PENALTY
        self._longest = max(len(piece) for piece in self._ids)
        self.bos, self.eos = vocabulary.bos, vocabulary.eos
        self._word = lru_cache(maxsize=WORD_CACHE)(self._segment)

    def ids(self, text: str) -> list[int]:
        """The content token ids of `text` (no <s> and </s>)."""
        normal = _SPACES.sub(" ", text.translate(self._normalise))
        if not normal.startswith(" "):
            normal = " " + normal
        out: list[int] = []
        for word in _WORD.findall(normal.replace(" ", METASPACE)):
            out.extend(self._word(word))
        return out

    def _segment(self, word: str) -> tuple[int, ...]:
        n = len(word)
        best = [float("-inf")] * (n + 1)
        best[0] = 0.0
        piece_at = [0] * (n + 1)
        start_at = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            if here == float("-inf"):
                continue
            for end in range(i + 1, min(n, i + self._longest) + 1):
                index = self._ids.get(word[i:end])
                if index is not None and here + self._scores[index] > best[end]:
                    best[end] = here + self._scores[index]
                    piece_at[end], start_at[end] = index, i
            if here + self._unk_score > best[i + 1]:
                best[i + 1] = here + self._unk_score
                piece_at[i + 1], start_at[i + 1] = self._unk, i
        pieces: list[int] = []
        end = n
        while end > 0:
            pieces.append(piece_at[end])
            end = start_at[end]
        return tuple(reversed(pieces))
