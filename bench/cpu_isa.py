"""Benchmark as if on a CPU without AVX-512 (so without native bf16): AVX2 kernels only.

Why: issue 36 asks the in-process engine for at least vLLM-CPU's tokens/s on a CPU
*without* native bf16, and the bench machines all have AVX-512 BF16. Every kernel
both engines run can be held to AVX2, the instruction set of such a CPU, in one
process tree, through the switches each library reads at start-up:

* ``ATEN_CPU_CAPABILITY=avx2``: torch's own vectorized kernels (softmax, norms,
  elementwise ops, SDPA) and the vector ISA torch.compile's inductor generates for;
* ``ONEDNN_MAX_CPU_ISA=AVX2`` (and ``DNNL_MAX_CPU_ISA``, its older name): oneDNN's
  matmuls, torch's and the copy vLLM links;
* ``MKL_ENABLE_INSTRUCTIONS=AVX2``: MKL's sgemm, which torch's ``F.linear`` calls;
* ``sitecustomize.py`` in ``bench/cpu_isa_avx2/`` (put first on ``PYTHONPATH``)
  hides AVX-512, AVX10 and AMX from ``torch.cpu.get_capabilities()``, which is what vLLM
  asks to load its ``_C_AVX2`` kernels (attention, cache) instead of the AVX-512 ones.

What this does not change is the core under the instructions: its caches, memory
bandwidth and how fast it runs 256-bit vectors. So the numbers are "this CPU with
AVX2 alone", a proxy for an AVX2 machine, and reports say so.

    >>> env = avx2_env({"PYTHONPATH": "/x"})
    >>> env["ONEDNN_MAX_CPU_ISA"], env["PYTHONPATH"].endswith(os.pathsep + "/x")
    ('AVX2', True)
    >>> avx2_flags({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx10_1", "fma"})
    frozenset({'avx2', 'fma'})
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["AVX2_SETTINGS", "SITE_DIR", "avx2_active", "avx2_env", "avx2_flags"]

#: The folder whose ``sitecustomize.py`` hides AVX-512 and AMX from torch's CPU probe.
SITE_DIR = Path(__file__).parent / "cpu_isa_avx2"

#: The libraries' own switches (see the module doc).
AVX2_SETTINGS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                 "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def avx2_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with every switch to AVX2 set and
    :data:`SITE_DIR` first on ``PYTHONPATH``: the environment to start a process in."""
    env = dict(os.environ if base is None else base)
    env.update(AVX2_SETTINGS)
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = f"{SITE_DIR}{os.pathsep}{rest}" if rest else str(SITE_DIR)
    return env


def avx2_active() -> bool:
    """Whether this process started in :func:`avx2_env`'s environment: every switch set and
    :data:`SITE_DIR` first on ``PYTHONPATH`` (the variables alone would leave vLLM's
    AVX-512 kernels in)."""
    path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return (all(os.environ.get(k) == v for k, v in AVX2_SETTINGS.items())
            and path[0] == str(SITE_DIR))


def avx2_flags(flags: Iterable[str]) -> frozenset[str]:
    """CPU feature flags as an AVX2 CPU would list them: no ``avx512*``, ``avx10*``, ``amx*``."""
    return frozenset(f for f in flags if not f.startswith(("avx512", "avx10", "amx")))
