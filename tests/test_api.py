"""The Python API is the command line (issue 34, item 1): every command's flags are its function's
keywords and back, no module shadows a function, ``import aft_export`` loads no torch, each
result's ``to_dict()`` is what the command's ``--json`` prints, and ``serve`` returns a handle."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import aft_export
from aft_export import api
from tests.conftest import REPO

# ---------------------------------------------------------------- the names


def _plural(name: str) -> str:
    if name in api.KEPT_SINGULAR:
        return name
    if name in api.PLURALS:
        return api.PLURALS[name]
    return name[:-1] + "ies" if name.endswith("y") else name + "s"


def _keyword(param: click.Parameter) -> str:
    """The keyword a click parameter must have: an argument's name; an option's long flag with
    _ for -, plural when repeatable."""
    if isinstance(param, click.Argument):
        return param.name
    flag = max((o for o in param.opts if o.startswith("--")), key=len)
    name = flag[2:].replace("-", "_")
    return _plural(name) if param.multiple else name


def mismatches(command: click.Command, function) -> list[str]:
    """What differs between the command's flags (less hidden aliases and NO_KEYWORD) and the
    function's keywords, each way, in words."""
    wanted = {_keyword(p): p for p in command.params if not getattr(p, "hidden", False)}
    wanted = {k: p for k, p in wanted.items() if k not in api.NO_KEYWORD}
    have = set(inspect.signature(function).parameters)
    out = [f"{command.name}: {'/'.join(getattr(p, 'opts', [p.name]))} has no keyword `{k}` in "
           f"{function.__name__}()" for k, p in wanted.items() if k not in have]  # fmt: skip
    out += [f"{command.name}: {function.__name__}({k}=...) is no flag of the command" for k in sorted(have - set(wanted))]
    return out


def _functions():
    from aft_export.cli import main

    names = {command: function for function, command in api.COMMANDS.items()}
    return [(command, getattr(aft_export, names[name]) if name in names else aft_export.list_models)
            for name, command in sorted(main.commands.items())]


def test_every_command_has_its_function():
    from aft_export.cli import main

    assert sorted(api.COMMANDS.values()) == sorted(set(main.commands) - {"models"})
    assert sorted(api.COMMANDS) == sorted(api.__all__) == sorted(aft_export.API)


@pytest.mark.parametrize("command, function", _functions(), ids=lambda v: getattr(v, "name", None))
def test_every_flag_is_a_keyword_of_the_same_name_and_back(command, function):
    assert mismatches(command, function) == []


def test_the_name_check_finds_a_planted_mismatch():
    """It can fail: a flag without a keyword, and a keyword without a flag, are both found."""
    from aft_export.cli import main

    def export(checkpoint=None, output=None, *, colour=None, **_):  # noqa: ARG001
        pass

    found = mismatches(main.commands["export"], export)
    assert "export: export(colour=...) is no flag of the command" in found
    assert any("--images has no keyword `images`" in line for line in found)
    planted = click.Command("x", params=[click.Option(["--batch-size"], multiple=True), click.Option(["--json"]),
                                         click.Option(["--old"], hidden=True)])  # fmt: skip

    def x(batch_size=()):
        pass

    assert mismatches(planted, x) == ["x: --batch-size has no keyword `batch_sizes` in x()",
                                      "x: x(batch_size=...) is no flag of the command"]  # fmt: skip


def test_no_module_or_folder_shares_a_name_with_an_api_function():
    names = {p.stem for p in (REPO / "aft_export").iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
    shared = sorted(names & set(api.COMMANDS) | names & {"load_checkpoint", "create_model", "list_models"})
    assert shared == [], f"importing aft_export.{shared[0]} would replace the function aft_export.{shared[0]}"


def test_import_aft_export_loads_no_torch():
    code = ("import sys, aft_export; aft_export.API; heavy = [m for m in ('torch', 'onnx', 'onnxruntime') "
            "if m in sys.modules]; print(heavy)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
    code = "import sys, aft_export.api; print('torch' in sys.modules)"  # the API module itself is light, too
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          check=True).stdout.strip() == "False"  # fmt: skip


# ---------------------------------------------------------------- to_dict() is --json


def _cli_json(*args: str):
    from aft_export.cli import main

    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 1, 3), result.output
    return json.loads(result.stdout)


VOLATILE = {"seconds", "sha256", "path", "created_utc", "run_dir"}


def _printed(result):
    """``result.to_dict()`` as --json prints it (a tuple is a list there)."""
    return json.loads(json.dumps(result.to_dict()))


def _same(a, b, where=""):
    """Equal, but for what two runs differ in (times, the output's own path)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), where
        for k in a:
            if k not in VOLATILE:
                _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def made(tmp_path_factory, cifar10):
    """A tiny AFT-simple checkpoint, exported once by the API."""
    import torch

    from aft_export.data.datasets import CIFAR10_CLASSES
    from aft_export.models.checkpoint import save_checkpoint

    root = tmp_path_factory.mktemp("api")
    ckpt = root / "m.pt"
    torch.manual_seed(0)
    save_checkpoint(ckpt, aft_export.create_model("aft_simple_test"), CIFAR10_CLASSES, model_name="aft_simple_test")
    data = str(cifar10 / "test.tar")
    result = aft_export.export(ckpt, root / "m.onnx", images=8, data=data)
    return {"root": root, "ckpt": str(ckpt), "onnx": str(root / "m.onnx"), "data": data, "export": result}


def test_export_and_quantize_results_are_their_json(made):
    root, data = made["root"], made["data"]
    result = made["export"]
    assert result.passed and result.verdict.ok and result.path == made["onnx"]
    _same(_printed(result), _cli_json("export", made["ckpt"], "-o", str(root / "cli.onnx"), "--images", "8",
                                      "--data", data))  # fmt: skip
    q = aft_export.quantize(made["onnx"], root / "m.int8.onnx", calib=data, images=16, no_cache=True)
    assert q.passed and q.precision == "int8" and (root / "m.int8.onnx").is_file()
    _same(_printed(q), _cli_json("quantize", made["onnx"], "-o", str(root / "cli.int8.onnx"), "--precision", "int8",
                                 "--calib", data, "--images", "16", "--no-cache"))  # fmt: skip


def test_parity_eval_bench_infer_info_check_results_are_their_json(made):
    ckpt, onnx, data = made["ckpt"], made["onnx"], made["data"]
    p = aft_export.parity(ckpt, [onnx], data=data, images=4)
    assert p.passed and p.verdict.ok and p.artifacts[0].status == "pass"
    _same(_printed(p), _cli_json("parity", ckpt, onnx, "--data", data, "--images", "4"))
    e = aft_export.evaluate([ckpt, onnx], data=data, images=20)
    assert e.passed
    _same(_printed(e), _cli_json("eval", ckpt, onnx, "--data", data, "--images", "20"))
    b = aft_export.bench(onnx, batch_sizes=(1, 2), warmup=0, iters=1)
    assert b.passed and [r["batch"] for r in b.rows] == [1, 2]
    _same({k: v for k, v in _printed(b).items() if k != "rows"},
          {k: v for k, v in _cli_json("bench", onnx, "--batch-size", "1", "--batch-size", "2", "--warmup", "0",
                                      "--iters", "1").items() if k != "rows"})  # fmt: skip
    image = str(REPO / "examples" / "photo.jpg")
    i = aft_export.infer(onnx, image, top_k=2)
    assert _printed(i) == _cli_json("infer", onnx, image, "--top-k", "2") and len(i.results[0]["top"]) == 2
    n = aft_export.info(onnx)
    assert n.kind == "onnx" and _printed(n) == _cli_json("info", onnx)
    c = aft_export.check(onnx, trt_versions=["10.3"], offline_only=True)
    assert c.passed and _printed(c) == _cli_json("check", onnx, "--trt", "10.3", "--offline-only")


def test_user_errors_are_one_line_naming_keywords(made, tmp_path):
    """Keywords that do not go together, and bad values the options check: each one line that names the
    keyword (in backquotes, as Python callers write it), never a flag, and nothing written."""
    calls = [
        ("`reference`", lambda: aft_export.bench(made["onnx"], images=5)),
        ("`input_size`.*`model_def`", lambda: aft_export.parity(made["ckpt"], [made["onnx"]], data=made["data"],
                                                                input_size=32)),
        ("`weight_bits` is an int8 option", lambda: aft_export.quantize(made["onnx"], tmp_path / "q.onnx",
                                                                        precision="fp16", weight_bits=7)),
        (r"`percentile` takes a finite number in \(0, 100\], got nan", lambda: aft_export.quantize(made["onnx"], tmp_path / "q.onnx", percentile=float("nan"),
                                                              calib=made["data"])),
        ("`backend=onnxruntime-tensorrt` is not a runtime the deploy table runs",
         lambda: aft_export.bench(made["onnx"], reference=made["ckpt"], backend="onnxruntime-tensorrt")),
        ("`threads` takes a whole number from 0 to 1024, got -1", lambda: aft_export.bench(made["onnx"], threads=-1)),
    ]  # fmt: skip
    for said, call in calls:
        with pytest.raises(aft_export.AFTExportError, match=said) as err:
            call()
        assert "\n" not in str(err.value) and "--" not in str(err.value), str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_users_module_exports_quantises_and_passes_parity(made):
    """A plain nn.Module, with its preprocessing as keywords, through export, quantize and parity."""
    import torch

    from aft_export.layers import AFTSimple

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Conv2d(3, 16, 8, stride=8)
            self.aft = AFTSimple(16)
            self.head = torch.nn.Linear(16, 10)

        def forward(self, x):
            t = self.embed(x).flatten(2).transpose(1, 2)
            return self.head(self.aft(t).mean(1))

    torch.manual_seed(0)
    net, root, data = Net(), made["root"], made["data"]
    pre = dict(input_size=32, mean=(0.49, 0.48, 0.45), std=(0.25, 0.24, 0.26))
    e = aft_export.export(net, root / "net.onnx", images=8, data=data, **pre)
    assert e.passed and e.aft_nodes == 1
    q = aft_export.quantize(root / "net.onnx", root / "net.fp16.onnx", precision="fp16", calib=data, images=8,
                            no_cache=True)  # fmt: skip
    p = aft_export.parity(net, [e.path, q.path], data=data, images=4, **pre)
    assert p.passed and [r.precision for r in p.artifacts] == ["fp32", "fp16"] and p.reference == "Net"


def test_serve_returns_a_handle_that_stops_the_server(served_onnx):
    """serve() from Python: ready when it returns, on loopback, and gone when the block ends."""
    from tests.servekit import children, free_ports, listening, need_server

    httpclient = need_server()
    http, grpc, metrics = free_ports()
    with aft_export.serve([served_onnx[0]], http_port=http, grpc_port=grpc, metrics_port=metrics) as server:
        assert server.running and server.http == f"http://127.0.0.1:{http}"
        with httpclient.InferenceServerClient(f"127.0.0.1:{http}") as client:
            assert client.is_model_ready("conv") and client.is_model_ready(server.models[1])
        started = children(os.getpid())
        sockets = listening(started)  # gRPC's is IPv6, at 127.0.0.1's IPv4-mapped address
        assert {http, grpc, metrics} <= {p for _, p in sockets}
        assert {a.removeprefix("::ffff:") for a, _ in sockets} == {"127.0.0.1"}, sockets
    assert not server.running and not (children(os.getpid()) & started)


def test_every_function_says_what_it_returns():
    """Each command's function is annotated with the result type its stage builds, a Judged one (``verdict``,
    ``passed``, ``to_dict()``), the names resolving to the classes (imported for type checkers only)."""
    import ast
    import inspect
    import typing

    from aft_export import api
    from aft_export.errors import Judged

    tree = ast.parse(inspect.getsource(api))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    names = {}
    for imp in guarded.body:
        module = __import__(imp.module, fromlist=["_"])
        names.update({a.name: getattr(module, a.name) for a in imp.names})
    for name in api.__all__:
        returned = typing.get_type_hints(getattr(api, name), globalns={**vars(api), **names})["return"]
        assert issubclass(returned, Judged) and callable(returned.to_dict), name


def test_the_stages_that_write_claim_their_outputs_for_python_callers_too(made, tmp_path):
    """A second run writing the same output fails at its start from Python as from the command line: build and
    triton-repo claim theirs in the stage (the command line's claim re-enters it), as every other stage does."""
    import subprocess
    import sys

    from tests.conftest import need_module

    repo, engine = tmp_path / "repo", tmp_path / "m.engine"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom aft_export.fileio import claim_output\n"
                               "with claim_output(sys.argv[1], directory=True), claim_output(sys.argv[2]):\n"
                               "    print('held', flush=True)\n    time.sleep(120)\n", str(repo), str(engine)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(aft_export.AFTExportError, match=rf"^another aft-export run \(pid {holder.pid}\) is writing {repo}"):
            aft_export.triton_repo(made["onnx"], repo)
        assert not repo.exists()
        need_module("tensorrt_rtx", "pip install 'aft-export[rtx]'")
        with pytest.raises(aft_export.AFTExportError, match=rf"^another aft-export run \(pid {holder.pid}\) is writing {engine}"):
            aft_export.build(made["onnx"], engine, library="tensorrt-rtx")
        assert not engine.exists()
    finally:
        holder.kill()
        holder.wait()
