#!/usr/bin/env python3
"""Table and chart of bench/vision_models.py's lines (issue 16) for docs/performance.md.

  python3 bench/report_vision.py [--results bench/results/vision_models.jsonl]
      [--commit SHA] [--svg docs/vision.svg]

Takes the lines of one commit (default: the last line's), prints a Markdown table (latency
host to host, device memory above the weights, the engine's plan ratio) and writes an SVG
of planrt's best latency over PyTorch eager's and torch.compile's per row. A row whose planrt
runs failed shows "failed" (the line has no planrt figures).
"""
import argparse
import json

MIB = 2 ** 20
RUNS = ("cuda", "cuda_graphs", "engine")


def rows_of(path, commit):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    lines = [l for l in lines if not l.get("smoke")]
    commit = commit or lines[-1]["commit"]
    return commit, [l for l in lines if l["commit"] == commit]


def best_planrt(r):
    times = [(r[f"planrt_{k}_host_to_host_ms"], k) for k in RUNS if f"planrt_{k}_host_to_host_ms" in r]
    return min(times) if times else None


def fmt_ms(v):
    return "–" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def table(rows):
    out = ["| model, batch, dtype | eager | torch.compile | planrt cuda | cuda + graphs | engine | best / eager | "
           "best / compile | memory above weights: eager peak / planrt engine | engine plan ratio |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        eager, comp = r.get("torch_eager_host_to_host_ms"), r.get("torch_compile_host_to_host_ms")
        best = best_planrt(r)
        cells = [fmt_ms(r.get(f"planrt_{k}_host_to_host_ms")) for k in RUNS]
        if best is None:
            ratio_e = ratio_c = "failed"
            mem = f"{r['torch_eager_max_allocated_above_weights_bytes'] / MIB:.0f} / –"
        else:
            ratio_e = f"{best[0] / eager:.2f}"
            ratio_c = f"{best[0] / comp:.2f}" if comp else "–"
            engine_mem = r.get("planrt_engine_device_used_above_weights_bytes")
            mem = (f"{r['torch_eager_max_allocated_above_weights_bytes'] / MIB:.0f} / "
                   f"{engine_mem / MIB:.0f} MiB" if engine_mem is not None else "–")
        ratio = r.get("planrt_engine_plan_ratio")
        out.append(f"| {r['model']}, {r['batch']}, {r['dtype']} | {fmt_ms(eager)} | {fmt_ms(comp)} | "
                   + " | ".join(cells) + f" | {ratio_e} | {ratio_c} | {mem} | "
                   + ("–" if ratio is None else f"{ratio:.3f}") + " |")
    return "\n".join(out)


def svg(rows, commit):
    bar_h, gap, left, width = 10, 8, 220, 420
    scale = width / 3.0  # ratios 0..3
    items = [r for r in rows if best_planrt(r) is not None]
    height = 40 + len(items) * (2 * bar_h + gap) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" height="{height}" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="10" y="16" font-size="13">planrt (best of cuda, graphs, engine) / peer latency, '
             f'host to host, H200, {commit}</text>',
             f'<rect x="{left}" y="24" width="10" height="8" fill="#4a7fb5"/>'
             f'<text x="{left + 14}" y="32">/ PyTorch eager</text>',
             f'<rect x="{left + 130}" y="24" width="10" height="8" fill="#d08c2e"/>'
             f'<text x="{left + 144}" y="32">/ torch.compile</text>']
    y = 44
    for r in items:
        best = best_planrt(r)[0]
        parts.append(f'<text x="{left - 6}" y="{y + bar_h + 3}" text-anchor="end">'
                     f'{r["model"]} b{r["batch"]} {r["dtype"]}</text>')
        for i, (peer, colour) in enumerate((("torch_eager_host_to_host_ms", "#4a7fb5"),
                                            ("torch_compile_host_to_host_ms", "#d08c2e"))):
            if peer not in r:
                continue
            ratio = best / r[peer]
            w = min(ratio, 3.0) * scale
            parts.append(f'<rect x="{left}" y="{y + i * bar_h}" width="{w:.1f}" height="{bar_h - 1}" fill="{colour}"/>')
            parts.append(f'<text x="{left + w + 3:.1f}" y="{y + i * bar_h + bar_h - 2}">{ratio:.2f}</text>')
        y += 2 * bar_h + gap
    x1 = left + scale
    parts.append(f'<line x1="{x1}" y1="40" x2="{x1}" y2="{y}" stroke="#333" stroke-dasharray="3,3"/>')
    parts.append(f'<text x="{x1 - 4}" y="{y + 14}">1.0 (parity)</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="bench/results/vision_models.jsonl")
    ap.add_argument("--commit")
    ap.add_argument("--svg")
    args = ap.parse_args()
    commit, rows = rows_of(args.results, args.commit)
    print(f"commit {commit}, {len(rows)} rows\n")
    print(table(rows))
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(rows, commit))


if __name__ == "__main__":
    main()
