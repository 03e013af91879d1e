"""One fake LangSmith API for the suite: a real HTTP server on 127.0.0.1, kept in memory.

Why one: the trace tests (runs and feedback a ``langsmith.Client`` posts and
patches) and the review tests (annotation queues, and the feedback people give)
talk to the same API; one server that serves every endpoint they use keeps the
two from drifting apart. Nothing mocks the client: it speaks HTTP to this server.

Served: ``GET /info``, ``GET /sessions?name=`` (a project by name), ``POST /runs``,
``PATCH /runs/{id}``, ``POST /feedback``, ``GET /feedback?run=&key=``,
``GET|POST /annotation-queues`` and ``POST /annotation-queues/{id}/runs``
(refused with 403 while ``refuse_adds`` is set). Anything else is a 404.

Example:
    >>> from langsmith import Client
    >>> fake = FakeLangSmith()
    >>> client = Client(api_url=fake.url, api_key="test-key", auto_batch_tracing=False)
    >>> queue = client.create_annotation_queue(name="q")
    >>> [q.name for q in client.list_annotation_queues(name="q")]
    ['q']
    >>> fake.close()
"""

from __future__ import annotations

import gzip
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

STAMP = "2026-01-01T00:00:00+00:00"


class FakeLangSmith:
    """Runs, feedback, projects and annotation queues, kept in memory, over HTTP.

    ``runs``: run id -> the run as posted and patched; ``feedback``: every feedback,
    posted by a client or given by :meth:`give`; ``projects``: name -> id of the
    projects runs were posted to; ``queues``: id -> annotation queue; ``queued``:
    queue id -> the run ids added to it.
    """

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.feedback: list[dict[str, Any]] = []
        self.projects: dict[str, str] = {}
        self.queues: dict[str, dict[str, Any]] = {}
        self.queued: dict[str, list[str]] = {}
        self.refuse_adds = False
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def give(self, run_id: str, key: str, *, score: Any = None, value: Any = None,
             comment: str | None = None, user: str = "ana", at: str = STAMP) -> None:
        """A person's feedback on a run, as LangSmith lists it back."""
        with self.lock:
            self.feedback.append({
                "id": str(uuid.uuid4()), "created_at": at, "modified_at": at, "run_id": run_id,
                "trace_id": None, "key": key, "score": score, "value": value,
                "comment": comment, "feedback_source": {"type": "app", "user_name": user}})

    # -- the endpoints, called with the lock held -----------------------------------------

    def get(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        offset = int(query.get("offset", ["0"])[0])
        if path.endswith("/info"):
            return 200, {"version": "test"}
        if path.endswith("/sessions"):  # read_project(project_name=)
            name = query.get("name", [""])[0]
            known = self.projects.get(name)
            return 200, [{"id": known, "name": name, "tenant_id": known,
                          "start_time": "2026-01-01T00:00:00",
                          "reference_dataset_id": None}] if known else []
        if path.endswith("/annotation-queues"):
            names = query.get("name")
            found = [q for q in self.queues.values() if not names or q["name"] in names]
            return 200, found[offset:]
        if path.endswith("/feedback"):
            runs, keys = set(query.get("run", [])), set(query.get("key", []))
            found = [f for f in self.feedback if (not runs or f["run_id"] in runs)
                     and (not keys or f["key"] in keys)]
            return 200, found[offset:]
        return 404, {"detail": "not found"}

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        if path.endswith("/runs") and "/annotation-queues/" in path:
            if self.refuse_adds:
                return 403, {"detail": "forbidden"}
            self.queued.setdefault(path.split("/")[-2], []).extend(body)
            return 200, {}
        if path.endswith("/annotation-queues"):
            queue = {"id": body["id"], "name": body["name"],
                     "description": body.get("description"),
                     "rubric_instructions": body.get("rubric_instructions"),
                     "tenant_id": str(uuid.UUID(int=1)), "created_at": STAMP,
                     "updated_at": STAMP}
            self.queues[body["id"]] = queue
            return 200, queue
        if path.endswith("/runs"):
            self.runs[body["id"]] = body
            if body.get("session_name"):
                self.projects.setdefault(body["session_name"], str(uuid.uuid4()))
            return 200, {}
        if path.endswith("/feedback"):
            self.feedback.append(body)
            return 200, {"id": body.get("id")}
        return 404, {"detail": "not found"}

    def patch(self, path: str, body: Any) -> tuple[int, Any]:
        run_id = path.split("/")[-1]
        run = self.runs.setdefault(run_id, {"id": run_id})
        for key, value in body.items():
            if key == "extra" and isinstance(value, dict):
                run.setdefault("extra", {}).update(value)
            elif value is not None:
                run[key] = value
        return 200, {}


def _handler(fake: FakeLangSmith) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> Any:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            return json.loads(raw or b"{}")

        def _reply(self, answer: tuple[int, Any]) -> None:
            code, payload = answer
            body = json.dumps({} if payload is None else payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _path(self) -> str:
            return urlparse(self.path).path.rstrip("/")

        def do_GET(self) -> None:
            with fake.lock:
                answer = fake.get(self._path(), parse_qs(urlparse(self.path).query))
            self._reply(answer)

        def do_POST(self) -> None:
            body = self._body()
            with fake.lock:
                answer = fake.post(self._path(), body)
            self._reply(answer)

        def do_PATCH(self) -> None:
            body = self._body()
            with fake.lock:
                answer = fake.patch(self._path(), body)
            self._reply(answer)

    return Handler
