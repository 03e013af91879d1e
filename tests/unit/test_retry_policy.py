"""The one retry-and-validate policy: backoff, bounded attempts, feedback once, batches,
and a per-call timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, ValidationError

from agentic_loop.errors import AgenticLoopError, ModelError
from agentic_loop.models import retry as retry_module
from agentic_loop.models.errors import ModelCallError, ModelTimeoutError, StructuredOutputError
from agentic_loop.models.retry import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, RetryPolicy
from agentic_loop.testing import ScriptedChatModel


class Verdict(BaseModel):
    ok: bool


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every wait the policy asks for, recorded instead of slept (sync and async)."""
    recorded: list[float] = []

    async def fake_asleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry_module, "_sleep", recorded.append)
    monkeypatch.setattr(retry_module, "_asleep", fake_asleep)
    return recorded


def flaky(failures: list[BaseException], answer: Any = "done") -> tuple[Runnable[Any, Any],
                                                                       list[Any]]:
    """A runnable raising ``failures`` in turn, then answering; records its inputs."""
    seen: list[Any] = []

    def call(value: Any) -> Any:
        seen.append(value)
        if failures:
            raise failures.pop(0)
        return answer

    return RunnableLambda(call), seen


def test_defaults_are_the_documented_ones() -> None:
    assert (DEFAULT_RETRY.max_attempts, DEFAULT_RETRY.backoff_s, DEFAULT_RETRY.max_backoff_s) == (
        3, 0.5, 8.0)
    with pytest.raises(ValidationError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValidationError):
        DEFAULT_RETRY.max_attempts = 5  # type: ignore[misc]  # frozen


def test_call_errors_back_off_doubling_up_to_the_cap(waits: list[float]) -> None:
    runnable, seen = flaky([RuntimeError("a"), RuntimeError("b"), RuntimeError("c")])
    policy = RetryPolicy(max_attempts=4, backoff_s=1.0, max_backoff_s=3.0)
    assert policy.invoke(runnable, "hi", what="demo") == "done"
    assert waits == [1.0, 2.0, 3.0]
    assert seen == ["hi"] * 4  # a call error is retried with the same input


def test_attempts_are_bounded_then_one_model_call_error(waits: list[float]) -> None:
    runnable, seen = flaky([RuntimeError(f"down {n}") for n in range(5)])
    with pytest.raises(ModelCallError, match=r"^demo: .*after 3 attempt\(s\); last error: "
                                             r"RuntimeError: down 2$") as info:
        RetryPolicy().invoke(runnable, "hi", what="demo")
    assert info.value.attempts == 3 and len(seen) == 3
    assert isinstance(info.value.last_error, RuntimeError)
    assert isinstance(info.value, ModelError) and isinstance(info.value, AgenticLoopError)
    assert waits == [0.5, 1.0]


def test_async_invoke_backs_off_with_the_async_sleep(waits: list[float]) -> None:
    runnable, _ = flaky([RuntimeError("a")])
    assert asyncio.run(RetryPolicy().ainvoke(runnable, "hi", what="demo")) == "done"
    assert waits == [0.5]


def test_an_invalid_answer_is_fed_back_once_without_waiting(waits: list[float]) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [{"ok": "maybe"}, {"ok": "perhaps"},
                                                     {"ok": True}]})
    answer, attempts = RetryPolicy().invoke_structured(fake, Verdict, "Is it ok?", what="demo")
    assert (answer, attempts) == (Verdict(ok=True), 3)
    assert waits == []  # the model answered: no reason to wait
    first, second, third = (call.prompt for call in fake.calls)
    assert first == "Is it ok?"
    assert second.startswith("Is it ok?\n") and "'maybe'" in second
    assert second.count("That answer was invalid") == 1
    # only the latest error is shown: the prompt never grows past one correction
    assert "'perhaps'" in third and "'maybe'" not in third
    assert third.count("That answer was invalid") == 1
    assert "matches the Verdict schema" in third


def test_structured_call_errors_wait_and_keep_the_prompt(waits: list[float]) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [RuntimeError("overloaded"), {"ok": True}]})
    assert RetryPolicy().invoke_structured(fake, Verdict, "q", what="demo")[1] == 2
    assert waits == [0.5]
    assert [c.prompt for c in fake.calls] == ["q", "q"]


def test_structured_gives_up_naming_the_schema(waits: list[float]) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [{"ok": "x"}] * 3})
    with pytest.raises(ModelCallError, match="demo: no valid Verdict from the model after 2") as e:
        RetryPolicy(max_attempts=2).invoke_structured(fake, Verdict, "q", what="demo")
    assert isinstance(e.value.last_error, ValidationError) and len(fake.calls) == 2


def test_async_structured_feeds_back_too(waits: list[float]) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [{"ok": "x"}, {"ok": False}]})
    result = asyncio.run(RetryPolicy().ainvoke_structured(fake, Verdict, "q", what="demo"))
    assert result == (Verdict(ok=False), 2)
    assert "That answer was invalid" in fake.calls[1].prompt and waits == []


def test_the_bad_answer_is_shown_when_the_error_carries_it() -> None:
    from langchain_core.messages import AIMessage

    raw = AIMessage(content='{"ok": "x"}')
    failures: list[BaseException] = [StructuredOutputError("bad", raw=raw)]
    runnable, seen = flaky(failures, answer={"ok": True})
    parsed, attempts = RetryPolicy().invoke_validated(
        runnable, "q", lambda a: Verdict.model_validate(a), what="demo", expected="Verdict")
    assert (parsed, attempts) == (Verdict(ok=True), 2)
    retried = seen[1]
    assert [type(m).__name__ for m in retried] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert retried[1] is raw and "That answer was invalid: bad" in retried[2].content


def test_a_model_without_structured_output_fails_before_any_call() -> None:
    class NoStructured(ScriptedChatModel):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            raise NotImplementedError

    with pytest.raises(ModelCallError, match="does not support with_structured_output") as info:
        RetryPolicy().invoke_structured(NoStructured(), Verdict, "q", what="demo")
    assert info.value.attempts == 0


def test_config_names_the_call_and_counts_attempts() -> None:
    configs: list[RunnableConfig] = []

    class Recorder(Runnable[Any, Any]):
        def invoke(self, input: Any, config: RunnableConfig | None = None, **kw: Any) -> Any:
            configs.append(config or {})
            if len(configs) == 1:
                raise ValueError("first answer invalid")
            return {"ok": True}

    RetryPolicy().invoke_validated(Recorder(), "q", Verdict.model_validate,
                                   {"tags": ["judge"]}, what="critic")
    assert [c["metadata"]["attempt"] for c in configs] == [1, 2]
    assert all(c["run_name"] == "critic" and c["tags"] == ["judge"] for c in configs)


class BatchCounter(ScriptedChatModel):
    """Counts ``batch`` calls of its structured runnable (one per retry round)."""

    rounds: list[int] = []

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        inner = super().with_structured_output(schema, **kwargs)
        rounds = self.rounds

        class Counted(Runnable[Any, Any]):
            def invoke(self, input: Any, config: RunnableConfig | None = None, **kw: Any) -> Any:
                return inner.invoke(input, config)

            def batch(self, inputs: list[Any], config: Any = None, **kw: Any) -> list[Any]:
                rounds.append(len(inputs))
                return inner.batch(inputs, config, **kw)

        return Counted()


def test_batch_retries_failed_items_only_and_keeps_successes(waits: list[float]) -> None:
    def respond(schema: type[BaseModel], messages: list[Any]) -> dict[str, Any]:
        prompt = "\n".join(str(m.content) for m in messages)
        if "never" in prompt:
            return {"ok": "maybe"}
        if "once" in prompt and "invalid" not in prompt:
            return {"ok": "later"}
        return {"ok": "good" in prompt}

    fake = BatchCounter(default_structured=respond, rounds=[])
    results = RetryPolicy().batch_structured(fake, Verdict, ["good", "once", "never", "bad"],
                                             what="demo")
    assert results[0] == (Verdict(ok=True), 1) and results[3] == (Verdict(ok=False), 1)
    assert results[1] == (Verdict(ok=False), 2)
    error = results[2]
    assert isinstance(error, ModelCallError) and error.attempts == 3
    assert str(error).startswith("demo (item 2): no valid Verdict from the model after 3")
    assert fake.rounds == [4, 2, 1]  # one batch call per round, only the failed items
    assert waits == []  # invalid answers only: no waiting


def test_batch_waits_when_an_item_hit_a_call_error(waits: list[float]) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [RuntimeError("down"), {"ok": True}]})
    assert RetryPolicy().batch_structured(fake, Verdict, ["q"], what="demo") == [
        (Verdict(ok=True), 2)]
    assert waits == [0.5]


# -- per-call timeout ------------------------------------------------------------------------


@pytest.fixture
def gate() -> Any:
    """What a hanging fake model waits on; opened at the end so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def hang(gate: threading.Event) -> Any:
    """A script item that hangs (until the test ends) instead of answering."""
    return lambda *_: (gate.wait(30), "too late")[1]


def test_the_default_timeout_fits_the_embedded_model() -> None:
    assert DEFAULT_RETRY.timeout_s == DEFAULT_TIMEOUT_S == 300.0
    assert RetryPolicy(timeout_s=None).timeout_s is None
    with pytest.raises(ValidationError):
        RetryPolicy(timeout_s=0)


def test_a_hung_call_is_cut_off_and_retried(waits: list[float], gate: threading.Event) -> None:
    fake = ScriptedChatModel(responses=[hang(gate), "on time"])
    started = time.monotonic()
    answer = RetryPolicy(timeout_s=0.2).invoke(fake, "hi", what="generation")
    assert answer.content == "on time" and time.monotonic() - started < 5
    assert waits == [0.5]  # a timeout is a call error: it backs off


def test_a_model_that_always_hangs_ends_in_a_call_error_naming_the_timeout(
        waits: list[float], gate: threading.Event) -> None:
    fake = ScriptedChatModel(default=hang(gate))
    started = time.monotonic()
    with pytest.raises(ModelCallError, match=r"after 2 attempt\(s\); last error: "
                                             r"ModelTimeoutError: generation: .*timeout_s=0.2 s"
                       ) as info:
        RetryPolicy(max_attempts=2, timeout_s=0.2).invoke(fake, "hi", what="generation")
    assert isinstance(info.value.last_error, ModelTimeoutError)
    assert info.value.last_error.timeout_s == 0.2 and time.monotonic() - started < 5


def test_async_calls_are_cut_off_too(waits: list[float], gate: threading.Event) -> None:
    fake = ScriptedChatModel(default=hang(gate), default_structured=hang(gate))
    policy = RetryPolicy(max_attempts=2, timeout_s=0.2)

    async def both() -> list[BaseException]:
        errors: list[BaseException] = []
        for call in (policy.ainvoke(fake, "hi", what="gen"),
                     policy.ainvoke_structured(fake, Verdict, "q", what="judge")):
            try:
                await call
            except ModelCallError as err:
                errors.append(err)
        gate.set()  # let the executor threads end before asyncio.run waits for them
        return errors

    errors = asyncio.run(both())
    assert [type(e.__cause__) for e in errors] == [ModelTimeoutError, ModelTimeoutError]


def test_structured_and_batched_calls_time_out(waits: list[float], gate: threading.Event) -> None:
    fake = ScriptedChatModel(structured={"Verdict": [hang(gate), {"ok": True}]})
    policy = RetryPolicy(timeout_s=0.2)
    assert policy.invoke_structured(fake, Verdict, "q", what="judge") == (Verdict(ok=True), 2)
    stuck = ScriptedChatModel(default_structured=hang(gate))
    results = RetryPolicy(max_attempts=2, timeout_s=0.2).batch_structured(
        stuck, Verdict, ["a", "b"], what="judge")
    assert all(isinstance(r, ModelCallError) and isinstance(r.last_error, ModelTimeoutError)
               for r in results)


def test_a_timeout_the_call_raised_itself_is_reported_as_it_is(waits: list[float]) -> None:
    fake = ScriptedChatModel(responses=[TimeoutError("socket read timed out")])
    with pytest.raises(ModelCallError, match="TimeoutError: socket read timed out") as info:
        RetryPolicy(max_attempts=1, timeout_s=5).invoke(fake, "hi", what="gen")
    assert not isinstance(info.value.last_error, ModelTimeoutError)


def test_an_architecture_records_a_hung_model_as_a_timeout(gate: threading.Event) -> None:
    from agentic_loop.architectures import Reflection
    from agentic_loop.judges import Rubric

    fake = ScriptedChatModel(default=hang(gate))
    arch = Reflection(fake, rubric=Rubric.for_constraints(exact_words=1), max_iterations=1,
                      retry=RetryPolicy(max_attempts=2, backoff_s=0.0, timeout_s=0.2))
    result = arch.run("Greet me in one word.")
    assert result.output is None and len(result.errors) == 1
    assert "ModelTimeoutError" in result.errors[0] and "timeout_s=0.2" in result.errors[0]
