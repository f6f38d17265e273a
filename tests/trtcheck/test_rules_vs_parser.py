"""The offline rules against NVIDIA's own ONNX parser (issue 19, item 4) and builder (issue 28, item 5).

Every graph of tests/trtcheck/parser_graphs.py (a graph that breaks each rule of ``aft-export
check --rules`` and a near miss for each, then the operators and restrictions of the op table)
is parsed live by TensorRT-RTX's OnnxParser and checked offline against the ``rtx-1.7`` column;
every graph the parser accepts is then built by TensorRT-RTX's builder, ahead of time on the CPU
(in memory: small graphs, a fraction of a second each), so what a user would meet at ``build``
is held against the rules too. Rules and parser, and rules and parser-then-builder, must agree,
except on the graphs tests/data/rtx_differences.json lists with a reason and a source; a listed
difference that no longer happens fails too, so the list cannot go stale. CI installs
TensorRT-RTX, so there this test runs (tests/rtx.need_rtx).

The tables: ``python -m tests.trtcheck.parser_graphs --build`` (or ``pytest -s`` on this file).
"""

from __future__ import annotations

import pytest

from aft_export.trtcheck.rules import RULES
from aft_export.trtcheck.versions import COLUMNS, Version
from tests.rtx import build, need_rtx, parse
from tests.trtcheck import parser_graphs as pg


@pytest.fixture(scope="module")
def rows():
    need_rtx()
    return pg.compare(parse, build)


def _library(d: dict) -> str:
    """The parser and the builder together: what ``aft-export build`` meets."""
    return "accepts" if d["parser"] == "accepts" and d["builder"] == "accepts" else "refuses"


def test_rules_and_parser_agree_except_where_documented(rows):
    known = {g: d for g, d in pg.documented().items() if d["rules"] != d["parser"]}
    print("\n" + "\n".join(pg.table(list(rows))))
    undocumented = [r for r in rows if not r["agrees"] and r["graph"] not in known]
    assert not undocumented, "rules and parser disagree (fix the rule, or document the difference in " \
        f"{pg.DIFFERENCES.name}): " + "; ".join(
            f"{r['graph']}: rules {r['offline']} {r['offline_rules']}, parser {r['parser']} {r['parser_errors'][:1]}"
            for r in undocumented)  # fmt: skip
    by_graph = {r["graph"]: r for r in rows}
    stale = [g for g in known if g not in by_graph or by_graph[g]["agrees"]]
    assert not stale, f"listed in {pg.DIFFERENCES.name} but no longer a disagreement (remove them): {stale}"
    for g, d in known.items():
        r = by_graph[g]
        assert (d["rules"], d["parser"]) == (r["offline"], r["parser"]), g
        assert d["rule"] in r["offline_rules"] and d["reason"] and d["source"], g


def test_rules_and_builder_agree_except_where_documented(rows):
    """Every graph the parser accepts is built; the rules refuse what the builder refuses, or the
    difference is listed with its reason (a false pass: ``rule`` null)."""
    print("\n" + "\n".join(pg.builder_table(list(rows))))
    documented = pg.documented()
    known = {g: d for g, d in documented.items() if d["rules"] != _library(d)}
    assert all((r["builder"] is None) == (r["parser"] == "refuses") for r in rows)
    undocumented = [r for r in rows if not r["builder_agrees"] and r["graph"] not in known]
    assert not undocumented, "rules and builder disagree (fix the rule, or document the difference in " \
        f"{pg.DIFFERENCES.name}): " + "; ".join(
            f"{r['graph']}: rules {r['offline']} {r['offline_rules']}, parser {r['parser']}, builder {r['builder']} "
            f"{r['builder_errors'][:1]}" for r in undocumented)  # fmt: skip
    by_graph = {r["graph"]: r for r in rows}
    stale = [g for g in known if g not in by_graph or by_graph[g]["builder_agrees"]]
    assert not stale, f"listed in {pg.DIFFERENCES.name} but no longer a disagreement (remove them): {stale}"
    for g, d in documented.items():  # every entry says what both library steps do today
        r = by_graph[g]
        assert (d["rules"], d["parser"], d["builder"]) == (r["offline"], r["parser"], r["builder"]), g
        assert d["reason"] and d["source"], g
        assert (d["rule"] is None) if d["rules"] == "accepts" else (d["rule"] in r["offline_rules"]), g


def test_every_rule_has_a_breaking_graph_and_a_near_miss():
    """Offline only: each rule's break graph is refused by that rule where the rule applies, and its
    near miss is not; so the live comparison above covers every rule of ``check --rules``."""
    ids = {c.id: c for c in pg.cases()}
    for rule in RULES.values():
        where = [v for v in COLUMNS if rule.applies(Version(v))]
        assert where, rule.id
        column = pg.COLUMN if pg.COLUMN in where else where[-1]
        broken, near = ids.get(f"{rule.id}/break"), ids.get(f"{rule.id}/near")
        assert broken and near, f"{rule.id}: no break/near graph in parser_graphs.py"
        assert rule.id in pg.offline(broken.make(), column)[1], f"{rule.id}/break is not refused by it ({column})"
        assert rule.id not in pg.offline(near.make(), column)[1], f"{rule.id}/near is refused by it ({column})"


def test_the_documented_wrong_results_show_in_the_parsed_network(rows):
    """The differences listed as 'wrong result, no error' are what the parser built: both calls of F
    run the first body, custom::Relu is the built-in Relu, a UINT8-zero-point Q makes INT8."""
    trt = need_rtx()
    cases = {c.id: c for c in pg.cases()}

    def layers(graph):
        network = parse(cases[graph].make().SerializeToString()).network
        out = []
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            if layer.type == trt.LayerType.ACTIVATION:
                layer.__class__ = trt.IActivationLayer
                out.append(("ACTIVATION", layer.type.name))
            else:
                out.append((layer.type.name, layer.get_output(0).dtype.name))
        return out

    assert layers("functions.same-name/break") == [("ACTIVATION", "RELU")] * 2  # b::F (Sigmoid) is not run
    assert layers("functions.shadowed/break") == [("ACTIVATION", "RELU")]  # the body (Sigmoid) is not run
    assert ("QUANTIZE", "INT8") in layers("op/q-uint8-zero-point")  # ONNX: UINT8


def test_each_graph_is_parsed_on_its_own(rows):
    """One parser per graph, from bytes; no graph's parse is slow (the whole table stays cheap)."""
    assert len(rows) == len(pg.cases()) and len({r["graph"] for r in rows}) == len(rows)
    slow = [(r["graph"], r["parse_seconds"]) for r in rows if r["parse_seconds"] > 2.0]
    assert not slow, slow
