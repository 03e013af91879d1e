"""Write the walkthrough notebooks from their cell sources and execute them in place.

The notebooks are generated so their code stays reviewable as plain Python,
and executed so the outputs saved in the repo are the ones the code produced:

    .venv/bin/python notebooks/build.py            # all
    .venv/bin/python notebooks/build.py 02         # one

The test suite executes every notebook again (tests/integration/test_notebooks.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).parent
SETUP = """\
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
import warnings
warnings.filterwarnings("ignore", message="IProgress not found")  # no widgets in a saved notebook
import tempfile
from pathlib import Path
workdir = Path(tempfile.mkdtemp(prefix="agentic-loop-nb-"))  # everything this notebook writes
"""

NOTEBOOKS: dict[str, tuple[str, list[tuple[str, str]]]] = {}


def notebook(key: str, title: str, cells: list[tuple[str, str]]) -> None:
    NOTEBOOKS[key] = (title, cells)


notebook("01_reflection", "01 · Reflection (Self-Refine) with a deterministic critic", [
    ("md", """# 01 · Reflection: generate → critique → refine

The simplest loop. A draft is judged by a **rubric**: Python checks compute what can be
computed (here the constraints the task states: an exact word count and forbidden words),
and the model is asked only a few yes/no questions. Python composes the 0-10 score, so every
score can be explained feature by feature. The failed checks become the refine prompt.

Everything runs offline on the embedded SmolLM2-135M (CPU)."""),
    ("code", SETUP + """
from agentic_loop import load_chat_model, Reflection
from agentic_loop.judges import rubric_for_task

llm = load_chat_model("local", max_tokens=48)
task = "Write a tagline for a bookstore in EXACTLY 12 words. Must avoid the words 'we', 'our', and 'discover'."
print(rubric_for_task(task))   # constraints read from the task become Python checks"""),
    ("code", """arch = Reflection(llm, target_score=8, max_iterations=3)
result = arch.run(task)
for r in result.trace:
    print(f"round {r.iteration}: score {r.score:.2f} passed={r.passed} features={r.features}")
    print("   ", r.draft[:120])
print("best:", result.output, "| score", result.score, "| passed", result.passed,
      "| stop:", result.stop_reason)"""),
    ("md", """`result.output` is the **best** draft, not merely the last one. The loop stops at the
target score, after `max_iterations` drafts, or when the score plateaus.

**Score and `passed` are two different things.** The score is graded: each feature earns
credit in proportion to how close it came (14 words for "exactly 12" earns 10/12 of its
points), so a near miss still ranks above a wild one and the loop can tell which draft is
best. `passed` is the hard gate: it is true only when *every* check holds, and a draft is
accepted (archived, trained on, counted as a pass in the benches) only when it passed **and**
reached `target_score`. So a draft can score 9.3 and still fail: a failed check always shows,
in `passed`, in `explain()` below, and in the refine prompt. `explain()` shows where the score
came from:"""),
    ("code", """rubric = rubric_for_task(task)
print(rubric.evaluate(task, result.output, llm_values={"on_task": True, "well_written": True}).explain())"""),
    ("md", """The graph is a compiled LangGraph `StateGraph`: stream it, checkpoint it, or drop it into
your own graph as a subgraph."""),
    ("code", """print(arch.diagram())
print([node for node, _ in arch.stream("Name a color in exactly 1 word.")])"""),
    ("md", """### Feedback or resample?
`refine="feedback"` (the default) shows the model its draft and the failed checks.
`refine="resample"` asks the first prompt again and lets the checks pick: a very small model
tends to copy or talk about a draft it is shown, so on the embedded model resampling often
does better (see the quality bench in the README). Compare both on your own tasks:"""),
    ("code", """tasks = ["Name three fruits in exactly 3 words, all lowercase.",
         "Write a 5-word motto for a gym, with no commas."]
for mode in ("feedback", "resample"):
    runs = Reflection(llm, max_iterations=3, refine=mode).batch(tasks)
    print(f"{mode:9}", [f"{r.score:.1f}/{'pass' if r.passed else 'fail'}" for r in runs])"""),
    ("md", "Every round's score, drawn with the package's plotting helpers:"),
    ("code", """from IPython.display import Image
from agentic_loop.plots import plot_score_distributions
rounds = {f"round {i}": [r.score for r in result.trace if r.iteration == i]
          for i in range(len(result.trace))}
plot_score_distributions(rounds, workdir / "rounds.png", title="Score per round")
Image(filename=str(workdir / "rounds.png"))"""),
])

notebook("02_archive_refine", "02 · ArchiveRefine: a persistent archive of accepted outputs", [
    ("md", """# 02 · ArchiveRefine ("RLHF-style self-improvement" at inference time)

Generate → critique → refine, plus a **persistent archive**: every output whose composite score
reaches `target_score` is stored on disk (JSONL + FAISS), and later tasks get the most *similar*
accepted outputs as exemplars, with an instruction to vary the structure. A common first
version of this loop keeps its archive in a Python list (lost on exit), reuses the last three
entries whatever the task, and asks the LLM for the word count. Here: on disk, by similarity,
counted in Python.

The rubric is given explicitly here, so the constraints a task states ("EXACTLY 12 words") are
*not* checked unless the rubric checks them: the architecture says so with an
`UncheckedConstraintsWarning`. Leave `rubric=` out to check what each task states.

The critique uses the copywriting rubric: two Python checks (word range, cliché lexicon) weigh
4 each, three LLM booleans weigh 1 each."""),
    ("code", SETUP + """
from agentic_loop import load_chat_model, ArchiveRefine, Archive, copywriting_rubric

llm = load_chat_model("local", max_tokens=48)
archive = Archive(workdir / "archive")
rubric = copywriting_rubric((4, 14))
arch = ArchiveRefine(llm, rubric=rubric, archive=archive, target_score=7, max_iterations=2)
tasks = [
    "Write a 3-sentence tagline (30-80 words total) for a coffee shop that emphasizes craftsmanship.",
    "Write a tagline for a bookstore in EXACTLY 12 words. Must avoid the words 'we', 'our', and 'discover'.",
    "Tagline for museum.",
]"""),
    ("code", """results = []
for task in tasks:
    r = arch.run(task)
    results.append(r)
    print(f"{task[:50]:50} score {r.score:5.2f} archived={r.archived} exemplars={len(r.exemplar_ids)}")
    print("   ", r.output[:110])
print("archive size:", len(archive))"""),
    ("md", """The archive persists: a new `Archive` object on the same folder (another process, next
week) sees the same entries, and search returns the most similar tasks' outputs."""),
    ("code", """again = Archive(workdir / "archive")
print(len(again), "entries on disk")
for hit in again.search("Write a tagline for an art gallery", k=3):
    print(f"{hit.similarity:.3f}  {hit.entry.task[:50]} -> {hit.entry.output[:60]}")"""),
    ("code", """from IPython.display import Image
from agentic_loop.plots import plot_archive_growth
plot_archive_growth(again.entries(), workdir / "growth.png")
Image(filename=str(workdir / "growth.png"))"""),
    ("md", """### target_score sweep
Scores are deterministic given the features, so the acceptance rate at each target can be read
off the judged drafts directly, without re-running the model (accepted = score at or above
the target and every check holds):"""),
    ("code", """drafts = [round_ for r in results for round_ in r.trace]
for target in (5, 6, 7, 8, 9, 10):
    accepted = sum(d.score >= target and d.passed for d in drafts)
    print(f"target {target:>2}: {accepted}/{len(drafts)} drafts would be archived")"""),
    ("md", """### Composite vs the LLM's own overall_score
The judge also returns a 1-10 `overall_score`, kept only for comparison. The spread report puts
the two side by side; with a 135M judge, the Python checks carry the decisive signal."""),
    ("code", """from agentic_loop import Critic, spread_report
critiques = Critic(llm, rubric).batch([(r.task, d.draft) for r in results for d in r.trace])
print(spread_report(critiques))"""),
])

notebook("03_reflexion", "03 · Reflexion: learning from failures", [
    ("md", """# 03 · Reflexion: attempt → evaluate → reflect → retry

Python checks run first; the judge is asked only about attempts that pass them. A failed
attempt gets a short structured reflection (root cause, correction, lesson), stored in a
`ReflexionMemory` and retrieved by task similarity, for the next attempt and for later tasks."""),
    ("code", SETUP + """
from agentic_loop import load_chat_model, Reflexion, ReflexionMemory

llm = load_chat_model("local", max_tokens=48)
memory = ReflexionMemory(workdir / "reflections")
arch = Reflexion(llm, memory=memory, max_iterations=3, target_score=8)
result = arch.run("Describe the ocean in at most 8 words, all in lowercase.")
for r in result.trace:
    print(f"attempt {r.iteration}: passed={r.passed} score={r.score:.2f} {r.features}")
    print("   ", r.draft[:100])
print("stored reflections:", len(memory))"""),
    ("code", """for entry in memory.entries():
    print("-", entry.reflection, "| failure:", entry.failure_summary.replace("\\n", " ")[:80])"""),
    ("md", "A later, similar task starts with those lessons in its prompt:"),
    ("code", """later = arch.run("Describe a mountain lake in at most 8 words, all in lowercase.")
print("recalled:", len(later.reflection_ids), "| output:", later.output, "| score:", later.score)"""),
])

notebook("04_distill_and_gate", "04 · Distill, gate, register, roll back", [
    ("md", """# 04 · The training-time loop: trajectories → data → weights → gate

Every architecture run is a logged trajectory. Here we (1) collect trajectories on a few
constrained tasks, (2) export them through the PII gate and curation into an SFT set and DPO
pairs (TRL's conversational format), (3) distill one round with TRL (LoRA, merged), (4) compare
the candidate with the base model on held-out tasks with a paired test, and (5) register it,
promoting only on PROMOTE. Tiny settings: this is a walkthrough, not a training recipe."""),
    ("code", SETUP + """
from agentic_loop import load_chat_model, Reflection, TrajectoryLog
from agentic_loop.tasks.sets import constrained_tasks, split_tasks

llm = load_chat_model("local", max_tokens=40)
train_tasks, held_out = split_tasks(constrained_tasks(12, seed=5), held_out=0.34, seed=5)
log = TrajectoryLog(workdir / "trajectories")
arch = Reflection(llm, max_iterations=2, trajectories=log)
results = arch.batch([t.task for t in train_tasks], max_concurrency=8)
print(f"{len(log)} trajectories; pass rate {sum(r.passed for r in results) / len(results):.0%}")"""),
    ("code", """from agentic_loop.distill import export_datasets
report = export_datasets(log.path, workdir / "data", pii="regex", min_score=0.7)
print(report.sft_rows, "SFT rows,", report.pairs, "DPO pairs")
for step in report.steps:
    print(f"  {step}")
print(open(report.sft_path).readline()[:300])"""),
    ("code", """from agentic_loop.distill.train import train
trained = train(workdir / "data", workdir / "model", method="sft", base="local", lora=True,
                max_steps=4, max_length=192, progress=False)
print(trained.spec)
print((trained.model_dir / "model_card.yaml").read_text()[:600])"""),
    ("md", """The candidate is a plain Hugging Face directory: `load_chat_model("local:<dir>")` serves
it in-process, `agentic-loop serve` through vLLM. The gate runs both models single-shot on the
held-out tasks with the same checks and applies a paired t-test: PROMOTE when significantly
better, ROLLBACK when the mean falls below 95% of the baseline's, otherwise MANUAL_REVIEW."""),
    ("code", """from agentic_loop.distill.eval.gate import gate
candidate = load_chat_model(trained.spec, max_tokens=40)
def single_shot(model):
    runs = Reflection(model, max_iterations=1).batch([t.task for t in held_out], max_concurrency=8)
    return [r.score or 0.0 for r in runs]
base_scores, cand_scores = single_shot(llm), single_shot(candidate)
decision = gate(base_scores, cand_scores)
print("base     ", [round(s, 1) for s in base_scores])
print("candidate", [round(s, 1) for s in cand_scores])
print(decision)"""),
    ("code", """from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.registry_audit import GateRecord
from agentic_loop.models.embedded import ensure_converted
registry = Registry(workdir / "registry")
base = registry.register(ensure_converted(), name="base")        # the embedded model's HF dir
registry.promote(base.version, reason="initial model")
cand = registry.register(trained.model_dir, name="walkthrough")
record = GateRecord(decision=decision.decision, reasons=[decision.reason], single_shot=decision)
# a person's call here: force=True promotes past a MANUAL_REVIEW and the audit line says so
registry.promote(cand.version, reason="walkthrough", gate=record, force=True)
print("current:", registry.current.version)
registry.rollback(reason="demonstrating a rollback")
print("after rollback:", registry.current.version)
for event in registry.history():
    print(" ", event)"""),
])

notebook("05_langsmith_traces", "05 · Reading the loops in LangSmith", [
    ("md", """# 05 · LangSmith traces

Every node of every architecture is a named LangSmith run:

| field | meaning |
|---|---|
| run name | the node: `generate`, `critique`, `refine`, `finalize`, `retrieve`, `recall`, `attempt`, `evaluate`, `reflect` |
| tags | `agentic-loop`, `arch:<architecture>`, `node:<node>` |
| metadata `architecture`, `node` | the same, for filtering |
| metadata `iteration` | which draft/attempt the node worked on (0-based) |
| metadata `score`, `features` | the composite score and each feature's value (critique/evaluate/finalize) |
| metadata `error` | the error a node recorded, if any |

The root run is the graph (named after the architecture) with metadata `architecture`, `model_id`.
Model calls appear as child `llm` runs with token usage.

**Turn tracing on** with `LANGSMITH_TRACING=true` and `LANGSMITH_API_KEY=...` (and
`LANGSMITH_ENDPOINT` for a self-hosted LangSmith). With no reachable server the app is not
slowed: traces are sent from a background thread.

**Test it offline**: point a `langsmith.Client` at a small HTTP collector on 127.0.0.1, as
below (this is what `tests/unit/test_langsmith_traces.py` does)."""),
    ("code", SETUP + """
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

runs = {}
class Collector(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _ok(self, body=b"{}"):
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self): self._ok()
    def do_POST(self):
        run = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        runs[run["id"]] = run; self._ok()
    def do_PATCH(self):
        update = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        run = runs.setdefault(self.path.rsplit("/", 1)[-1], {})
        extra = update.pop("extra", None) or {}
        run.update({k: v for k, v in update.items() if v is not None})
        run.setdefault("extra", {}).update(extra); self._ok()

server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"
print("collector at", url)"""),
    ("code", """from langsmith import Client
from langchain_core.tracers import LangChainTracer
from agentic_loop import load_chat_model, Reflection

tracer = LangChainTracer(client=Client(api_url=url, api_key="offline", auto_batch_tracing=False),
                         project_name="agentic-loop-notebook")
arch = Reflection(load_chat_model("local", max_tokens=32), max_iterations=2)
result = arch.run("Write a tagline for a bakery in exactly 5 words.", config={"callbacks": [tracer]})
tracer.wait_for_futures()
print("output:", result.output, "| score:", result.score)"""),
    ("code", """for run in sorted(runs.values(), key=lambda r: r.get("start_time", "")):
    meta = run.get("extra", {}).get("metadata", {})
    if "node" in meta:
        print(f"{run['name']:10} tags={[t for t in run.get('tags', []) if ':' in t]} "
              f"iteration={meta.get('iteration')} score={meta.get('score')} features={meta.get('features')}")
server.shutdown()"""),
])


notebook("06_agents", "06 · Agents: a tool-using agent inside ArchiveRefine", [
    ("md", """# 06 · Agents in the loop

An agent app's unit of work is an agent: a LangGraph graph that calls tools over several
steps. Any of them goes where `llm` goes (LangChain's `create_agent`, `create_react_agent`,
your own `StateGraph` with a `messages` state, a messages Runnable, or a chat model with
`tools=[...]`). A draft is then an **episode**: the agent runs to its final answer under a
step limit (`max_steps`, model calls) and a wall-clock limit (`episode_timeout_s`), and every
model call, tool call and tool result is recorded on the round (`Round.episode`).

Checks can read the episode: a task that says "use the calculator" gets a `tool_called`
check, so an agent that answers from memory fails it even when its number is right.

Everything runs offline on the embedded SmolLM2-135M (CPU); its tool calls are decoded
under a grammar, so they are always valid calls of a bound tool."""),
    ("code", SETUP + """
from langchain.agents import create_agent
from agentic_loop import load_chat_model, ArchiveRefine, Archive, TrajectoryLog, calculator
from agentic_loop.judges import rubric_for_task
from agentic_loop.tools import reference_lookup

llm = load_chat_model("local", max_tokens=48)
tools = [calculator, reference_lookup]
agent = create_agent(llm, tools, system_prompt="Answer with the tools' help. End with the number.")
task = "Use the calculator to compute 53 * 47. Answer with the number."
print(rubric_for_task(task))   # 'use the calculator' became a check over the episode"""),
    ("code", """log = TrajectoryLog(workdir / "runs")
arch = ArchiveRefine(agent, archive=Archive(workdir / "archive"), trajectories=log,
                     max_iterations=2, max_steps=4, temperature=0.0, refine="resample")
result = arch.run(task)
print("answer:", result.output, "| score:", result.score, "| passed:", result.passed)
for r in result.trace:
    print(f"round {r.iteration}: tool_called={r.features.get('tool_called')} "
          f"tools={r.episode.tools_called} steps={r.episode.model_calls}")
print("feedback:", result.trace[-1].feedback)"""),
    ("md", """A small model left to itself seldom opens with a tool call, so the check above may fail:
the record says which tools ran, not what the answer claims. `tool_agent` is the package's own
tool loop (LangGraph's `ToolNode` + `tools_condition`); `first_tool_choice="any"` makes an
episode's first model call a tool call (still the model's choice of tool and arguments), then
lets it answer. It is a graph like any other agent."""),
    ("code", """from agentic_loop import tool_agent

forced = tool_agent(llm, tools, first_tool_choice="any")
arch = ArchiveRefine(forced, archive=Archive(workdir / "archive"), trajectories=log,
                     max_iterations=2, max_steps=4, temperature=0.0)
result = arch.run(task)
print("answer:", result.output, "| score:", result.score, "| passed:", result.passed)"""),
    ("md", """## One trajectory's steps

The log keeps every episode: each model call (the tool calls it asked for, tokens, latency,
the model that answered) and each tool result (content or error, latency), in order."""),
    ("code", """run = log.read()[-1]
episode = run.rounds[-1].episode
for step in episode.steps:
    if step.kind == "model":
        calls = ", ".join(f"{c.name}({c.args})" for c in step.tool_calls)
        print(f"model  {step.latency_s or 0:5.2f}s  tokens={step.output_tokens}  "
              f"{'calls ' + calls if calls else 'answers ' + repr(step.text[:60])}")
    else:
        print(f"tool   {step.latency_s or 0:5.2f}s  {step.name} -> {step.error or step.content[:60]!r}")
print("stop:", episode.stop_reason, "| final:", repr(episode.final[:80]))"""),
    ("md", """## The LangSmith tree

Each episode is one run named `episode` (tags: architecture, iteration, sample) under the node
that wrote the draft, with the agent's model and tool runs inside. Offline, a small collector
on 127.0.0.1 stands in for LangSmith (as in notebook 05)."""),
    ("code", """import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from langsmith import Client
from langchain_core.tracers import LangChainTracer

runs = {}
class Collector(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _ok(self):
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def do_GET(self): self._ok()
    def do_POST(self):
        run = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        runs[run["id"]] = run; self._ok()
    def do_PATCH(self):
        self.rfile.read(int(self.headers["Content-Length"])); self._ok()

server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
threading.Thread(target=server.serve_forever, daemon=True).start()
tracer = LangChainTracer(client=Client(api_url=f"http://127.0.0.1:{server.server_address[1]}",
                                       api_key="offline", auto_batch_tracing=False))
arch.run(task, config={"callbacks": [tracer]})
tracer.wait_for_futures()

children = {}
for run in runs.values():
    children.setdefault(run.get("parent_run_id"), []).append(run)
def show(parent, depth):
    for run in sorted(children.get(parent, []), key=lambda r: r.get("dotted_order", "")):
        if depth < 2 or run["name"] in ("episode", "tools") or run.get("run_type") in ("llm", "tool"):
            tags = [t for t in run.get("tags", []) if ":" in t]
            print("  " * depth + f"{run['name']} ({run.get('run_type')}) {tags}")
        show(run["id"], depth + 1)
show(None, 0)
server.shutdown()"""),
])


def build(key: str) -> Path:
    title, cells = NOTEBOOKS[key]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["title"] = title
    for kind, source in cells:
        nb.cells.append(nbformat.v4.new_markdown_cell(source) if kind == "md"
                        else nbformat.v4.new_code_cell(source))
    path = HERE / f"{key}.ipynb"
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE.parent)}}).execute()
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    wanted = sys.argv[1:] or list(NOTEBOOKS)
    for key in NOTEBOOKS:
        if any(key.startswith(w) for w in wanted):
            print("built", build(key))
