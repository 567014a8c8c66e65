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


# Layers run one way (DESIGN.md): reading -> scan -> job model -> evidence -> rules -> verdict ->
# analysis -> faces. A module may import its own layer or a lower one, never a higher one, not even
# inside a function (a lazy import still makes the lower layer depend on the higher).
LAYERS = [
    ("reading", ["events", "findings", "kinds", "resources", "timeparse", "reading", "records", "formats", "regex_facts",
                 "format_files", "launchers", "jsonlog", "csvexport", "jsonexport", "errorfile", "htmlpage", "legacy_text", "text_encoding", "prefilter", "discover", "archives", "flightrec", "rasjson", "wrapped",
                 "__version__", "report.safe"]),  # the one cleaning function: every layer may make text inert
    ("scan", ["scanner", "filescan", "fastscan", "eventcap", "scan_events", "writers", "startup"]),
    ("model", ["model"]),
    ("evidence", ["evidence"]),
    ("rules", ["rules"]),
    ("verdict", ["verdict", "headline"]),
    # report.jsonout builds the JSON contract that Report.to_dict() returns to library callers.
    ("analysis", ["analysis", "incremental", "growing", "alerts", "report.jsonout", "report.reach"]),
    ("faces", ["report", "timeline", "timeline_last", "plot", "tui", "watch", "webhook", "output", "cli", "__main__",
               "__init__"]),
]


def _layer_of(module: str) -> int:
    parts = module.split(".")[1:] or ["__init__"]
    for i, (_, names) in enumerate(LAYERS):
        if ".".join(parts[:2]) in names:
            return i
    for i, (_, names) in enumerate(LAYERS):
        if parts[0] in names:
            return i
    raise AssertionError(f"module {module} is in no layer: add it to LAYERS")


def _imports(path, module: str):
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names] if not node.module else [target]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("nccl_doctor.") and name.count(".") >= 1:
                yield node.lineno, name


def test_layers_run_one_way():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "nccl_doctor"
    wrong = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if module == "nccl_doctor":
            continue  # the package facade imports the analysis lazily for its callers
        mine = _layer_of(module if "." in module else "nccl_doctor.__init__")
        for line, name in _imports(path, module):
            theirs = _layer_of(name)
            if theirs > mine:
                wrong.append(f"{path.relative_to(root.parent)}:{line} imports {name} "
                             f"({LAYERS[mine][0]} -> {LAYERS[theirs][0]})")
    assert wrong == []


def test_rules_folder_holds_rule_files_only():
    from pathlib import Path

    from nccl_doctor.rules.base import load_catalogue

    rules = Path(__file__).resolve().parent.parent / "nccl_doctor" / "rules"
    ids = set(load_catalogue())
    extra = sorted(p.stem for p in rules.glob("*.py") if p.stem not in ids | {"__init__", "base"})
    assert extra == []
