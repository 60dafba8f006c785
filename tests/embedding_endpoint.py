"""The deterministic fake embedder served as an OpenAI-compatible endpoint, so a real server process
(`threadloom serve`) uses it through its real `openai` back-end."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import HashingEmbedder


@contextmanager
def hashing_endpoint() -> Iterator[dict[str, str]]:
    """The environment that points a server at the fake, for as long as the block runs."""
    embedder = HashingEmbedder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            vectors = embedder.embed_documents(list(body["input"]))
            data = [{"index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vectors)]
            payload = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {
            "THREADLOOM_EMBEDDER": "openai",
            "THREADLOOM_EMBEDDER_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
            "THREADLOOM_EMBEDDER_MODEL": "hashing",
        }
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
