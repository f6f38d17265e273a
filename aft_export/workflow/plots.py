"""The pipeline report's charts, as SVG text: bars and log histograms, of the summary rows, the
logit errors parity measured and the deploy table. Renders only (it imports no stage)."""

from __future__ import annotations

import html

import numpy as np

WIDTH, ROW, LEFT, RIGHT = 640, 26, 190, 90
COLOURS = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb"]


def _svg(height: int, body: list[str], title: str) -> str:
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>',
        *body, "</svg>", ""])  # fmt: skip


def bars(title: str, labels: list[str], values: list[float], unit: str = "", fmt: str = "{:.2f}") -> str:
    """Horizontal bars, one per label, scaled to the largest value."""
    top = max([v for v in values if np.isfinite(v)] + [1e-30])
    body = []
    for i, (label, value) in enumerate(zip(labels, values)):
        y = 30 + i * ROW
        w = 0 if not np.isfinite(value) else (WIDTH - LEFT - RIGHT) * value / top
        body.append(f'<text x="{LEFT - 6}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>')
        body.append(f'<rect x="{LEFT}" y="{y + 3}" width="{w:.1f}" height="{ROW - 8}" '
                    f'fill="{COLOURS[i % len(COLOURS)]}"/>')  # fmt: skip
        body.append(f'<text x="{LEFT + w + 4:.1f}" y="{y + 15}">{fmt.format(value)}{html.escape(unit)}</text>')
    return _svg(40 + len(labels) * ROW, body, title)


def log_histograms(title: str, series: dict[str, np.ndarray], bins: int = 24) -> str:
    """Histograms of positive values (absolute errors) on a shared log10 axis, one row each."""
    finite = [np.asarray(v, np.float64) for v in series.values()]
    pos = np.concatenate([v[(v > 0) & np.isfinite(v)] for v in finite] + [np.array([1e-12, 1.0])])
    lo, hi = np.floor(np.log10(pos.min())), np.ceil(np.log10(pos.max()))
    edges = np.linspace(lo, hi, bins + 1)
    plot_w, row_h = WIDTH - LEFT - 20, 60
    body = []
    for i, (label, values) in enumerate(series.items()):
        v = np.asarray(values, np.float64)
        v = v[(v > 0) & np.isfinite(v)]
        counts, _ = np.histogram(np.log10(v), edges) if len(v) else (np.zeros(bins), None)
        y0 = 30 + i * (row_h + 10)
        body.append(f'<text x="{LEFT - 6}" y="{y0 + row_h / 2 + 4}" text-anchor="end">{html.escape(label)}</text>')
        peak = max(counts.max(), 1)
        for j, c in enumerate(counts):
            h = row_h * c / peak
            body.append(f'<rect x="{LEFT + j * plot_w / bins:.1f}" y="{y0 + row_h - h:.1f}" '
                        f'width="{plot_w / bins - 1:.1f}" height="{h:.1f}" fill="{COLOURS[i % len(COLOURS)]}"/>')  # fmt: skip
    y_axis = 30 + len(series) * (row_h + 10)
    for k in range(int(lo), int(hi) + 1):
        x = LEFT + (k - lo) / (hi - lo) * plot_w
        body.append(f'<text x="{x:.1f}" y="{y_axis + 12}" text-anchor="middle">1e{k}</text>')
    body.append(f'<text x="{LEFT + plot_w / 2}" y="{y_axis + 28}" text-anchor="middle">'
                f'|logit difference| vs PyTorch fp32 (log scale)</text>')  # fmt: skip
    return _svg(y_axis + 40, body, title)


def pipeline_plots(summary: list[dict], differences: dict, data: str, batches) -> dict[str, str]:
    """The report's plots, file name -> SVG text: top-1, latency per batch size, and the
    logit errors parity measured."""
    labels = [f"{r['artifact']} ({r['precision']})" for r in summary]
    plots = {"accuracy.svg": bars(f"Top-1 on {data}", labels,
                                  [float("nan") if r["top1"] is None else r["top1"] for r in summary], "%")}
    for b in batches:
        latency = [r["latency_ms"].get(b, float("nan")) for r in summary]
        plots[f"latency_b{b}.svg"] = bars(f"Latency p50, batch {b}", labels, latency, " ms", "{:.3f}")
    plots["errors.svg"] = log_histograms("Logit error vs PyTorch fp32", differences)
    return plots


def deploy_plots(table: dict) -> dict[str, str]:
    """Two bar charts of the deploy table's rows that ran: p50 at batch 1, and images/s at the large batch."""
    ran = [r for r in table["rows"] if r["status"] == "ok" and r["p50_ms"] is not None]
    labels = [f"{r['artifact']} / {r['runtime']}" for r in ran]
    return {
        "deploy_latency.svg": bars("Latency p50 at batch 1, per file and runtime", labels,
                                   [r["p50_ms"] for r in ran], " ms", "{:.3f}"),
        "deploy_throughput.svg": bars(f"Images/s at batch {table['batch']}, per file and runtime", labels,
                                      [float("nan") if r["images_per_s"] is None else r["images_per_s"] for r in ran],
                                      "", "{:.0f}"),
    }  # fmt: skip
