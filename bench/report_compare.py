#!/usr/bin/env python3
"""Turns bench/results/compare.jsonl (written by bench/compare.sh) into the table and the
chart of docs/performance.md: one row per model, planrt beside PyTorch eager, and an SVG of
the two latencies per model. Standard library only.

  python3 bench/report_compare.py [--results bench/results/compare.jsonl]
                                  [--table docs/performance_table.md] [--svg docs/performance.svg]
"""
import argparse
import json

MIB = 1024.0 * 1024.0


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("bench") == "compare":
                rows[r["model"]] = r  # the latest line of each model wins
    return sorted(rows.values(), key=lambda r: (r["seq"], r["layers"], r["partition"]))


def table(rows):
    out = ["| model | partition | rel. error | PyTorch host-to-host ms (median / p90) | planrt host-to-host ms (median / p90) | "
           "planrt/PyTorch | PyTorch forward ms (CUDA events) | device used above weights: PyTorch / planrt | PyTorch allocator peak above weights |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        th = r.get("torch_host_to_host_median_ms")
        out.append(
            f"| {r['layers']} blocks, S={r['seq']} | {r['partition']} | {r['rel_error']:.1e} | "
            + (f"{th:.3f} / {r['torch_host_to_host_p90_ms']:.3f} | " if th else "- | ")
            + f"{r['planrt_median_ms']:.3f} / {r['planrt_p90_ms']:.3f} | "
            + (f"{r['planrt_median_ms'] / th:.2f} | " if th else "- | ")
            + f"{r['torch_median_ms']:.3f} | "
            + (f"{r['torch_device_used_above_weights_bytes'] / MIB:.1f} / " if 'torch_device_used_above_weights_bytes' in r else "- / ")
            + f"{r['planrt_device_used_above_weights_bytes'] / MIB:.1f} MiB | "
            + f"{r['torch_max_allocated_above_weights_bytes'] / MIB:.1f} MiB |")
    commits = sorted({r["commit"] for r in rows})
    devices = sorted({str(r.get("device")) for r in rows})
    out.append("")
    out.append(f"Commit(s) {', '.join(commits)}; device {', '.join(devices)}; "
               f"{rows[0]['iterations'] if rows else 0} timed runs per side after warm-up.")
    return "\n".join(out) + "\n"


def svg(rows):
    bar_h, gap, left, width = 12, 10, 230, 420
    top = 40
    vmax = max([max(r.get("torch_host_to_host_median_ms", r["torch_median_ms"]), r["planrt_median_ms"])
                for r in rows] + [1e-9])
    height = top + len(rows) * (2 * bar_h + gap) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             '<text x="10" y="18" font-size="13">Median latency host to host, planrt vs PyTorch eager (ms)</text>',
             f'<rect x="{left}" y="24" width="10" height="10" fill="#4c72b0"/>'
             f'<text x="{left + 14}" y="33">PyTorch</text>',
             f'<rect x="{left + 80}" y="24" width="10" height="10" fill="#dd8452"/>'
             f'<text x="{left + 94}" y="33">planrt</text>']
    y = top
    for r in rows:
        label = f"{r['layers']} blocks S={r['seq']} {r['partition']}"
        parts.append(f'<text x="10" y="{y + bar_h + 4}">{label}</text>')
        torch_ms = r.get("torch_host_to_host_median_ms", r["torch_median_ms"])
        for value, color in ((torch_ms, "#4c72b0"), (r["planrt_median_ms"], "#dd8452")):
            w = width * value / vmax
            parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 2}">{value:.2f}</text>')
            y += bar_h
        y += gap
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", default="bench/results/compare.jsonl")
    p.add_argument("--table", default="docs/performance_table.md")
    p.add_argument("--svg", default="docs/performance.svg")
    a = p.parse_args()
    rows = load(a.results)
    with open(a.table, "w") as f:
        f.write(table(rows))
    with open(a.svg, "w") as f:
        f.write(svg(rows))
    print(f"{len(rows)} models -> {a.table}, {a.svg}")


if __name__ == "__main__":
    main()
