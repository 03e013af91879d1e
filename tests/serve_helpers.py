"""A stand-in for vLLM's OpenAI-compatible server, for fast tests of our process handling.

It is a real HTTP server in a real child process, started through the same
command line as vLLM (``python -m vllm.entrypoints.openai.api_server ...``):
it lists its served names at ``GET /v1/models`` and keeps LoRA adapters by name
through ``POST /v1/load_lora_adapter`` (``load_inplace`` replaces one, as vLLM
0.32 does) and ``/v1/unload_lora_adapter``. Every start is recorded (argv, env)
and every adapter call appended to ``$STAND_IN_RECORD.lora``. ``STAND_IN_MODE``
(``crash``, ``hang``) and a model path containing ``broken`` make a start fail;
``STAND_IN_START_S`` makes a start take that long. ``POST /v1/chat/completions``
answers with the served model folder's name (after ``STAND_IN_ANSWER_S``).
tests/integration/test_vllm_serve.py runs the real vLLM.
"""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

STAND_IN = textwrap.dedent('''
    import json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv[3:]  # after "-m vllm.entrypoints.openai.api_server"
    opts = {}
    i = 0
    while i < len(args):
        if args[i] == "--lora-modules":
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                opts.setdefault("lora", []).append(args[i].split("=")[0]); i += 1
            continue
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            opts[args[i]] = args[i + 1]; i += 2
        else:
            opts[args[i]] = True; i += 1
    record = os.environ["STAND_IN_RECORD"]
    with open(record, "w") as fh:
        json.dump({"argv": sys.argv[1:], "kv": os.environ.get("VLLM_CPU_KVCACHE_SPACE"),
                   "offline": os.environ.get("HF_HUB_OFFLINE"),
                   "aot": os.environ.get("VLLM_USE_AOT_COMPILE"),
                   "runtime_lora": os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")}, fh)
    with open(record + ".starts", "a") as fh:
        fh.write(opts["--model"] + "\\n")
    mode = os.environ.get("STAND_IN_MODE", "ok")
    print("starting the stand-in", flush=True)
    if mode == "crash" or "broken" in opts["--model"]:
        print("RuntimeError: no CPU backend", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(60)
    time.sleep(float(os.environ.get("STAND_IN_START_S", "0")))
    names = [opts["--served-model-name"]] + opts.get("lora", [])
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.reply(200, {"data": [{"id": n} for n in names]})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/chat/completions"):  # answers with its model folder's name
                time.sleep(float(os.environ.get("STAND_IN_ANSWER_S", "0")))
                answer = os.path.basename(opts["--model"])
                return self.reply(200, {
                    "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": answer}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            with open(record + ".lora", "a") as fh:
                fh.write(json.dumps({"endpoint": self.path, **body}) + "\\n")
            name = body["lora_name"]
            if self.path.endswith("/load_lora_adapter"):
                if "broken" in body["lora_path"]:
                    return self.reply(500, {"error": "cannot load " + body["lora_path"]})
                if name in names and not body.get("load_inplace"):
                    return self.reply(400, {"error": name + " has already been loaded"})
                if name not in names:
                    names.append(name)
            elif name in names:
                names.remove(name)
            else:
                return self.reply(404, {"error": name + " cannot be found"})
            self.reply(200, {})
        def reply(self, code, payload):
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers(); self.wfile.write(body)
        def log_message(self, *a):
            pass
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    ThreadingHTTPServer((opts["--host"], int(opts["--port"])), Handler).serve_forever()
''')


def stand_in_python(folder: Path) -> Path:
    """An executable "python" in ``folder`` that runs the stand-in whatever it is asked."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "stand_in.py"
    script.write_text(STAND_IN)
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return python


def model_dir(folder: Path, name: str = "m") -> Path:
    """A folder that passes for a full model (a config.json), one model per name: the
    registry refuses a second folder with the same content."""
    path = folder / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"name": name}))
    return path


def adapter_dir(folder: Path, name: str, base: Path, rank: int = 8) -> Path:
    """A folder that passes for a LoRA adapter on ``base`` (weights of its own: one adapter
    per name)."""
    path = folder / name
    path.mkdir()
    config = {"base_model_name_or_path": str(base), "r": rank}
    (path / "adapter_config.json").write_text(json.dumps(config))
    (path / "adapter_model.safetensors").write_bytes(f"stand-in weights of {name}".encode())
    return path


def lora_calls(record: Path) -> list[dict[str, object]]:
    """The adapter calls the stand-in received, in order."""
    path = Path(f"{record}.lora")
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
