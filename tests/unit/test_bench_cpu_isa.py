"""bench/cpu_isa.py: a process started in its environment sees an AVX2 CPU (torch's kernels,
its CPU probe, oneDNN), while this process's own flags are untouched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bench_helpers import load_bench

PROBE = """
import json, torch
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "avx512": torch.cpu._is_avx512_supported(),
                  "avx512_bf16": torch.cpu._is_avx512_bf16_supported(),
                  "avx2": torch.cpu._is_avx2_supported()}))
"""


@pytest.mark.skipif(not torch.cpu._is_avx2_supported(), reason="not an AVX2 CPU")
def test_a_process_in_the_avx2_environment_sees_an_avx2_cpu() -> None:
    cpu_isa = load_bench("cpu_isa")
    out = subprocess.run([sys.executable, "-c", PROBE], env=cpu_isa.avx2_env(),
                         capture_output=True, text=True, check=True, timeout=120)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"capability": "AVX2", "avx512": False, "avx512_bf16": False, "avx2": True}
    assert (Path(cpu_isa.SITE_DIR) / "sitecustomize.py").is_file()
    assert not cpu_isa.avx2_active()  # this process was not started in it


def test_flags_as_an_avx2_cpu_lists_them_lose_avx512_and_amx() -> None:
    cpu_isa = load_bench("cpu_isa")
    from agentic_loop.models.cpu_caps import has_native_bf16

    flags = {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    assert not has_native_bf16(cpu_isa.avx2_flags(flags)) and has_native_bf16(flags)
