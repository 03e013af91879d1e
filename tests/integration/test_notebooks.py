"""Every walkthrough notebook runs top to bottom on the embedded model."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_six_walkthroughs_exist():
    names = [p.stem for p in NOTEBOOKS]
    assert [n[:2] for n in names] == ["01", "02", "03", "04", "05", "06"], names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path, monkeypatch):
    # The kernel inherits TMPDIR, so the notebook's own temp workdir (a trained model among it)
    # lands under tmp_path and goes when the test passes, instead of staying in /tmp.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nb = nbformat.read(path, as_version=4)
    assert any(c.cell_type == "code" and c.outputs for c in nb.cells), \
        f"{path.name} was committed without outputs; run notebooks/build.py"
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
