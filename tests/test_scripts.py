"""The benchmark scripts run end to end (tiny sizes; their figures are for reports, not asserts)."""

import importlib.util
import json

from tests.conftest import REPO


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aft_vs_mha_measures_every_layer(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert _script("bench_aft_vs_mha").main(["--tokens", "16", "64", "--iters", "1", "--dim", "32",
                                             "--json", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert {r["layer"] for r in rows} == {"mha", "aft_full", "aft_local", "aft_simple", "aft_conv"}
    assert all("error" not in r and r["ms"] > 0 and r["peak_mb"] >= 0 for r in rows)
    assert "AFT-full peak memory T=16 -> 64" in capsys.readouterr().out
