import json
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from aft_export.models.checkpoint import load_checkpoint, save_checkpoint
from aft_export.cli import main
from aft_export.data.images import normalize
from aft_export.data.datasets import load_labelled
from aft_export.models import create_model, list_models
from tests.conftest import REPO, need_openvino
from tests.test_evaluate import (
    AGREEMENT_FLIPPED,
    FLIPPED,
    LOGITS,
    TOP1,
    TOP1_FLIPPED,
    TOP5,
    TOP5_FLIPPED,
    gray_image_folder,
    lookup_onnx,
)


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "m.pt"
    save_checkpoint(path, create_model("aft_local_test"), [f"k{i}" for i in range(10)],
                    model_name="aft_local_test", provenance={"epochs": 1, "seed": 7,
                    "metrics": {"test_top1": 42.0}})  # fmt: skip
    return path


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_models_lists_the_registry():
    result = run("models")
    assert result.exit_code == 0
    for name in list_models():
        assert name in result.output


def test_a_file_name_cannot_forge_a_line_of_the_text(ckpt, tmp_path):
    """A name with a line break (HOSTILE.md, text and names) is shown with the break escaped, in a result's text
    and in a log line: no file name can print a line of ours (a forged verdict)."""
    from onnx import TensorProto, helper, save

    forged = "a\nresult: FORGED, every check passed\r"
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "y")]
    onnx_file = tmp_path / f"{forged}.onnx"
    save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", value[:1], value[1:]),
                           opset_imports=[helper.make_opsetid("", 18)]), onnx_file)  # fmt: skip
    pt_file = ckpt.rename(tmp_path / f"{forged}.pt")
    for args in (["info", pt_file], ["info", onnx_file], ["check", onnx_file, "--offline-only"],
                 ["export", pt_file, "-o", tmp_path / f"{forged}.out.onnx", "--images", "0"]):
        result = run(*args)
        assert "a\\nresult: " in result.output and "\r" not in result.output, (args, result.output)
        assert not any(line.startswith("result: FORGED") for line in result.output.splitlines()), args


def test_info_text_and_json(ckpt):
    result = run("info", ckpt)
    assert result.exit_code == 0, result.output
    assert "AFT-local" in result.output and "k0, k1" in result.output
    assert "test_top1=42.0" in result.output and "seed=7" in result.output
    data = json.loads(run("info", ckpt, "--json").output)
    assert data["params"] == sum(p.numel() for p in create_model("aft_local_test").parameters())
    assert data["config"]["window"] == 2 and data["metrics"]["test_top1"] == 42.0


def test_info_on_a_plain_state_dict_needs_config(tmp_path):
    path = tmp_path / "sd.pt"
    torch.save(create_model("aft_simple_test").state_dict(), path)
    assert run("info", path, "--config", "aft_simple_test").exit_code == 0
    result = run("info", path)
    assert result.exit_code == 2 and "--config NAME" in result.output


@pytest.mark.parametrize(
    "setup, message",
    [("missing", "does not exist"), ("empty", "is empty"), ("garbage", "corrupt"),
     ("badconfig", "unknown model config")],
)  # fmt: skip
def test_user_errors_are_one_line_and_exit_2(tmp_path, setup, message):
    path = tmp_path / "x.pt"
    args = ["info", path]
    if setup == "empty":
        path.write_bytes(b"")
    elif setup == "garbage":
        path.write_bytes(b"\x80\x02garbage" * 50)
    elif setup == "badconfig":
        torch.save(create_model("aft_simple_test").state_dict(), path)
        args += ["--config", "nope"]
    result = run(*args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in result.output


def test_console_script_entry_point(ckpt):
    """The installed command, as a user runs it: clean error, no traceback, exit 2."""
    proc = subprocess.run([sys.executable, "-m", "aft_export.cli", "info", str(ckpt) + ".nope"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: artifact") and "Traceback" not in proc.stderr


def test_train_bad_model_name(tmp_path):
    result = run("train", "--model", "nope", "--data", tmp_path, "--output", tmp_path / "x.pt")
    assert result.exit_code == 2 and "unknown model config 'nope'" in result.output


def test_export_command_end_to_end(tmp_path, cifar10):
    ckpt = tmp_path / "m.pt"
    save_checkpoint(ckpt, create_model("aft_conv_test"), [f"k{i}" for i in range(10)], model_name="aft_conv_test")
    out = tmp_path / "m.onnx"
    result = run("export", ckpt, "-o", out, "--images", 16, "--data", cifar10 / "test.tar")
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert "2 com.aft nodes" in result.output and "top-1 agreement 100.0%" in result.output
    assert "onnxsim:" in result.output
    data = json.loads(run("export", ckpt, "-o", out, "--images", 0, "--no-simplify", "--json").output)
    assert data["aft_nodes"] == 2 and data["simplify"] is None and data["parity"] is None


@pytest.mark.parametrize(
    "extra, message",
    [(["--opset", "12"], "12 is not in the range x>=18"), (["--batch-dim", "lots"], "--batch-dim takes 'dynamic' or a batch size from 1 to 65536"),
     (["--dynamic-hw"], "only AFT-conv models take dynamic height and width")],
)  # fmt: skip
def test_export_bad_input_exit_2(ckpt, tmp_path, extra, message):
    result = run("export", ckpt, "-o", tmp_path / "x.onnx", "--images", 0, *extra)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.onnx").exists()


def test_export_to_missing_directory(ckpt, tmp_path):
    result = run("export", ckpt, "-o", tmp_path / "nope" / "x.onnx", "--images", 0)
    assert result.exit_code == 2 and "output directory" in result.output


def test_eval_command(tmp_path, cifar10):
    ckpt = tmp_path / "m.pt"
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    torch.manual_seed(0)
    save_checkpoint(ckpt, create_model("aft_simple_test"), classes)
    result = run("eval", ckpt, "--data", cifar10 / "test.tar", "--images", 50, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)  # an object: the rows and the verdict
    row, (status,) = out["rows"][0], {out["verdict"]["status"]}
    assert status == "ok"
    # the same 50 images through the model, counted here
    model, meta = load_checkpoint(ckpt)
    data = load_labelled(cifar10 / "test.tar", 32, limit=50)
    with torch.no_grad():
        order = model.eval()(normalize(data.images, meta.mean, meta.std)).argsort(dim=1, descending=True)
    hit = order == torch.as_tensor(data.labels)[:, None]
    assert row["images"] == 50
    assert row["top1"] == round(100 * hit[:, 0].double().mean().item(), 2)
    assert row["top5"] == round(100 * hit[:, :5].any(dim=1).double().mean().item(), 2)
    wrong = run("eval", ckpt.parent / "nope.pt", "--data", cifar10 / "test.tar")
    assert wrong.exit_code == 2


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_eval_command_against_hand_counted_metrics(tmp_path, backend):
    """Two lookup-table models whose top-1, top-5 and agreement are counted by hand
    (tests/test_evaluate.py), through the command, in JSON and in the table; in ONNX Runtime
    and in OpenVINO (--backend), batches of 3 (OpenVINO: split over its THROUGHPUT requests)."""
    if backend == "openvino":
        need_openvino()
    data = gray_image_folder(tmp_path / "data")
    first, flipped = lookup_onnx(tmp_path / "a.onnx", LOGITS), lookup_onnx(tmp_path / "b.onnx", FLIPPED)
    result = run("eval", first, flipped, "--data", data, "--batch-size", 3, "--json", "--backend", backend)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [(r["images"], r["top1"], r["top5"], r["agreement"]) for r in rows] == [
        (10, TOP1, TOP5, 100.0), (10, TOP1_FLIPPED, TOP5_FLIPPED, AGREEMENT_FLIPPED)]  # fmt: skip
    assert {r["backend"] for r in rows} == {backend}
    if backend == "openvino":
        return
    table = run("eval", first, flipped, "--data", data, "--batch-size", 3)
    assert table.exit_code == 0, table.output
    shown = [[float(v) for v in line.split()[-4:]] for line in table.output.strip().splitlines()[-2:]]
    assert shown == [[10, TOP1, TOP5, 100.0], [10, TOP1_FLIPPED, TOP5_FLIPPED, AGREEMENT_FLIPPED]]


def test_backend_and_the_old_provider_on_every_command_that_runs_models(served_onnx, cifar10, monkeypatch):
    """--backend openvino in parity, bench and infer (eval: above; serve: tests/test_serve.py), the
    default export as it is; --provider cpu still names ONNX Runtime, with a note; two names for
    two backends are refused; a missing OpenVINO is a skip (exit 3) where a command skips, one line
    (exit 2) where it cannot (infer, serve)."""
    need_openvino()
    onnx_path, ckpt = served_onnx[0], served_onnx[0].parent / "conv.pt"
    photo = REPO / "examples" / "photo.jpg"
    parity = ["parity", ckpt, onnx_path, "--data", cifar10 / "test.tar", "--images", 8, "--json"]
    bench = ["bench", onnx_path, "--batch-size", 1, "--batch-size", 3, "--iters", 1, "--warmup", 0, "--json"]
    infer = ["infer", onnx_path, photo, "--json"]
    for args in (parity, bench, infer):
        ours = run(*args, "--backend", "openvino")
        assert ours.exit_code == 0, ours.output
        out = json.loads(ours.stdout)
        rows = out.get("artifacts") or out.get("rows") or [out]
        assert {r["backend"] for r in rows} == {"openvino"}, (args[0], rows)
        assert all(r.get("passed", True) for r in rows) and "warning" not in ours.stderr
        old = run(*args, "--provider", "cpu")
        assert old.exit_code == 0, old.output
        assert old.stderr.startswith(f"warning: {args[0]} --provider cpu is now --backend onnxruntime; the old name")
        out = json.loads(old.stdout)
        assert {r["backend"] for r in out.get("artifacts") or out.get("rows") or [out]} == {"onnxruntime"}
    both = run(*infer, "--backend", "openvino", "--provider", "cuda")
    assert both.exit_code == 2 and both.stderr.splitlines()[-1] == (
        "error: --backend openvino and --provider cuda (onnxruntime-cuda) name two backends; give --backend alone")
    monkeypatch.setitem(sys.modules, "openvino", None)  # OpenVINO not installed: its import fails
    skipped = run(*parity, "--backend", "openvino")
    row = json.loads(skipped.stdout)["artifacts"][0]
    assert skipped.exit_code == 3 and (row["status"], row["passed"]) == ("skipped", None)
    assert row["reason"] == "OpenVINO is not installed: pip install 'aft-export[openvino]'"
    assert run(*bench, "--backend", "openvino").exit_code == 3
    missing = run(*infer, "--backend", "openvino")
    assert missing.exit_code == 2 and missing.stderr.strip().endswith("pip install 'aft-export[openvino]'")
    serve = run("serve", onnx_path, "--backend", "openvino")
    if "serving needs the serve extra" not in serve.stderr:  # that line comes first where it is missing
        assert serve.exit_code == 2 and "OpenVINO is not installed" in serve.stderr.splitlines()[-1]


def test_commands_on_onnx_files_alone_load_no_torch(zoo_onnx, tmp_path, cifar10):
    """info, eval, check and bench on ONNX files never need PyTorch, and importing it is most of a
    short command's second: they do not load it (a checkpoint among the files does)."""
    a, b = zoo_onnx.export("aft_conv_cifar", tmp_path / "a.onnx"), zoo_onnx.export("aft_conv_cifar", tmp_path / "b.onnx")
    code = ("import sys; from aft_export.cli import main\n"
            "try: main(sys.argv[1:])\nexcept SystemExit as e: print('exit', e.code, 'torch' in sys.modules)")  # fmt: skip
    data = ["--data", cifar10 / "test.tar", "--images", 8]
    commands = [["info", a], ["eval", a, b, *data], ["check", a], ["bench", a, "--iters", 1, "--warmup", 0],
                ["eval", REPO / "models" / "aft_conv_cifar.pt", a, *data]]
    for args in commands:
        r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                           check=False)  # fmt: skip
        last = r.stdout.strip().splitlines()[-1]
        assert last == f"exit 0 {args[1].suffix == '.pt'}", (args, r.stdout[-2000:], r.stderr[-2000:])


def test_eval_refuses_a_set_with_other_classes(ckpt, tmp_path, cifar10):
    result = run("eval", ckpt, "--data", cifar10 / "test.tar", "--images", 20)
    assert result.exit_code == 2 and "classes" in result.output


def test_two_onnxruntime_wheels_are_reported(monkeypatch):
    """onnxruntime and onnxruntime-gpu write one package directory: the CLI says so."""
    import aft_export.environment as environment

    monkeypatch.setattr(environment, "ort_distributions", lambda: {"onnxruntime": "1.32.0", "onnxruntime-gpu": "1.31.1"})
    res = CliRunner().invoke(main, ["check", "missing.onnx"])
    assert res.exit_code == 2
    assert "warning: onnxruntime 1.32.0, onnxruntime-gpu 1.31.1 are all installed" in res.output
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in res.output
    monkeypatch.setattr(environment, "ort_distributions", lambda: {"onnxruntime": "1.32.0"})
    assert "warning" not in CliRunner().invoke(main, ["check", "missing.onnx"]).output


# ---------------------------------------------------------------- renamed flags (one release of aliases)


def _command(name):
    return main.commands[name]


def test_renamed_flags_are_the_new_names_and_hidden_from_help():
    import re

    from aft_export.cli.words import RENAMED_FLAGS

    for name, renamed in RENAMED_FLAGS.items():
        opts = {o for p in _command(name).params for o in getattr(p, "opts", ())}
        text = run(name, "--help").output
        for old, new in renamed.items():
            assert new in opts and old not in opts, (name, old, new)
            assert re.search(rf"(?<![\w-]){re.escape(new)}(?![\w-])", text), (name, new)
            assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text), (name, old)


def test_old_flag_names_map_onto_the_new_ones():
    """Each old name, spelt `--old V` or `--old=V`, becomes the new one; a value that
    looks like an old flag stays a value; nothing after `--` is touched."""
    from aft_export.cli.words import RENAMED_FLAGS, rename_args as _rename_args, renamed_used as _renamed_used

    for name, renamed in RENAMED_FLAGS.items():
        for old, new in renamed.items():
            _renamed_used.clear()
            assert _rename_args(_command(name), [old, "7"]) == [new, "7"]
            assert _rename_args(_command(name), [f"{old}=7"]) == [f"{new}=7"]
            assert _renamed_used == [(old, new)]
            assert _rename_args(_command(name), ["--", old]) == ["--", old]
    _renamed_used.clear()
    quantize = _command("quantize")
    args = ["--exclude", "--count", "--count", "3"]
    assert _rename_args(quantize, args) == ["--exclude", "--count", "--images", "3"]
    assert _rename_args(quantize, ["-o", "--count"]) == ["-o", "--count"]
    _renamed_used.clear()


def test_an_old_flag_works_with_a_note_and_errors_name_it(tmp_path, cifar10):
    from aft_export.data.datasets import CIFAR10_CLASSES

    ckpt = tmp_path / "m.pt"
    save_checkpoint(ckpt, create_model("aft_simple_test"), list(CIFAR10_CLASSES))
    data = ["--data", str(cifar10 / "test.tar")]
    new = CliRunner().invoke(main, ["eval", str(ckpt), *data, "--images", "20", "--json"])
    old = CliRunner().invoke(main, ["eval", str(ckpt), *data, "--limit", "20", "--json"])
    assert new.exit_code == old.exit_code == 0, old.output
    rows = [{k: v for k, v in json.loads(r.stdout)["rows"][0].items() if k != "seconds"} for r in (old, new)]
    assert rows[0] == rows[1] and rows[0]["images"] == 20
    assert old.stderr.strip() == "warning: eval --limit is now --images; the old name goes in aft-export 0.2.0"
    assert "warning" not in new.stderr
    bad = CliRunner().invoke(main, ["quantize", "m.onnx", "-o", "q.onnx", "--precision", "int8", "--count", "0"])
    assert bad.exit_code == 2
    assert bad.stderr.splitlines()[-1].startswith("error: invalid value for '--count (now --images)'")
