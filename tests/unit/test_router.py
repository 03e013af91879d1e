"""The release router: sticky canary routing, shadow calls that never reach the caller, and
routing inside an architecture run (scripted fake models: control flow, no weights)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from agentic_loop.architectures import Reflection
from agentic_loop.distill.release.registry import Registry, RegistryError
from agentic_loop.distill.release.router import Router, served_model_id
from agentic_loop.distill.release.router_shadow import read_shadow_log, rubric_scorer
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import TrajectoryLog


def models(current: object = "current answer", candidate: object = "candidate answer"
           ) -> tuple[ScriptedChatModel, ScriptedChatModel]:
    return (ScriptedChatModel(default=current, default_structured={"ok": True}, model_id="m-v1"),
            ScriptedChatModel(default=candidate, default_structured={"ok": False},
                              model_id="m-v2"))


def user(u: str) -> dict[str, object]:
    return {"configurable": {"user_id": u}}


class Verdict(BaseModel):
    ok: bool


def test_canary_sends_ten_percent_of_users_to_the_candidate_and_sticks():
    router = Router(*models(), fraction=0.1)
    users = [f"user-{i}" for i in range(2000)]
    first = {u: router.invoke("hi", user(u)) for u in users}
    on_candidate = [u for u, a in first.items() if a.response_metadata["route"] == "candidate"]
    assert 0.08 <= len(on_candidate) / len(users) <= 0.12
    for u in users[:300] + on_candidate[:50]:
        again = router.invoke("another question", user(u))
        assert again.response_metadata == first[u].response_metadata
        assert again.content == first[u].content
    chosen = first[on_candidate[0]]
    assert chosen.content == "candidate answer" and chosen.response_metadata["model_name"] == "m-v2"
    kept = first[next(u for u in users if u not in on_candidate)]
    assert kept.content == "current answer" and kept.response_metadata["model_name"] == "m-v1"


def test_the_canary_buckets_are_pinned_across_the_move_to_one_hash():
    """bucket_of now calls agentic_loop.hashing.unit_hash: a canary in flight must keep every
    user in the bucket it had (values computed by the router's own formula before the move)."""
    from agentic_loop.distill.release.router import DEFAULT_SALT, bucket_of
    from agentic_loop.hashing import unit_hash

    assert DEFAULT_SALT == "agentic-loop-canary"
    assert bucket_of("user-1") == 0.058860572962144135
    assert bucket_of("alice") == 0.7979104762751414
    assert bucket_of("run-00001", "s2") == 0.1519948606085003
    assert bucket_of("bob", "x") == unit_hash("bob", "x") != unit_hash("bob")


def test_a_call_with_no_user_goes_to_current_unless_routed_by_prompt():
    assert Router(*models(), fraction=1.0).invoke("hi").response_metadata["route"] == "current"
    by_prompt = Router(*models(), fraction=1.0, unkeyed="prompt")
    assert by_prompt.invoke("hi").response_metadata["route"] == "candidate"


def test_every_entry_point_routes_one_user_alike():
    router = Router(*models(), fraction=0.5)
    users = [f"u{i}" for i in range(40)]
    for u in users:
        routes = {router.invoke("q", user(u)).response_metadata["route"],
                  router.invoke("q", {"metadata": {"user_id": u}}).response_metadata["route"],
                  router.invoke("q", user_id=u).response_metadata["route"],
                  asyncio.run(router.ainvoke("q", user(u))).response_metadata["route"]}
        assert len(routes) == 1
    batch = router.batch(["q"] * len(users), [user(u) for u in users])  # type: ignore[arg-type]
    assert [a.response_metadata["route"] for a in batch] == [
        router.invoke("q", user(u)).response_metadata["route"] for u in users]


def test_structured_output_and_streams_follow_the_route():
    router = Router(*models(), fraction=0.5)
    cand = next(f"u{i}" for i in range(100)
                if router.invoke("q", user(f"u{i}")).response_metadata["route"] == "candidate")
    cur = next(f"u{i}" for i in range(100)
               if router.invoke("q", user(f"u{i}")).response_metadata["route"] == "current")
    structured = router.with_structured_output(Verdict)
    assert structured.invoke("judge", user(cand)) == Verdict(ok=False)
    assert structured.invoke("judge", user(cur)) == Verdict(ok=True)
    raw = router.with_structured_output(Verdict, include_raw=True).invoke("judge", user(cand))
    assert raw["parsed"] == Verdict(ok=False)
    assert raw["raw"].response_metadata["route"] == "candidate"
    chunks = list(router.stream("q", user(cand)))
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    assert total.content == "candidate answer"
    assert total.response_metadata["model_name"] == "m-v2"  # once, not concatenated per chunk


def test_a_streaming_model_streams_through_with_one_model_name():
    def streaming(text: str, name: str) -> GenericFakeChatModel:
        return GenericFakeChatModel(messages=iter([AIMessage(
            text, response_metadata={"model_name": name})] * 3))

    router = Router(streaming("old model speaks", "old"), streaming("new model speaks", "new"),
                    fraction=1.0)
    chunks = list(router.stream("q", user("anyone")))
    assert len(chunks) > 3
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    assert total.content == "new model speaks"
    # the chunks' own names are dropped: the router's one name (model_id_of), not "new" + it
    assert total.response_metadata["model_name"] == "GenericFakeChatModel"
    assert total.response_metadata["route"] == "candidate"

    async def collect() -> str:
        return "".join([str(c.content) async for c in router.astream("q", user("anyone"))])

    assert asyncio.run(collect()) == "new model speaks"


def test_shadow_never_returns_the_candidate_and_logs_both(tmp_path: Path):
    release = threading.Event()

    def slow(messages: object) -> str:
        assert release.wait(10)
        return "exactly four words here"

    current, candidate = models("three words only", slow)
    log = tmp_path / "shadow.jsonl"
    router = Router(current, candidate, mode="shadow", shadow_log=log, scorer=rubric_scorer())
    answer = router.invoke([HumanMessage("Write exactly 4 words.")], user("alice"))
    # the candidate is still blocked: the answer came back without waiting for it
    assert answer.content == "three words only"
    assert answer.response_metadata == {**answer.response_metadata, "route": "current",
                                         "model_name": "m-v1"}
    assert read_shadow_log(log) == []
    release.set()
    assert router.flush(10)
    (record,) = read_shadow_log(log)
    assert record.current_output == "three words only"
    assert record.candidate_output == "exactly four words here"
    assert record.candidate_score == 10.0 and record.current_score is not None
    assert record.current_score < 10.0
    assert record.candidate_latency_s is not None and record.current_latency_s is not None
    assert record.key is not None and "alice" not in record.model_dump_json()
    router.close()


def test_shadow_candidate_errors_and_current_errors(tmp_path: Path):
    current, candidate = models(candidate=RuntimeError("candidate exploded"))
    log = tmp_path / "shadow.jsonl"
    router = Router(current, candidate, mode="shadow", shadow_log=log)
    assert router.invoke("q").content == "current answer"
    chunks = list(router.stream("q"))
    assert "".join(str(c.content) for c in chunks) == "current answer"
    assert asyncio.run(router.ainvoke("q")).content == "current answer"
    broken = Router(ScriptedChatModel(default=RuntimeError("current down")),
                    ScriptedChatModel(default="fine"), mode="shadow",
                    shadow_log=tmp_path / "broken.jsonl")
    with pytest.raises(RuntimeError, match="current down"):
        broken.invoke("q")
    assert router.flush(10) and broken.flush(10)
    records = read_shadow_log(log)
    assert len(records) == 3
    assert all("candidate exploded" in (r.candidate_error or "") for r in records)
    assert [r.current_output for r in records] == ["current answer"] * 3
    (down,) = read_shadow_log(tmp_path / "broken.jsonl")
    assert "current down" in (down.current_error or "") and down.candidate_output == "fine"
    router.close()
    broken.close()


def test_shadow_samples_a_fraction_and_never_queues_without_bound(tmp_path: Path):
    router = Router(*models(), mode="shadow", shadow_log=tmp_path / "s.jsonl", fraction=0.25,
                    seed=7)
    for _ in range(200):
        router.invoke("q")
    assert router.flush(30)
    assert 30 <= len(read_shadow_log(tmp_path / "s.jsonl")) <= 70
    router.close()
    gate = threading.Event()
    stuck = Router(ScriptedChatModel(default="now"),
                   ScriptedChatModel(default=lambda m: "late" if gate.wait(10) else ""),
                   mode="shadow", shadow_log=tmp_path / "t.jsonl", shadow_workers=1,
                   max_pending=2)
    assert [stuck.invoke("q").content for _ in range(5)] == ["now"] * 5
    assert stuck.shadow is not None and stuck.shadow.skipped == 3
    gate.set()
    assert stuck.flush(10)
    stuck.close()


def test_router_inside_an_architecture_run(tmp_path: Path):
    rubric = Rubric.for_constraints(exact_words=2)
    current = ScriptedChatModel(default="current one three", model_id="m-v1")
    candidate = ScriptedChatModel(default="candidate two", model_id="m-v2")
    router = Router(current, candidate, fraction=0.5)
    log = TrajectoryLog(tmp_path / "runs")
    arch = Reflection(router, rubric=rubric, max_iterations=2, trajectories=log)
    assert arch.model_id == "router:m-v1|m-v2"
    routes = {u: router.invoke("q", user(u)).response_metadata["route"]
              for u in ("ann", "bob", "cy", "dee", "eve", "fay")}
    assert set(routes.values()) == {"current", "candidate"}
    for u, route in routes.items():
        before = len(candidate.calls), len(current.calls)
        result = arch.run("Write two words.", user_id=u)
        used = len(candidate.calls) - before[0], len(current.calls) - before[1]
        if route == "candidate":
            assert result.output == "candidate two" and used[0] >= 1 and used[1] == 0
        else:
            assert result.output == "current one three" and used[1] >= 1 and used[0] == 0
    runs = log.read()
    assert len(runs) == len(routes)
    for t in runs:  # the run names the model it was routed to, and so does each round
        expected = "m-v2" if t.final_output == "candidate two" else "m-v1"
        assert t.model_id == expected and {r.model for r in t.rounds} == {expected}


def test_a_canary_run_that_fails_before_its_first_draft_counts_against_its_model(
        tmp_path: Path):
    from agentic_loop.distill.release.monitor_stats import answered_by

    broken = ScriptedChatModel(responses=[RuntimeError("candidate crashed")] * 20,
                               model_id="m-v2")
    router = Router(ScriptedChatModel(default="current one", model_id="m-v1"), broken,
                    fraction=0.5)
    log = TrajectoryLog(tmp_path / "runs")
    arch = Reflection(router, rubric=Rubric.for_constraints(exact_words=2), max_iterations=2,
                      trajectories=log)
    users = ("ann", "bob", "cy", "dee", "eve", "fay")
    routes = {u: router.choose(router.route_key(user(u))) for u in users}
    assert set(routes.values()) == {"current", "candidate"}
    for u in users:
        arch.run("Write two words.", user_id=u)
    for u, t in zip(users, log.read(), strict=True):
        if routes[u] == "candidate":  # no round, no answer: still the candidate's failure
            assert not t.rounds and t.errors and "candidate crashed" in t.errors[0]
        assert answered_by(t) == ("m-v2" if routes[u] == "candidate" else "m-v1")
    # A call's own prompt decides where nobody is named: then the run names no model.
    by_prompt = Router(ScriptedChatModel(model_id="a"), ScriptedChatModel(model_id="b"),
                       unkeyed="prompt")
    assert by_prompt.model_id_for({}) is None and router.model_id_for({}) == "m-v1"


def test_from_registry_routes_current_against_the_candidate(tmp_path: Path):
    reg = Registry(tmp_path / "registry")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"name": "{name}"}}')
        reg.register(tmp_path / name, name="tagline")
    reg.promote("v1")
    router = Router.from_registry(
        reg, "v2", fraction=1.0,
        loader=lambda v: ScriptedChatModel(default=v.version, model_id=served_model_id(v)))
    answer = router.invoke("q", user("x"))
    assert answer.content == "v2" and answer.response_metadata["model_name"] == "tagline-v2"
    assert router.current_id == "tagline-v1"
    with pytest.raises(RegistryError, match="already the current version"):
        Router.from_registry(reg, "v1", loader=lambda v: ScriptedChatModel())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fraction": 1.5}, "fraction=1.5"),
    ({"mode": "blue-green"}, "mode='blue-green'"),
    ({"mode": "shadow"}, "needs shadow_log"),
    ({"unkeyed": "random"}, "unkeyed='random'"),
])
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str):
    with pytest.raises(ConfigError, match=message):
        Router(*models(), **kwargs)  # type: ignore[arg-type]
