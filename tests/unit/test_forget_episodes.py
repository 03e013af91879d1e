"""Forgetting a user reaches the tool calls and results of agent episodes, wherever copied.

Alice's agent run left an episode (a tool called with her e-mail, a tool result holding an
API key, a long result cut where few-shot episodes cut it) in her trajectory and in the
archive entry made from it; Bob's later runs were shown that entry as a few-shot episode
(as turns, with ``shot_steps``, and as a text transcript), his own agent called the tool with
Alice's e-mail, and an export kept the exemplars. After ``forget_user``, no file under the
project holds any of Alice's values, and Bob's own texts are still there.
"""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.store.memory import InMemoryStore

from agentic_loop.distill import export_datasets, forget_user
from agentic_loop.distill.forget.references import ERASED, episode_copies, scrub_references
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.distill.forget.stores import erase_stores, open_stores
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.memory import Archive, HashingEmbedder
from agentic_loop.prompt_format import SHOT_RESULT_CHARS
from agentic_loop.trajectories import (
    Round,
    Trajectory,
    TrajectoryLog,
    fresh_draft_prompt,
    hash_user_id,
)

ALICE, BOB = "alice.quist@example.org", "bob"
EMAIL = "zephyrine.quist@example.org"
KEY = "sk-2Hkd9Gf2leMeR3pzh84KpLMcNfAQLKHu7qnQTupqziQPtDu7"
NOTE = "Zephyrine asked for the Vlissingen depot"       # the model's own text in the episode
CUT = "Halvorsen Street 17 is the delivery address"       # inside a result longer than a shot
PARCEL = "QX-48213"                          # short: found in copies only where they are whole
PLANTED = (EMAIL, KEY, NOTE, CUT, PARCEL)
BOB_OWN = ("Skyloft Kites order book", "Festival of kites and sky")


#: the schemas the agents were offered (an export trains only on episodes that recorded them)
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in ("crm_lookup", "history")]


def alice_episode() -> Episode:
    long_result = CUT + "; " + "history line. " * (SHOT_RESULT_CHARS // 10)
    return Episode(steps=[
        ModelStep(text=NOTE, tool_calls=[ToolCall(name="crm_lookup", args={
            "email": EMAIL, "parcels": [PARCEL]}, id="c1")]),
        ToolStep(call_id="c1", name="crm_lookup", args={"email": EMAIL, "parcels": [PARCEL]},
                 content=f"customer on file; api_key={KEY}"),
        ModelStep(tool_calls=[ToolCall(name="history", args={"of": EMAIL}, id="c2")]),
        ToolStep(call_id="c2", name="history", args={"of": EMAIL}, content=long_result),
        ModelStep(text="Your parcel ships from the depot on Monday.")],
        final="Your parcel ships from the depot on Monday.", tools=TOOLS)


def bob_episode() -> Episode:
    """Bob's agent copied the exemplar's argument whole; its result is Bob's own."""
    return Episode(steps=[
        ModelStep(tool_calls=[ToolCall(name="crm_lookup", args={"email": EMAIL}, id="b1")]),
        ToolStep(call_id="b1", name="crm_lookup", args={"email": EMAIL}, content=BOB_OWN[0]),
        ModelStep(text=BOB_OWN[1])], final=BOB_OWN[1], tools=TOOLS)


def _grep(root: Path, values: tuple[str, ...]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for value in values:
            if value.encode() in data or json.dumps(value)[1:-1].encode() in data:
                found.setdefault(value, []).append(str(path.relative_to(root)))
    return found


def leaked_in(value: object) -> list[str]:
    dumped = json.dumps(value)
    return [v for v in PLANTED if v in dumped or json.dumps(v)[1:-1] in dumped]


def _bob_run(style: str, entry_id: str, task: str) -> Trajectory:
    prompt = fresh_draft_prompt(task, exemplars=[
        {"id": entry_id, "task": "Where is my parcel?",
         "output": "Your parcel ships from the depot on Monday.", "episode": alice_episode()}],
        exemplars_as=style)  # type: ignore[arg-type]
    return Trajectory(architecture="archive_refine", model_id="m", task=task,
                      exemplar_ids=[entry_id],
                      rounds=[Round(iteration=0, draft=BOB_OWN[1], score=9.0, passed=True,
                                    prompt=prompt, episode=bob_episode())],
                      final_output=BOB_OWN[1], final_score=9.0, accepted=True, latency_s=1.0,
                      user_id_hash=hash_user_id(BOB), consent=True)


def test_forgetting_a_user_erases_her_episodes_and_every_copy(tmp_path: Path) -> None:
    root = tmp_path / "project"
    trajectories, archive_root = root / "data" / "trajectories", root / "data" / "archive"
    log = TrajectoryLog(trajectories)
    a1 = Trajectory(architecture="reflection", model_id="m", task="Where is my parcel?",
                    rounds=[Round(iteration=0, draft="Your parcel ships from the depot on Monday.",
                                  score=9.0, passed=True, episode=alice_episode())],
                    final_output="Your parcel ships from the depot on Monday.", final_score=9.0,
                    accepted=True, latency_s=1.0, user_id_hash=hash_user_id(ALICE), consent=True)
    log.append(a1)
    with Archive(archive_root, embedder=HashingEmbedder()) as archive:
        entry = archive.add(a1.task, a1.final_output or "", score=9.0, trajectory_id=a1.id,
                            episode=alice_episode()).entry
    log.append(_bob_run("text", entry.id, "Tagline for a kite festival"))
    export_datasets([trajectories], root / "runs" / "data", pii="off", include_exemplars=True,
                    embedder=HashingEmbedder(), dedup_threshold=None)
    manifest = json.loads((root / "runs" / "data" / "manifest.json").read_text())
    agent_rows = manifest["episodes"]["sft"]["rows"]
    b2 = _bob_run("turns", entry.id, "Slogan for a kite festival")
    log.append(b2)
    with Archive(archive_root, embedder=HashingEmbedder()) as archive:  # Bob's answer, archived
        bob_entry = archive.add(b2.task, BOB_OWN[1], score=9.0, trajectory_id=b2.id,
                                episode=bob_episode()).entry
    store = InMemoryStore()  # the same two entries in a LangGraph store
    store.put(("archive",), entry.id, entry.model_dump(mode="json"))
    store.put(("archive",), bob_entry.id, bob_entry.model_dump(mode="json"))
    assert set(_grep(root, PLANTED)) == set(PLANTED)
    plan = forget_user(ALICE, data=root / "data", trajectories=[trajectories],
                       memory=[archive_root], exports=[root / "runs"], registries=[],
                       stores=[store], audit_log=None, embedder=HashingEmbedder(), dry_run=True)
    assert [(p.kind, p.removed, p.scrubbed) for p in plan.erased()
            if p.kind in ("memory", "store")] == [("memory", 1, 1), ("store", 1, 1)]

    report = forget_user(ALICE, data=root / "data", trajectories=[trajectories],
                         memory=[archive_root], exports=[root / "runs"], registries=[],
                         stores=[store], audit_log=None, embedder=HashingEmbedder())

    assert report.counts()["trajectories"] == 1 and report.counts()["archive_entries"] == 1
    assert _grep(root, PLANTED) == {}
    export = root / "runs" / "data"  # the manifest counts the agent rows that are left
    left = [json.loads(line) for line in (export / "sft.jsonl").read_text().splitlines()
            if line.strip()] if (export / "sft.jsonl").is_file() else []
    episodes = json.loads((export / "manifest.json").read_text())["episodes"]
    assert episodes["sft"]["rows"] == sum("episode" in r["metadata"] for r in left) < agent_rows
    kept = TrajectoryLog(trajectories).read()
    assert len(kept) == 2
    for run in kept:
        episode = run.rounds[0].episode
        assert episode is not None and episode.steps[0].tool_calls[0].args == {  # type: ignore[union-attr]
            "email": ERASED}
        assert episode.results_of("crm_lookup") == [BOB_OWN[0]] and episode.final == BOB_OWN[1]
    [turns] = [r for r in kept if r.rounds[0].prompt.shot_steps]  # type: ignore[union-attr]
    steps = turns.rounds[0].prompt.shot_steps["shot1"]  # type: ignore[union-attr]
    assert [m["role"] for m in steps] == ["assistant", "tool", "assistant", "tool"]
    assert steps[0]["tool_calls"][0]["function"] == {
        "name": "crm_lookup", "arguments": {"email": ERASED, "parcels": [ERASED]}}
    assert set(_grep(root, BOB_OWN)) == set(BOB_OWN)
    with Archive(archive_root, embedder=HashingEmbedder()) as archive:
        [kept_entry] = archive.entries()
    assert kept_entry.id == bob_entry.id and kept_entry.created_at == bob_entry.created_at
    assert kept_entry.episode is not None and kept_entry.episode.final == BOB_OWN[1]
    assert kept_entry.episode.steps[1].args == {"email": ERASED}  # type: ignore[union-attr]
    assert [(p.kind, p.removed, p.scrubbed) for p in report.erased()
            if p.kind in ("memory", "store")] == [("memory", 1, 1), ("store", 1, 1)]
    [item] = store.search(("archive",))
    assert item.key == bob_entry.id and item.value["output"] == BOB_OWN[1]
    assert leaked_in(item.value) == [] and BOB_OWN[0] in json.dumps(item.value)


def test_a_run_shown_an_erased_entry_loses_its_shot_whole_and_keeps_the_others() -> None:
    prompt = fresh_draft_prompt("Slogan", exemplars_as="turns", exemplars=[
        {"id": "e1", "task": "Where?", "output": "Monday.", "episode": alice_episode()},
        {"id": "e2", "task": "Kites?", "output": "Up.", "episode": bob_episode()}])
    run = {"task": "Slogan", "exemplar_ids": ["e1", "e2"],
           "rounds": [{"draft": "x", "prompt": json.loads(prompt.model_dump_json())}]}
    assert scrub_references(run, {"e1": ("Where?", "Monday.", *episode_copies(alice_episode()))})
    shots = run["rounds"][0]["prompt"]["shot_steps"]
    assert {s for _, s in prompt.model_copy(update={"shot_steps": {
        "shot1": shots["shot1"]}}).step_texts()} == {ERASED}  # the short argument too
    assert shots["shot1"][1]["name"] == "crm_lookup"
    # Bob's shot keeps its own texts; the argument it shares with Alice's is an exact copy
    assert shots["shot2"][1]["content"] == BOB_OWN[0]
    assert shots["shot2"][0]["tool_calls"][0]["function"]["arguments"] == {"email": ERASED}


def test_an_erased_store_item_names_its_episode_texts() -> None:
    store = InMemoryStore()
    store.put(("archive", "x"), "e1", {"task": "Where?", "output": "Monday.", "trajectory_id": "r1",
                                       "episode": alice_episode().model_dump(mode="json")})
    with open_stores([store]) as opened:
        found = erase_stores(opened, Selection(user_hash="h"), run_ids={"r1"})
    texts = found.erased["e1"]
    assert texts[:2] == ("Where?", "Monday.") and EMAIL in texts and NOTE in texts
    assert any(KEY in t for t in texts)
    assert any(t.startswith(CUT) and len(t) == SHOT_RESULT_CHARS for t in texts)


def test_episode_copies_reads_nothing_from_no_episode_or_a_broken_one() -> None:
    assert episode_copies(None) == () and episode_copies({"steps": [{"kind": "?"}]}) == ()
    assert "4" not in episode_copies(Episode(steps=[ToolStep(name="calc", content="4")]))
