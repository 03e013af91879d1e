"""Schema tightening, parsing, the scripted fake, and the OpenAI-compatible client
against a real HTTP server on 127.0.0.1 that speaks the chat-completions protocol."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Literal

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from agentic_loop.models import StructuredOutputError, load_chat_model
from agentic_loop.models.engine.grammar import PLAIN_TEXT_PATTERN, constrained_json_schema
from agentic_loop.models.structured_output import parse_structured
from agentic_loop.testing import ScriptedChatModel, ScriptExhausted


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: Literal["accept", "reject"]
    stars: int = Field(ge=1, le=5)
    note: str = Field(max_length=30)


class Nested(BaseModel):
    review: Review
    tags: list[str]


def test_constrained_schema_closes_objects_and_bounds_strings():
    schema = constrained_json_schema(Nested)
    assert schema["additionalProperties"] is False
    review = schema["$defs"]["Review"]
    assert review["additionalProperties"] is False
    assert review["properties"]["note"] == {
        "maxLength": 30, "title": "Note", "type": "string", "pattern": PLAIN_TEXT_PATTERN}
    assert "pattern" not in review["properties"]["verdict"]  # enums stay as they are
    assert schema["properties"]["tags"]["items"]["maxLength"] == 160


def test_parse_structured_validates_and_names_the_schema():
    ok = parse_structured(AIMessage(content='{"verdict":"accept","stars":5,"note":"x"}'), Review,
                          "m")
    assert ok == Review(verdict="accept", stars=5, note="x")
    with pytest.raises(StructuredOutputError) as err:
        parse_structured(AIMessage(content='{"verdict":"maybe","stars":9,"note":"x"}'), Review, "m")
    assert "Review" in str(err.value) and "maybe" in str(err.value)
    truncated = AIMessage(content='{"verdict":"acc', response_metadata={"finish_reason": "length"})
    with pytest.raises(StructuredOutputError) as err:
        parse_structured(truncated, Review, "m")
    assert "ran out of tokens" in str(err.value)


def test_parse_structured_with_a_dict_schema():
    schema = {"title": "Pair", "type": "object", "properties": {"a": {"type": "integer"}},
              "required": ["a"]}
    assert parse_structured(AIMessage(content='{"a": 2}'), schema, "m") == {"a": 2}
    with pytest.raises(StructuredOutputError):
        parse_structured(AIMessage(content='{"a": "two"}'), schema, "m")


def test_scripted_model_follows_scripts_and_records_calls():
    fake = ScriptedChatModel(
        responses=["one", ValueError("model down"), lambda msgs: f"echo {msgs[-1].content}"],
        structured={"Review": [{"verdict": "reject", "stars": 1, "note": "bad"}],
                    "*": [lambda schema, msgs: {"review": {"verdict": "accept", "stars": 5,
                                                           "note": "good"}, "tags": []}]},
    )
    assert fake.invoke("a").content == "one"
    with pytest.raises(ValueError, match="model down"):
        fake.invoke("b")
    assert fake.invoke("c").content == "echo c"
    assert fake.with_structured_output(Review).invoke("r").stars == 1
    assert fake.with_structured_output(Nested).invoke("n").review.verdict == "accept"
    with pytest.raises(ScriptExhausted, match="no text response left"):
        fake.invoke("d")
    with pytest.raises(ScriptExhausted, match="'Review'"):
        fake.with_structured_output(Review).invoke("r")
    assert [c.kind for c in fake.calls] == (
        ["text"] * 3 + ["structured"] * 2 + ["text", "structured"])
    assert fake.calls[3].schema_name == "Review" and "r" in fake.calls[3].prompt


def test_scripted_model_include_raw_and_defaults():
    fake = ScriptedChatModel(default="same", default_structured={"verdict": "accept", "stars": 2,
                                                                 "note": ""})
    assert [m.content for m in fake.batch(["x", "y"])] == ["same", "same"]
    out = fake.with_structured_output(Review, include_raw=True).invoke("r")
    assert out["parsed"].stars == 2 and out["parsing_error"] is None
    assert json.loads(out["raw"].content)["verdict"] == "accept"


class _ChatServer:
    """A chat-completions server on 127.0.0.1 that replies from a list, recording requests."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, payload: dict) -> None:
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "smol", "object": "model"}]})

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(request)
                text = outer.replies.pop(0)
                self._send({"id": "c1", "object": "chat.completion", "created": 0, "model": "smol",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 3,
                                      "total_tokens": 8}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def chat_server():
    servers: list[_ChatServer] = []

    def make(replies: list[str]) -> _ChatServer:
        servers.append(_ChatServer(replies))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_openai_structured_output_sends_json_schema_and_retries_once(chat_server):
    server = chat_server(['{"verdict": "great"}', '{"verdict":"accept","stars":4,"note":"fine"}'])
    llm = load_chat_model(f"openai:{server.url}")  # probes /models, picks the served model
    result = llm.with_structured_output(Review).invoke("Review this.")
    assert result == Review(verdict="accept", stars=4, note="fine")
    first, second = server.requests
    fmt = first["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Review"
    assert fmt["json_schema"]["schema"]["properties"]["note"]["maxLength"] == 30
    assert "That answer was invalid" in second["messages"][-1]["content"]
    assert first["model"] == "smol"


def test_openai_structured_output_gives_up_with_a_clear_error(chat_server):
    server = chat_server(["not json", "still not json"])
    llm = load_chat_model(f"openai:{server.url}", model="smol")
    with pytest.raises(StructuredOutputError, match="Review"):
        llm.with_structured_output(Review).invoke("Review this.")
    assert len(server.requests) == 2  # exactly one retry


def test_openai_unknown_model_lists_what_is_served(chat_server):
    server = chat_server([])
    with pytest.raises(Exception, match=r"does not serve 'llama'.*\['smol'\]"):
        load_chat_model(f"openai:{server.url}", model="llama")


class Pair(TypedDict):
    """Two numbers."""

    a: int
    b: Annotated[str, ..., "a short label"]


def test_a_typed_dict_is_a_schema_and_answers_are_dicts():
    schema = constrained_json_schema(Pair)
    assert schema["title"] == "Pair" and schema["required"] == ["a", "b"]
    assert schema["properties"]["b"]["description"] == "a short label"
    assert schema["additionalProperties"] is False and schema["properties"]["b"]["maxLength"]
    assert parse_structured(AIMessage(content='{"a": 1, "b": "x"}'), Pair, "m") == {"a": 1,
                                                                                     "b": "x"}
    with pytest.raises(StructuredOutputError, match="Pair"):
        parse_structured(AIMessage(content='{"a": "one", "b": "x"}'), Pair, "m")


def test_openai_structured_output_with_a_typed_dict_and_a_dict_schema(chat_server):
    server = chat_server(['{"a": 2, "b": "two"}', '{"n": 5}', '{"n": 5}'])
    llm = load_chat_model(f"openai:{server.url}", model="smol")
    assert llm.with_structured_output(Pair).invoke("Give a pair.") == {"a": 2, "b": "two"}
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "Pair"
    number = {"title": "Number", "type": "object", "properties": {"n": {"type": "integer"}},
              "required": ["n"]}
    assert llm.with_structured_output(number).invoke("A number.") == {"n": 5}
    out = llm.with_structured_output(number, include_raw=True).invoke("A number.")
    assert out["parsed"] == {"n": 5} and out["raw"].content == '{"n": 5}'
