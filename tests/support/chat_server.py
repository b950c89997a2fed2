"""Fixtures for the generation tests (made available by ``tests/integration/conftest.py``): the KernelBench
problems, and a real HTTP server on loopback that speaks the OpenAI-compatible chat-completions protocol
(``POST /v1/chat/completions``, ``GET /v1/models``).

The server is not a mock of the client: the ``openai`` package talks HTTP to it over a socket. Each test scripts what
it answers through a *responder* (request body, number of earlier requests for the same prompt and seed) -> ``Reply``;
the server counts requests, measures the largest number in flight at once, checks the bearer key and answers 404
for a model it does not serve, as vLLM does.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from kbstudy.harness.problems import load_problems
from kbstudy.pipeline.data import resolve_kernelbench_dir

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "fixtures" / "generate"
SERVED_MODEL = "kbstudy-test/coder-7b"
API_KEY_ENV = "KBSTUDY_TEST_API_KEY"
#: A distinctive key: tests grep every written file for it.
API_KEY = "sk-kbstudy-test-5e3f9c0d1b7a"


@pytest.fixture(scope="session")
def problems_path() -> Path:
    """The KernelBench problems file in the data folder (``kbstudy.pipeline.data.resolve_kernelbench_dir``); skips
    when it is absent. (Not named ``kernelbench_dir``: that fixture, in ``support.kernelbench_fixtures``, needs more
    files.)"""
    path = resolve_kernelbench_dir(required=False)
    if not (path / "kernelbench_levels_1-3.jsonl").is_file():
        pytest.skip(f"KernelBench problems not found in {path} (set KBSTUDY_KERNELBENCH_DIR)")
    return path / "kernelbench_levels_1-3.jsonl"


@pytest.fixture(scope="session")
def problems(problems_path: Path):
    """Three real level-1 problems: 19_ReLU, 23_Softmax and 1_Square_matrix_multiplication_."""
    return load_problems(problems_path, levels=[1], problem_ids=[1, 19, 23])


def recorded(name: str) -> dict:
    """A recorded response body from ``data/<name>.json``."""
    return json.loads((DATA / f"{name}.json").read_text())


@dataclasses.dataclass
class Reply:
    """What the server answers: ``status``, a ``body`` (dict: sent as JSON; str: sent as is), extra ``headers`` and
    a ``delay_s`` before answering."""

    status: int = 200
    body: Any = None
    headers: dict = dataclasses.field(default_factory=dict)
    delay_s: float = 0.0


def error_reply(status: int, message: str, headers: dict | None = None) -> Reply:
    """An error in the OpenAI/vLLM format."""
    return Reply(status, {"error": {"message": message, "type": "error", "param": None, "code": status}},
                 headers or {})


@dataclasses.dataclass
class SeenRequest:
    path: str
    body: Any
    authorization: str | None
    received_s: float


class LoopbackChatServer:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 speaking the chat-completions protocol (see the module docstring)."""

    def __init__(self, models=(SERVED_MODEL,), api_key: str | None = API_KEY):
        self.models = list(models)
        self.api_key = api_key
        self.responder: Callable[[dict, int], Reply] = lambda body, n: Reply(200, recorded("vllm_ok_triton"))
        self.requests: list[SeenRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, reply: Reply):
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
                data = body.encode() if isinstance(body, str) else body
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if server.api_key is None:
                    return True
                return self.headers.get("Authorization") == f"Bearer {server.api_key}"

            def do_GET(self):
                server._record(self.path, None, self.headers.get("Authorization"))
                if not self._authorized():
                    return self._send(error_reply(401, "Incorrect API key provided."))
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(Reply(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "kbstudy-test"}
                        for m in server.models]}))
                return self._send(error_reply(404, f"no route {self.path}"))

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                server._record(self.path, body, self.headers.get("Authorization"))
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        return self._send(error_reply(404, f"no route {self.path}"))
                    if not self._authorized():
                        return self._send(error_reply(401, "Incorrect API key provided."))
                    if body.get("model") not in server.models:
                        return self._send(error_reply(404, f"The model `{body.get('model')}` does not exist."))
                    key = json.dumps([body.get("messages"), body.get("seed")], sort_keys=True)
                    with server._lock:
                        n = server._seen.get(key, 0)
                        server._seen[key] = n + 1
                    return self._send(server.responder(body, n))
                finally:
                    with server._lock:
                        server.in_flight -= 1

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that timed out and left: not an error here
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _record(self, path: str, body: Any, authorization: str | None) -> None:
        with self._lock:
            self.requests.append(SeenRequest(path, body, authorization, time.perf_counter()))

    @property
    def chat_requests(self) -> list[SeenRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def server():
    srv = LoopbackChatServer()
    yield srv
    srv.stop()


@pytest.fixture
def api_key_env(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, API_KEY)
    return API_KEY_ENV


@pytest.fixture
def write_config(tmp_path, server):
    """Write a model configuration for the loopback server; keyword arguments override fields. Returns its path."""

    def write(name: str = "test-coder-triton", **overrides) -> Path:
        data = {"name": name, "model": SERVED_MODEL, "base_url": server.base_url, "api_key_env": API_KEY_ENV,
                "temperature": 0.7, "max_tokens": 2048, "samples_per_problem": 2, "prompt_template": "kernelbench_v1",
                "backend": "triton", "concurrency": 4, "request_timeout_s": 10, "max_retries": 3,
                "backoff_initial_s": 0.02, "backoff_max_s": 0.5, "seed": 100}
        data.update(overrides)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
