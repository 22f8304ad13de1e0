#!/usr/bin/env python3
"""Turns bench/results/compare.jsonl (written by bench/compare.sh) into the table and the
chart of docs/performance.md: one row per model, planrt beside PyTorch eager, and an SVG of
the two latencies per model. Standard library only.

  python3 bench/report_compare.py [--results bench/results/compare.jsonl]
                                  [--table docs/performance_table.md] [--svg docs/performance.svg]
                                  [--doc docs/performance.md]
"""
import argparse
import json

MIB = 1024.0 * 1024.0


# The template bench/compare.sh builds: d_model 512, 8 heads, FFN 2048, f32 or bf16.
D_MODEL, FFN = 512, 2048
BYTES_PER_VALUE = {"f32": 4, "bf16": 2}


def load(path):
    rows, floors = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("bench") == "compare":
                rows[(r["model"], r.get("dtype", "f32"))] = r  # the latest line of each wins
            elif r.get("bench") == "floors":
                floors = r
    return sorted(rows.values(), key=lambda r: (r.get("dtype", "f32") != "f32", r["seq"], r["layers"],
                                                r["partition"])), floors


def floor_ms(r, floors):
    """Host-to-host floor: FLOPs over the matrix rate or compulsory bytes (weights once,
    input and output) over the copy bandwidth, whichever is larger, plus the two pageable
    copies (of the f32 input and output: bf16 models convert on the host, both sides); None
    without measured ceilings."""
    dtype = r.get("dtype", "f32")
    rate = floors and floors.get(f"{dtype}_matrix_tflops")
    if floors is None or rate is None or str(r["seq"]) not in floors["pageable_copies"]:
        return None
    s, d, layers = r["seq"], D_MODEL, r["layers"]
    flops = layers * (8 * s * d * d + 4 * s * d * FFN + 4 * s * s * d)
    weight_values = layers * (4 * d * d + 2 * d * FFN + 4 * d + d + FFN + 4 * d)
    moved = BYTES_PER_VALUE[dtype] * (weight_values + 2 * s * d)
    forward = max(flops / (rate * 1e12),
                  moved / (floors["copy_bandwidth_gbps"] * 1e9)) * 1e3
    copies = floors["pageable_copies"][str(s)]
    return forward + copies["host_to_device_ms"] + copies["device_to_host_ms"]


def table(rows, floors):
    out = ["| model | partition | rel. error | PyTorch host-to-host ms (median / p90) | planrt host-to-host ms (median / p90) | "
           "planrt/PyTorch | planrt with CUDA graphs ms (median), /PyTorch | PyTorch forward ms (CUDA events) | device used above weights: PyTorch / planrt | PyTorch allocator peak above weights | "
           "floor ms: PyTorch / planrt at x floor |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        th = r.get("torch_host_to_host_median_ms")
        floor = floor_ms(r, floors)
        floor_cell = (f"{floor:.3f}: {th / floor:.1f}x / {r['planrt_median_ms'] / floor:.1f}x |"
                      if floor and th else "- |")
        out.append(
            f"| {r['layers']} blocks, S={r['seq']}, {r.get('dtype', 'f32')} | {r['partition']} | {r['rel_error']:.1e} | "
            + (f"{th:.3f} / {r['torch_host_to_host_p90_ms']:.3f} | " if th else "- | ")
            + f"{r['planrt_median_ms']:.3f} / {r['planrt_p90_ms']:.3f} | "
            + (f"{r['planrt_median_ms'] / th:.2f} | " if th else "- | ")
            + (f"{r['planrt_graphs_median_ms']:.3f}, {r['planrt_graphs_median_ms'] / th:.2f}"
               + ("" if r.get("planrt_graphs_output_identical", True) else " (output differs!)") + " | "
               if th and "planrt_graphs_median_ms" in r else "- | ")
            + f"{r['torch_median_ms']:.3f} | "
            + (f"{r['torch_device_used_above_weights_bytes'] / MIB:.1f} / " if 'torch_device_used_above_weights_bytes' in r else "- / ")
            + f"{r['planrt_device_used_above_weights_bytes'] / MIB:.1f} MiB | "
            + f"{r['torch_max_allocated_above_weights_bytes'] / MIB:.1f} MiB | "
            + floor_cell)
    bf16 = [r for r in rows if "planrt_rel_error_vs_torch_f32" in r]
    if bf16:
        out.append("")
        out.append("bf16 models, each side against PyTorch in f32 on the same bf16 weights and input "
                   "(the rounding error of each bf16 computation): "
                   + "; ".join(f"{r['layers']} blocks S={r['seq']} {r['partition']}: planrt "
                               f"{r['planrt_rel_error_vs_torch_f32']:.1e}, PyTorch "
                               f"{r['torch_rel_error_vs_torch_f32']:.1e}" for r in bf16) + ".")
    commits = sorted({r["commit"] for r in rows})
    devices = sorted({str(r.get("device")) for r in rows})
    out.append("")
    out.append(f"Commit(s) {', '.join(commits)}; device {', '.join(devices)}; "
               f"{rows[0]['iterations'] if rows else 0} timed runs per side after warm-up.")
    if floors:
        copies = ", ".join(f"S={s}: {c['host_to_device_ms']:.3f} + {c['device_to_host_ms']:.3f} ms"
                           for s, c in sorted(floors["pageable_copies"].items(), key=lambda i: int(i[0])))
        out.append("")
        bf16_rate = (f", bf16 matrix rate {floors['bf16_matrix_tflops']:.1f} TFLOP/s (8192^3)"
                     if "bf16_matrix_tflops" in floors else "")
        out.append(f"Floors from ceilings measured on {floors['device']} (bench/floors.py): f32 matrix "
                   f"rate {floors['f32_matrix_tflops']:.1f} TFLOP/s (SGEMM 8192^3, TF32 off){bf16_rate}, copy "
                   f"bandwidth {floors['copy_bandwidth_gbps']:.0f} GB/s, pageable input + output copies "
                   f"{copies}.")
    return "\n".join(out) + "\n"


def svg(rows):
    bar_h, gap, left, width = 12, 10, 230, 420
    top = 40
    vmax = max([max(r.get("torch_host_to_host_median_ms", r["torch_median_ms"]), r["planrt_median_ms"])
                for r in rows] + [1e-9])
    bars = lambda r: 3 if "planrt_graphs_median_ms" in r else 2
    height = top + sum(bars(r) * bar_h + gap for r in rows) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             '<text x="10" y="18" font-size="13">Median latency host to host, planrt vs PyTorch eager (ms)</text>',
             f'<rect x="{left}" y="24" width="10" height="10" fill="#4c72b0"/>'
             f'<text x="{left + 14}" y="33">PyTorch</text>',
             f'<rect x="{left + 80}" y="24" width="10" height="10" fill="#dd8452"/>'
             f'<text x="{left + 94}" y="33">planrt</text>'
             f'<rect x="{left + 150}" y="24" width="10" height="10" fill="#55a868"/>'
             f'<text x="{left + 164}" y="33">planrt, CUDA graphs (cuda segments)</text>']
    y = top
    for r in rows:
        label = f"{r['layers']} blocks S={r['seq']} {r['partition']} {r.get('dtype', 'f32')}"
        parts.append(f'<text x="10" y="{y + bar_h + 4}">{label}</text>')
        torch_ms = r.get("torch_host_to_host_median_ms", r["torch_median_ms"])
        values = [(torch_ms, "#4c72b0"), (r["planrt_median_ms"], "#dd8452")]
        if "planrt_graphs_median_ms" in r:
            values.append((r["planrt_graphs_median_ms"], "#55a868"))
        for value, color in values:
            w = width * value / vmax
            parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 2}">{value:.2f}</text>')
            y += bar_h
        y += gap
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def splice(path, text):
    """Puts `text` between the table markers of the document at `path`, if it has them."""
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        return
    begin, end = doc.find("<!-- table:begin"), doc.find("<!-- table:end -->")
    if begin < 0 or end < begin:
        return
    begin = doc.index("\n", begin) + 1
    with open(path, "w") as f:
        f.write(doc[:begin] + text + doc[end:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", default="bench/results/compare.jsonl")
    p.add_argument("--table", default="docs/performance_table.md")
    p.add_argument("--svg", default="docs/performance.svg")
    p.add_argument("--doc", default="docs/performance.md",
                   help="also written between its table:begin and table:end markers")
    a = p.parse_args()
    rows, floors = load(a.results)
    with open(a.table, "w") as f:
        f.write(table(rows, floors))
    with open(a.svg, "w") as f:
        f.write(svg(rows))
    splice(a.doc, table(rows, floors))
    print(f"{len(rows)} models -> {a.table}, {a.svg}")


if __name__ == "__main__":
    main()
