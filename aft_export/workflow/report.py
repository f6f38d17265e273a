"""The pipeline's report for people: its summary rows, ``report.md`` (its charts: :mod:`.plots`) and the
deploy table's text, which ``bench`` prints with a reference too. The library computes; this only renders (it
imports no stage). Each command's own text is its result's (``lines()``)."""

from __future__ import annotations

from pathlib import Path

from aft_export.artifacts.onnxio import compute_nodes


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _versus(drop) -> str:
    """A top-1 drop as the change it is: the artifact's top-1 minus the checkpoint's, and which way."""
    if drop is None:
        return "-"
    change = 0.0 - drop  # not -0.0
    return f"{change:+.2f}" + (" (better)" if change > 0 else " (worse)" if change < 0 else "")


def _compute_cell(compute: dict | None) -> str:
    """int8/fp16/fp32 compute nodes (an engine: layers), or - where nothing was counted."""
    if not compute:
        return "-"
    return "/".join(str(compute.get(k, 0)) for k in ("int8", "fp16", "fp32")) + "".join(
        f" +{v} {k}" for k, v in compute.items() if k not in ("int8", "fp16", "fp32"))  # fmt: skip


def summary_table(summary: list[dict], batches) -> list[str]:
    head = ("| artifact | backend | prec | compute int8/fp16/fp32 | MB | top-1 | top-1 vs torch | agree | max abs | "
            "cos min | parity | TRT rules | " + " | ".join(f"p50 ms b{b}" for b in batches) + " | "
            + " | ".join(f"img/s b{b}" for b in batches) + " |")  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in summary:
        lines.append(
            f"| {r['artifact']} | {r['backend']} | {r['precision']} | {_compute_cell(r.get('compute'))} | "
            f"{r['mb']:.2f} | {_fmt(r['top1'], '.2f')} | "
            f"{_versus(r['top1_drop'])} | {_fmt(r['agreement'], '.2f')} | {_fmt(r['max_abs'], '.2e')} | "
            f"{_fmt(r['cosine_min'], '.6f')} | {r['parity']} | {r.get('trt_check', '-')} | "
            + " | ".join(_fmt(r["latency_ms"].get(b), ".3f") for b in batches) + " | "
            + " | ".join(_fmt(r["images_per_s"].get(b), ".0f") for b in batches) + " |")  # fmt: skip
    return lines


def network_table(engines: dict) -> list[str]:
    """The engines' parsed networks: compute layers per precision, and all layers."""
    if not engines:
        return []
    lines = ["## TensorRT networks", "",
             "Compute layers of each engine's parsed network by the precision they compute in (constants, "
             "shuffles, casts and Q/DQ not counted; int8: matrix products and convolutions whose inputs are "
             "int8 dequantised, seen through shuffles and casts).", "",
             "| engine | library | precision | int8 | fp16 | fp32 | all layers |", "|---|---|---|---|---|---|---|"]
    for name, e in engines.items():
        c = (e.get("network") or {}).get("compute") or {}
        lines.append(f"| {name} | {e.get('library', '-')} {e.get('library_version', '')} | {e.get('precision', '-')} | "
                     + " | ".join(str(c.get(k, 0)) for k in ("int8", "fp16", "fp32"))
                     + f" | {(e.get('network') or {}).get('num_layers', '-')} |")  # fmt: skip
    return lines + [""]


def trt_verdict(report: dict | None) -> str:
    """One cell: the TensorRT versions whose offline rules the artifact is checked against, or
    those whose rules refuse it."""
    if report is None:
        return "-"
    refused = [v for v, st in report["status"].items() if st == "refuses"]
    if refused:
        return "REFUSED " + ",".join(refused)
    first = report["checked"][0] if report["checked"] else "?"
    return f"pass {first}+" + (" (warnings)" if report["verdict"]["status"] != "ok" else "")


def summary_rows(ckpt: Path, artifacts: list[Path], results: dict) -> list[dict]:
    """The pipeline's summary: one row per model file (the checkpoint first), from the
    run's results (its manifest's ``results``)."""
    by_eval = {Path(r["artifact"]).name: r for r in results["eval"]}
    by_parity = {Path(r["artifact"]).name: r for r in results["parity"]["artifacts"]}
    bench_rows = results["bench"]["rows"]
    files = results.get("files", {})  # what each file is for, and its compute per precision
    rows = []
    torch_top1 = by_eval[ckpt.name]["top1"]
    for path in [ckpt] + list(artifacts):
        name = path.name
        ev = by_eval[name]
        made = files.get(name, {"for": "PyTorch", "compute": {}} if path == ckpt else {})
        purpose = {"for": made.get("for", "-"), "compute": made.get("compute") or {}}
        if ev.get("status") == "skipped":  # built, not run: no metric is made up for it
            m = results.get("engines", {}).get(name, {})
            rows.append({"artifact": name, "backend": m.get("library", "tensorrt"), "precision": m.get("precision", "?"),
                         **purpose,
                         "mb": round(path.stat().st_size / 1e6, 2), "top1": None, "top5": None, "top1_drop": None,
                         "agreement": None, "max_abs": None, "cosine_min": None,
                         "parity": "skipped, no GPU" if "no GPU" in ev["reason"] else "skipped", "trt_check": "-",
                         "latency_ms": {}, "images_per_s": {}})  # fmt: skip
            continue
        lat = {r["batch"]: r for r in bench_rows if Path(r["artifact"]).name == name}
        par = by_parity.get(name)
        real = par["inputs"]["real"] if par and par.get("inputs") else {}
        rows.append({
            "artifact": name, "backend": ev["backend"], "precision": ev["precision"], **purpose,
            "mb": round(path.stat().st_size / 1e6, 2), "top1": ev["top1"], "top5": ev["top5"],
            "top1_drop": round(torch_top1 - ev["top1"], 2), "agreement": ev["agreement"],
            "max_abs": real.get("max_abs"), "cosine_min": real.get("cosine_min"),
            "parity": "reference" if par is None else par["status"],
            "trt_check": trt_verdict(results.get("trt_check", {}).get(name)),
            "latency_ms": {b: round(r["p50_ms"], 3) for b, r in lat.items()},
            "images_per_s": {b: round(r["images_per_s"], 1) for b, r in lat.items()},
        })  # fmt: skip
    return rows


PIPELINE_RESULT = {"ok": "PASS", "unverified": "PASS, NOT ALL VERIFIED", "failed": "FAIL"}
COLUMNS_SAY = ("compute: the file's compute nodes by the precision they compute in, counted from its graph (an "
               "engine: its parsed network's layers); top-1 vs torch: the artifact's top-1 minus the PyTorch "
               "checkpoint's (positive: better); agree: its top-1 agreement with the checkpoint's predictions; TRT "
               "rules: the offline rules of the TensorRT versions the file is made for (no TensorRT ran)")  # fmt: skip


def purpose_table(summary: list[dict]) -> list[str]:
    """What each file is for (the runtimes) and what its compute runs in."""
    return ["| file | for | compute nodes (engines: layers) |", "|---|---|---|",
            *[f"| {r['artifact']} | {r['for']} | {compute_nodes(r['compute']) if r['compute'] else '-'} |"
              for r in summary]]  # fmt: skip


def format_pipeline_result(result, batches) -> list[str]:
    """What ``aft-export pipeline`` prints at the end: the summary, what each file is for, what was
    not verified, the verdict."""
    return ["", *summary_table(result.summary, batches), COLUMNS_SAY + ".",
            *[f"for: {r['artifact']}: {r['for']}" for r in result.summary],
            *(["", "What to deploy where (every file on every runtime here):", *deploy_lines(result.deploy, markdown=False)]
              if result.deploy else []),
            *[f"not verified: {name}: {why}" for name, why in result.unverified.items()],
            "", f"{PIPELINE_RESULT[result.verdict.status]}: run directory {result.run_dir} (report.md, manifest.json, "
            f"plots/)"]  # fmt: skip


def report_markdown(ckpt, meta, opts, steps, summary, verdict, final, calib, not_run=None, unverified=None,
                    engines=None, deploy=None) -> str:  # fmt: skip
    """RUN/report.md: the verdict (:class:`aft_export.errors.Verdict`), the summary table, what to deploy
    where (``deploy``: :meth:`aft_export.verify.deploy.DeployTable.to_dict`), what each file is for, the engines'
    networks, every step, the plots."""
    result = {"ok": "PASS", "unverified": "PASS, with artifacts not verified here", "failed": "FAIL"}[verdict.status]
    others = {n: why for n, why in (unverified or {}).items() if n not in (not_run or {})}
    lines = [
        f"# aft-export pipeline: {meta.model_name}", "",
        f"Checkpoint `{ckpt}` (sha256 `{meta.sha256[:16]}...`), data `{opts.data}`, calibration "
        f"`{Path(calib).name}`. Result: **{result}**.", "",
        *([f"Built, not run ({len(not_run)}): " + ", ".join(f"`{n}`" for n in not_run) + ". "
           + next(iter(not_run.values())).split(": ", 1)[-1], ""] if not_run else []),
        *([f"Not verified: `{n}`: {why}." for n, why in others.items()] + [""] if others else []),
        "Top-1 and agreement (with the PyTorch checkpoint's predictions) on the evaluation set; max abs and "
        "cosine from the parity check on real images; latency p50 and throughput on this machine. "
        + COLUMNS_SAY[0].upper() + COLUMNS_SAY[1:] + ".", "",
        *summary_table(summary, opts.bench_batch_sizes), "",
        *(["## What to deploy where", "",
           "Every file on every runtime here: parity against the checkpoint, top-1, latency at batch 1 and "
           f"images/s at batch {deploy['batch']}, timed in interleaved rounds.", "",
           *deploy_lines(deploy), "", "![latency per file and runtime](plots/deploy_latency.svg)", "",
           "![images/s per file and runtime](plots/deploy_throughput.svg)", ""] if deploy else []),
        "## What each file is for", "",
        "The runtimes each file is made for, from its export target and what its compute runs in (compute nodes "
        "counted from the graph: int8 where fed by an int8 DequantizeLinear or a QOperator op, else the type they "
        "compute in; data movement, casts and Q/DQ not counted).", "",
        *purpose_table(summary), "",
        *network_table(engines or {}),
        "## Steps", "",
        *[f"- **{s.name}**: {s.status} ({s.seconds:.1f}s){': ' + s.detail if s.detail else ''}" for s in steps],
        "", "## Plots", "",
        "![accuracy](plots/accuracy.svg)", "", "![errors](plots/errors.svg)", "",
        *[f"![latency batch {b}](plots/latency_b{b}.svg)" for b in opts.bench_batch_sizes], "",
        "Everything above is in `manifest.json` with the tool versions, options and input hashes.", "",
    ]  # fmt: skip
    return "\n".join(lines)


# ---------------------------------------------------------------- what to deploy where

def _fastest_says(table: dict) -> dict[str, str]:
    return {"latency": f"fastest at batch {table.get('latency_batch', 1)}", "throughput": "most images/s"}


def _threads(table: dict) -> str:
    """The threads the rows that ran used: one number where they agree, else each runtime's."""
    ran = {(r["runtime"], r.get("threads")) for r in table["rows"] if r["status"] == "ok" and r.get("threads")}
    counts = {t for _, t in ran}
    if len(counts) == 1:
        return f"every runner at {counts.pop()} threads"
    return "threads per runner: " + (", ".join(f"{rt} {t}" for rt, t in sorted(ran)) or str(
        table["machine"].get("threads")))
def _load(values) -> str:
    return "?" if not values else " ".join(f"{v:.2f}" for v in values)


def deploy_lines(table: dict, markdown: bool = True) -> list[str]:
    """The deploy table (:class:`aft_export.verify.deploy.DeployTable` as a dict): one row per artifact and
    runtime, the fastest rows marked, what is not available here, the machine and the advice."""
    b, says = table["batch"], _fastest_says(table)
    head = ["file", "runtime", "device", "precision", "for", "MB", "parity", "top-1",
            f"p50 ms b{table.get('latency_batch', 1)}", f"img/s b{b}", "fastest"]  # fmt: skip
    rows = []
    for r in table["rows"]:
        state = r["parity"] or "-"
        if r["parity"] == "fail" and r["reason"]:
            state = f"fail: {r['reason'][:70]}"
        if r["status"] != "ok":
            state = f"{r['status']}: {r['reason'].split(';')[0][:70]}"
        rows.append([r["artifact"], r["runtime"], r["device"], r["precision"] or "-", r.get("purpose") or "-",
                     f"{r['bytes'] / 1e6:.2f}", state, _fmt(r["top1"], ".2f"), _fmt(r["p50_ms"], ".3f"),
                     _fmt(r["images_per_s"], ".0f"), " + ".join(says[f] for f in r["fastest"]) or ""])  # fmt: skip
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    else:  # for a terminal: without the long "for" column (said per file elsewhere)
        keep = [i for i, h in enumerate(head) if h != "for"]
        head, rows = [head[i] for i in keep], [[row[i] for i in keep] for row in rows]
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("")
    lines += [f"Note: {note}." for note in table.get("notes", [])]
    for device, best in table["recommended"].items():
        said = []
        for by in ("latency", "throughput"):
            pick = best.get(by)
            if pick:
                row = next(r for r in table["rows"] if (r["artifact"], r["runtime"]) == (pick["artifact"], pick["runtime"]))
                figure = f"{row['p50_ms']:.3f} ms" if by == "latency" else f"{row['images_per_s']:.0f} images/s"
                said.append(f"{says[by]}: {pick['artifact']} on {pick['runtime']} ({figure})")
        mine = [r for r in table["rows"] if r["device"] == device]
        idle = not said and mine and all(r["status"] == "skipped" for r in mine)
        lines.append(f"Deploy on the {device.upper()}: " + ("; ".join(said) if said else
                     f"nothing ran here ({mine[0]['reason']})" if idle else "no row ran and passed parity here")
                     + ".")  # fmt: skip
    missing = {}
    for runtime, why in table["runtimes"].items():
        if why != "ok":
            missing.setdefault(why, []).append(runtime)
    for why, names in missing.items():
        lines.append(f"Not run: {', '.join(names)}: {why}.")
    m = table["machine"]
    lines.append(f"Machine: {m.get('cpu')}, {m.get('described')}, {m.get('cores')} cores; {_threads(table)}; "
                 f"load average {_load(m.get('load_average'))} at the start of the timing, "
                 f"{_load(m.get('load_average_after'))} at its end.")  # fmt: skip
    lines.append(f"Parity against {table['reference']} within each precision's limits; top-1 on "
                 f"{next((r['images'] for r in table['rows'] if r['images']), 0)} images of {table['data']}; the "
                 f"fastest rows are marked among those that ran and passed (within {100 * table.get('tie', 0):.0f}% of the "
                 f"fastest, the file made for that device wins).")  # fmt: skip
    lines.append(table["advice"][0].upper() + table["advice"][1:] + ".")
    return lines
