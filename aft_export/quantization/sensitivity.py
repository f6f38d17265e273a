"""Sensitivity: which quantised nodes cost the most accuracy, and excluding them until
the top-1 disagreement with fp32 on the calibration images is within a budget."""

from __future__ import annotations

from aft_export.verify.compare import agreement as _agreement
from aft_export.artifacts.graph import node_module
from aft_export.quantization import placement, runs


def sensitivity(model, qmodel, cset, opts, exclude, ranges, prep, log):
    """Rank quantised nodes by the error their quantisation causes (the error left when
    only that node goes back to float), then exclude the worst until the top-1
    disagreement with fp32 on the calibration images is within the budget."""
    by_name = {n.name: n for n in model.graph.node}
    ref = runs.logits(model, prep, cset.tensors)
    base = _agreement(ref, runs.logits(qmodel, prep, cset.tensors))
    candidates = [n for n in placement.quantized_nodes(qmodel, placement.op_types(opts)) if n in by_name
                  and n not in exclude]  # fmt: skip
    ranking = []
    for name in candidates:
        trial = placement.ort_quantize(model, opts, exclude + [name], ranges)
        m = _agreement(ref, runs.logits(trial, prep, cset.tensors))
        mod = node_module(by_name[name])
        ranking.append({"node": name, "module": mod[0] if mod else "", "mse_if_float": m["mse"],
                        "gain": base["mse"] - m["mse"], "disagreement_if_float": m["disagreement"]})  # fmt: skip
    ranking.sort(key=lambda r: -r["gain"])
    log(f"sensitivity: {len(ranking)} quantised nodes ranked; {base['disagreement']:.2f}% top-1 "
        f"disagreement with all quantised (budget {opts.budget}%)")  # fmt: skip
    current, excluded, state = qmodel, list(exclude), base
    for r in ranking:
        if state["disagreement"] <= opts.budget:
            break
        excluded.append(r["node"])
        current = placement.ort_quantize(model, opts, excluded, ranges)
        state = _agreement(ref, runs.logits(current, prep, cset.tensors))
        r["excluded"] = True
        log(f"  excluded {r['node']} ({r['module']}): disagreement now {state['disagreement']:.2f}%")
    if state["disagreement"] > opts.budget:
        log(f"sensitivity: budget {opts.budget}% not met even with every ranked node in float")
    return current, excluded, ranking
