"""``import nccl_doctor`` (and the engine, and the rules) loads neither Textual, matplotlib nor pandas."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("textual", "matplotlib", "pandas")


def _loaded(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_library_import_loads_no_ui_or_dataframe_stack():
    assert _loaded("import nccl_doctor, nccl_doctor.analysis, nccl_doctor.rules") == []


def test_cli_module_import_is_light_too():
    assert _loaded("import nccl_doctor.cli") == []


def test_the_tui_and_plot_load_them_when_asked():
    loaded = _loaded("import nccl_doctor.tui.app, nccl_doctor.plot, nccl_doctor.timeline\n"
                     "from nccl_doctor.plot import figure")
    assert "textual" in loaded and "pandas" in loaded
    assert "matplotlib" not in loaded  # plot imports matplotlib only when drawing
