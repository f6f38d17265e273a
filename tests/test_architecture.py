"""The floors of ARCHITECTURE.md: no import runs upward and none forms a cycle, counting
imports made inside functions; and every module has a place."""

import ast
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "aft_export"

# the modules in the order they may import one another: each only from those before it
ORDER = [
    # 0 ground
    "errors", "version", "fileio", "readers", "machine", "runtimes", "environment",
    # 1 model and data
    "layers.cores", "layers.ops", "layers.aft", "layers",
    "models.classifier", "models.registry", "models",
    "data", "data.formats", "data.images", "data.preprocess", "data.datasets", "data.calibration", "quantization", "quantization.ranges", "models.weights",
    "models.checkpoint", "models.sources", "models.resources",
    # 2 ONNX, comparison, TensorRT facts
    "artifacts", "artifacts.kinds", "artifacts.graph", "artifacts.fp32_rule", "artifacts.onnxio", "artifacts.ends", "verify", "verify.compare", "options.params", "options.targets", "options.deepstream", "options", "options.commands", "artifacts.purpose",
    # the offline TensorRT rules: below every runner (checking a file offline runs no runtime)
    "trtcheck.view", "trtcheck.versions", "trtcheck.rules", "trtcheck", "tensorrt", "tensorrt.library", "tensorrt.manifest",
    # 3 runners
    "runners.base", "runners.pytorch", "runners.ort", "runners.openvino", "runners.reference", "runners.engine", "runners",
    # 4 graph work
    "exporting", "exporting.functions", "exporting.rewrite", "exporting.trt8", "exporting.portable", "exporting.forms", "exporting.pixels", "verify.localize",
    # 5 stages
    "exporting.exporter",
    "quantization.placement", "quantization.runs", "quantization.calibrators", "quantization.cache", "quantization.sensitivity",
    "quantization.fp16", "quantization.stage",
    "verify.evaluate", "verify.bench", "tensorrt.build", "tensorrt.checks", "tensorrt.nvtools", "models.training", "serving", "serving.predict", "artifacts.info", "workflow", "workflow.plots", "workflow.report", "serving.spec", "serving.tritonmodel", "serving.repository", "serving.nvinfer", "serving.deepstream",
    "serving.server",
    # 6 checks across stages
    "verify.parity", "verify.deploy",
    # 7 bring your own model: plugs into the core from above (ModelMeta.prepare, sources.register_reader)
    "byo.modeldef", "byo.public", "byo.swap", "byo.verify", "byo.spec", "byo.export", "byo",
    # 8 the whole job; 9 the Python API (one function per command, its results); 10 the command line
    "workflow.steps", "workflow.pipeline", "workflow.doctor", "results", "api",
    "cli.words", "cli.signals", "cli.params", "cli.base", "cli.byo",
    "cli.models", "cli.export", "cli.checks", "cli.tensorrt", "cli.serving", "cli.workflow", "cli", "cli.__main__",
    "serving.client", "client",
]  # fmt: skip


# where each floor begins in ORDER (the floor of a module: the last start at or before it)
FLOOR_STARTS = {"errors": 0, "layers.cores": 1, "artifacts": 2, "runners.base": 3, "exporting": 4,
                "exporting.exporter": 5, "verify.parity": 6, "byo.modeldef": 7, "workflow.steps": 8,
                "results": 9, "cli.words": 10}  # fmt: skip


def floor_of(module: str) -> int:
    index = ORDER.index(module)
    return max(f for start, f in FLOOR_STARTS.items() if ORDER.index(start) <= index)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


def _imports(path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every aft_export import in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "aft_export":
            base = node.module[len("aft_export"):].lstrip(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                out.append((node.lineno, sub if sub in known else base))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "aft_export":
                    out.append((node.lineno, alias.name[len("aft_export"):].lstrip(".")))
    return out


def test_every_module_has_a_floor():
    modules = set(_modules()) - {""}
    assert sorted(modules - set(ORDER)) == [], "add new modules to ORDER (and ARCHITECTURE.md)"
    assert sorted(set(ORDER) - modules) == [], "ORDER names modules that no longer exist"


def test_no_import_runs_upward_or_in_a_cycle():
    modules = _modules()
    rank = {m: i for i, m in enumerate(ORDER)}
    bad = []
    for name, path in modules.items():
        if name == "":  # the package's __init__ re-exports the API; checked below
            continue
        for line, target in _imports(path, set(modules)):
            if target == "" or target == name:
                continue
            if rank[target] >= rank[name]:
                bad.append(f"aft_export.{name} (line {line}) imports aft_export.{target}, which is not below it")
    assert bad == [], "\n".join(bad)


# the core: what every command runs on; it and everything it imports never import aft_export.byo
CORE = ("models.checkpoint", "models.sources", "runners", "exporting", "exporting.exporter", "verify.parity")


def _reached(start: tuple[str, ...]) -> dict[str, str]:
    """Every module the ``start`` modules import, at any depth, with one module that imports it."""
    modules = _modules()
    known = set(modules)
    seen, todo = {m: "" for m in start}, list(start)
    while todo:
        name = todo.pop()
        for _, target in _imports(modules[name], known):
            if target and target not in seen:
                seen[target] = name
                todo.append(target)
    return seen


def _byo_imports(name: str, path: Path) -> list[str]:
    return [f"aft_export.{name} (line {line}) imports aft_export.{t}" for line, t in _imports(path, set(_modules()))
            if t == "byo" or t.startswith("byo.")]  # fmt: skip


def test_the_core_never_imports_the_bring_your_own_code():
    """byo plugs in from above (ModelMeta.prepare, sources.register_reader): nothing the core
    imports, at any depth, is in aft_export.byo, and only the command line and the API import it."""
    modules = _modules()
    reached = _reached(CORE)
    assert not [m for m in reached if m.startswith("byo")], {m: by for m, by in reached.items() if m.startswith("byo")}
    bad = [line for name, path in modules.items() if name and not name.startswith("byo") and name != "api"
           and not (name == "cli" or name.startswith("cli.")) for line in _byo_imports(name, path)]  # fmt: skip
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("module, importers", [("workflow.pipeline", {"api"}), ("cli", {"cli.__main__"}),
                                               ("cli.byo", {"cli.export", "cli.checks", "cli.workflow"})])
def test_no_stage_imports_the_pipeline_or_the_command_line(module, importers):
    modules = _modules()
    found = {name for name, path in modules.items() if name
             for _, t in _imports(path, set(modules)) if t == module and name != module}  # fmt: skip
    assert found <= importers, f"aft_export.{module} is imported by {sorted(found - importers)}"


# what the command line may import: the API and its results, the options, the ground floor's modules
# and the renderers; never a stage or a runner (issue 34: a thin shell over the API)
CLI_MAY_IMPORT = {"api", "results", "options", "options.params", "options.commands", "errors", "version", "fileio", "readers", "environment",
                  "workflow.report"}  # fmt: skip


def _cli_imports_beyond_the_api(name: str, path: Path) -> list[str]:
    return [f"aft_export.{name} (line {line}) imports aft_export.{t}" for line, t in _imports(path, set(_modules()))
            if t not in CLI_MAY_IMPORT and not (t == "cli" or t.startswith("cli."))]  # fmt: skip


def test_the_command_line_imports_only_the_api_the_options_and_the_renderers():
    """Every aft_export import of every cli module, at any depth (inside functions too)."""
    modules = _modules()
    cli = [name for name in modules if name == "cli" or name.startswith("cli.")]
    assert len(cli) > 10
    bad = [line for name in cli for line in _cli_imports_beyond_the_api(name, modules[name])]
    assert bad == [], "\n".join(bad)


def test_the_command_line_check_catches_a_stage_import(tmp_path):
    """The rule above can fail: a runner imported inside a command's function, or a stage at the top."""
    fake = tmp_path / "checks.py"
    fake.write_text("from aft_export.api import parity\nfrom aft_export.verify.parity import run_parity\n\n"
                    "def f():\n    from aft_export.runners.ort import ort_conflict\n")
    assert _cli_imports_beyond_the_api("cli.checks", fake) == [
        "aft_export.cli.checks (line 2) imports aft_export.verify.parity",
        "aft_export.cli.checks (line 5) imports aft_export.runners.ort"]  # fmt: skip


def test_the_byo_checker_catches_a_core_import(tmp_path):
    """The rule above can fail: a core module importing the bring-your-own code is found."""
    fake = tmp_path / "checkpoint.py"
    fake.write_text("def f():\n    from aft_export.byo.spec import read_spec\n")
    assert _byo_imports("models.checkpoint", fake) == ["aft_export.models.checkpoint (line 2) imports aft_export.byo.spec"]


def test_report_renders_and_imports_no_runner_stage_or_pipeline():
    """report and plots turn results into text and SVG; they need nothing above the ONNX/comparison floor."""
    modules = _modules()
    below = set(ORDER[: ORDER.index("runners.base")])
    for name in ("workflow.report", "workflow.plots"):
        found = {t for _, t in _imports(modules[name], set(modules))}
        assert found <= below, f"aft_export.{name} imports {sorted(found - below)}"


def test_the_package_init_only_re_exports_the_model_floor():
    targets = {t for _, t in _imports(PACKAGE / "__init__.py", set(_modules()))}
    assert targets <= {"errors", "version", "models.checkpoint", "models"}, targets


@pytest.mark.parametrize("rule,pattern,allowed", [
    ("only the runners create ONNX Runtime sessions", r"InferenceSession\(", {"runners/ort.py"}),
    ("only the runners compile OpenVINO models", r"compile_model\(", {"runners/openvino.py"}),
    ("only the runners create ONNX reference evaluators", r"ReferenceEvaluator\(", {"runners/reference.py"}),
    ("only onnxio loads or saves ONNX files", r"onnx\.(load|save|save_model|load_model)\(",
     {"artifacts/onnxio.py", "quantization/placement.py"}),
    ("only the PyTorch runner (for its own calls) and training set PyTorch's process-wide thread count",
     r"set_num_threads\(", {"runners/pytorch.py", "models/training.py"}),
    ("only report writes the pipeline's markdown", r"\]\(plots/|\| artifact \|", {"workflow/report.py"}),
])  # fmt: skip
def test_one_room_per_concern(rule, pattern, allowed):
    """quantization/placement.py hands files to ONNX Runtime's quantiser, which reads and writes paths."""
    found = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if re.search(pattern, p.read_text())}
    assert found <= allowed, f"{rule}: also in {sorted(found - allowed)}"


def test_the_checker_catches_an_upward_import(tmp_path):
    """The test above can fail: an import from a lower floor of a higher one is reported."""
    fake = tmp_path / "fileio.py"
    fake.write_text("def f():\n    from aft_export.workflow.pipeline import run_pipeline\n")
    rank = {m: i for i, m in enumerate(ORDER)}
    found = [t for _, t in _imports(fake, set(_modules())) if rank[t] >= rank["fileio"]]
    assert found == ["workflow.pipeline"]


def test_the_wheel_lists_every_package():
    tomllib = pytest.importorskip("tomllib")

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {"aft_export" + ("." + m if m else "") for m in _modules()
               if (PACKAGE / m.replace(".", "/") / "__init__.py").is_file()} | {"aft_export"}
    assert on_disk <= listed, f"pyproject.toml does not ship {sorted(on_disk - listed)}"


def _architecture_table() -> dict[str, set[int]]:
    """ARCHITECTURE.md's folder table: folder (``""``: the root) -> the floors it names."""
    rows = {}
    for line in (REPO / "ARCHITECTURE.md").read_text().splitlines():
        m = re.match(r"\| (`(\w+)/`|\(root\)) \| ([\d, ]+) \|", line)
        if m:
            rows[m.group(2) or ""] = {int(f) for f in m.group(3).split(",")}
    return rows


def _folder_floors() -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for module in _modules():
        if not module:
            continue
        folder = module.split(".")[0] if (PACKAGE / module.split(".")[0]).is_dir() else ""
        if module == folder:  # a folder's __init__: its floor is checked below
            continue
        found.setdefault(folder, set()).add(floor_of(module))
    return found


def test_architecture_md_the_floors_and_the_folders_agree():
    """One row per folder in ARCHITECTURE.md, naming exactly the floors its modules sit on (ORDER)."""
    table, folders = _architecture_table(), _folder_floors()
    assert len(table) > 5
    assert sorted(table) == sorted(folders), "ARCHITECTURE.md's folder table lists other folders than the package has"
    wrong = {f: (sorted(table[f]), sorted(folders[f])) for f in folders if table[f] != folders[f]}
    assert not wrong, f"folder: (ARCHITECTURE.md's floors, ORDER's floors): {wrong}"


def test_a_folders_init_imports_nothing_above_its_lowest_floor():
    floors = _folder_floors()
    modules = _modules()
    bad = []
    for folder in floors:
        if not folder:
            continue
        lowest = min(floors[folder])
        for line, target in _imports(modules[folder], set(modules)):
            if target and floor_of(target) > lowest:
                bad.append(f"aft_export/{folder}/__init__.py line {line} imports {target} (floor {floor_of(target)})")
    assert bad == [], "\n".join(bad)


def test_the_table_check_catches_a_wrong_row(monkeypatch, tmp_path):
    """The agreement test can fail: a row naming a floor its folder does not have is found."""
    text = (REPO / "ARCHITECTURE.md").read_text().replace("| `layers/` | 1 |", "| `layers/` | 1, 3 |")
    (tmp_path / "ARCHITECTURE.md").write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _architecture_table()["layers"] == {1, 3} != _folder_floors()["layers"]


def test_the_old_module_paths_read_the_new_modules():
    """Each moved module's old path (an alias for one release) gives the new module's names, with a
    DeprecationWarning; every move names a module that exists."""
    import importlib
    import warnings

    import aft_export

    assert not set(aft_export.MOVED) & set(aft_export.MOVED_WITHOUT_ALIAS)
    for new in (*aft_export.MOVED.values(), *aft_export.MOVED_WITHOUT_ALIAS.values()):
        assert new in ORDER, new
    for old, new in aft_export.MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"aft_export.{old} is now aft_export.{new}"):
            module = importlib.import_module(f"aft_export.{old}")
        real = importlib.import_module(f"aft_export.{new}")
        public = [n for n in vars(real) if not n.startswith("_")]
        assert public and all(getattr(module, n) is getattr(real, n) for n in public)
        assert real.__spec__.name == f"aft_export.{new}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("aft_export.no_such_module")


def test_the_package_keeps_its_shape():
    """tools/shape.py's limits: about 12 modules in the root, no command-line module over 300 lines,
    none over 600 but the tables it names, no upward import, no cycle."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import shape
    finally:
        sys.path.remove(str(REPO / "tools"))
    assert shape.main() == 0
