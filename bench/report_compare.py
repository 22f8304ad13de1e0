#!/usr/bin/env python3
"""Turns bench/results/compare.jsonl (written by bench/compare.sh) into the table and the
chart of docs/performance.md: one row per model, planrt beside PyTorch eager, and an SVG of
the two latencies per model. Standard library only.

  python3 bench/report_compare.py [--results bench/results/compare.jsonl]
                                  [--table docs/performance_table.md] [--svg docs/performance.svg]
                                  [--doc docs/performance.md]
  python3 bench/report_compare.py --sweep [--commit SHA[,SHA...]] [--results ...] [--table ...] [--svg ...] [--doc ...]
      issue 18's sweep (compare.sh --sweep): per S and dtype of the 12-block model, eager,
      torch.compile, torch.compile reduce-overhead and planrt's three ways, the ratios the
      targets name and the floor; defaults docs/performance_sweep.md, docs/performance_sweep.svg,
      spliced between the sweep:begin and sweep:end markers of docs/performance.md. With
      several commits, each point is its latest line among theirs (the file's order), and
      the table's footer names every commit it holds.
  With --table FILE only that file is written (and --svg / --doc where named): a table of an
  older commit leaves the tracked chart and docs/performance.md as they are.
"""
import argparse
import json

MIB = 1024.0 * 1024.0


# The template bench/compare.sh builds: d_model 512, 8 heads, FFN 2048, f32 or bf16.
D_MODEL, FFN = 512, 2048
BYTES_PER_VALUE = {"f32": 4, "bf16": 2}


def load(path, commits=None):
    """The compare rows (of the commits in `commits` if given; of each model and dtype the
    latest line wins) and the latest floors line of each device."""
    rows, floors = {}, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("bench") == "compare" and (commits is None or r["commit"] in commits):
                rows[(r["model"], r.get("dtype", "f32"))] = r
            elif r.get("bench") == "floors":
                floors[r.get("device")] = r
    return sorted(rows.values(), key=lambda r: (r.get("dtype", "f32") != "f32", r["seq"], r["layers"],
                                                r["partition"])), floors


def floors_of(rows, floors):
    """The floors measured on the rows' device (the first row's), or None."""
    return floors.get(rows[0].get("device")) if rows else None


def floor_ms(r, floors_by_device):
    """Host-to-host floor: FLOPs over the matrix rate or compulsory bytes (weights once,
    input and output) over the copy bandwidth, whichever is larger, plus the two pageable
    copies (of the f32 input and output: bf16 models convert on the host, both sides), from
    the ceilings measured on the row's device; None without them."""
    dtype = r.get("dtype", "f32")
    floors = floors_by_device.get(r.get("device"))
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
    floors = floors_of(rows, floors)
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


SWEEP_SEQS = (1, 16, 128, 512, 2048)


def sweep_points(rows):
    """{(dtype, seq): {partition: row}} of the 12-block sweep rows."""
    points = {}
    for r in rows:
        if r["layers"] != 12 or r["seq"] not in SWEEP_SEQS:
            continue
        points.setdefault((r.get("dtype", "f32"), r["seq"]), {})[r["partition"]] = r
    return dict(sorted(points.items(), key=lambda i: (i[0][0] != "f32", i[0][1])))


def sweep_ratios(parts):
    """(best planrt / compile reduce-overhead, planrt without graphs / compile default,
    best planrt ms, the peers' ms) of one point; a ratio is None when a side is missing."""
    cuda, engine = parts.get("cuda", {}), parts.get("engine-per-block", {})
    eager_ways = [r["planrt_median_ms"] for r in (cuda, engine) if r]
    best = min(eager_ways + ([cuda["planrt_graphs_median_ms"]] if "planrt_graphs_median_ms" in cuda else []),
               default=None)
    any_row = cuda or engine
    ro = any_row.get("torch_compile_ro_host_to_host_median_ms")
    comp = any_row.get("torch_compile_host_to_host_median_ms")
    return (best / ro if best and ro else None,
            min(eager_ways) / comp if eager_ways and comp else None, best, comp, ro)


def eager_peer(row, field):
    """PyTorch eager's figure: the nn.TransformerEncoder module's where the row has it (rows
    from compare.sh after 3836ac4), else the op-by-op executor's."""
    return row.get(f"torch_module_{field}", row.get(f"torch_{field}"))


def sweep_table(points, floors):
    fmt = lambda v: f"{v:.3f}" if v is not None else "-"
    mib = lambda v: f"{v / MIB:.0f}" if v is not None else "-"
    out = ["| S, dtype | eager | torch.compile | compile, reduce-overhead | planrt cuda | planrt cuda + graphs | "
           "planrt engine-per-block | best planrt / reduce-overhead (target <= 0.9) | planrt without graphs / "
           "compile (target <= 1) | device memory above weights, MiB: planrt (cuda / graphs / engine) vs "
           "eager / compile / reduce-overhead | floor ms, best planrt at x floor | rel. error |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (dtype, seq), parts in points.items():
        cuda, engine = parts.get("cuda", {}), parts.get("engine-per-block", {})
        any_row = cuda or engine
        ro_ratio, comp_ratio, best, comp, ro = sweep_ratios(parts)
        floor = floor_ms(any_row, floors)
        errors = ", ".join(f"{r['rel_error']:.1e}" for r in (cuda, engine) if r)
        out.append(
            f"| {seq} {dtype} | {fmt(eager_peer(any_row, 'host_to_host_median_ms'))} | {fmt(comp)} | {fmt(ro)} | "
            f"{fmt(cuda.get('planrt_median_ms'))} | {fmt(cuda.get('planrt_graphs_median_ms'))} | "
            f"{fmt(engine.get('planrt_median_ms'))} | {fmt(ro_ratio) if ro_ratio else '-'} | "
            f"{fmt(comp_ratio) if comp_ratio else '-'} | "
            f"{mib(cuda.get('planrt_device_used_above_weights_bytes'))} / "
            f"{mib(cuda.get('planrt_graphs_device_used_above_weights_bytes'))} / "
            f"{mib(engine.get('planrt_device_used_above_weights_bytes'))} vs "
            f"{mib(eager_peer(any_row, 'device_used_above_weights_bytes'))} / "
            f"{mib(any_row.get('torch_compile_device_used_above_weights_bytes'))} / "
            f"{mib(any_row.get('torch_compile_ro_device_used_above_weights_bytes'))} | "
            + (f"{floor:.3f}, {best / floor:.1f}x" if floor and best else "-") + f" | {errors} |")
    rows = [r for parts in points.values() for r in parts.values()]
    out.append("")
    commits = sorted({r["commit"] for r in rows})
    if len(commits) > 1:  # say which points each commit measured
        out.append("Points by commit: " + "; ".join(
            f"{c}: " + ", ".join(f"{seq} {dtype}" for (dtype, seq), parts in points.items()
                                 if any(r["commit"] == c for r in parts.values()))
            for c in commits) + ".")
        out.append("")
    out.append(f"Commit(s) {', '.join(commits)}; device "
               f"{', '.join(sorted({str(r.get('device')) for r in rows}))}; torch "
               f"{', '.join(sorted({str(r.get('torch')) for r in rows}))}; host-to-host medians of "
               f"{rows[0]['iterations'] if rows else 0} runs; every column of a row from one process "
               "per side in one compare.sh run; the PyTorch columns are "
               + ("nn.TransformerEncoder with the same weights."
                  if all("torch_module_host_to_host_median_ms" in r for r in rows)
                  else "the op-by-op executor of the same graph (bench/torch_reference.py)."))
    return "\n".join(out) + "\n"


def sweep_svg(points):
    """planrt/peer ratio over S: best planrt / reduce-overhead and planrt without graphs /
    compile default, per dtype; the 0.9 and 1.0 targets drawn."""
    left, top, width, height, ymax = 60, 40, 420, 220, 3.0
    x_of = lambda i: left + width * i / (len(SWEEP_SEQS) - 1)
    y_of = lambda v: top + height * (1 - min(v, ymax) / ymax)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 200}" height="{top + height + 50}" '
             'font-family="sans-serif" font-size="11">',
             '<text x="10" y="18" font-size="13">planrt / torch.compile over S, 12 blocks (below the line: ahead)</text>']
    for target in (0.9, 1.0):
        parts.append(f'<line x1="{left}" x2="{left + width}" y1="{y_of(target):.1f}" y2="{y_of(target):.1f}" '
                     f'stroke="#999" stroke-dasharray="4,3"/><text x="{left - 30}" y="{y_of(target) + 4:.1f}">{target}</text>')
    for i, seq in enumerate(SWEEP_SEQS):
        parts.append(f'<text x="{x_of(i) - 10:.1f}" y="{top + height + 16}">S={seq}</text>')
    series = [("f32", 0, "#4c72b0", "f32 best / reduce-overhead"), ("f32", 1, "#8fb0de", "f32 no graphs / compile"),
              ("bf16", 0, "#dd8452", "bf16 best / reduce-overhead"), ("bf16", 1, "#f0b98f", "bf16 no graphs / compile")]
    for k, (dtype, which, color, label) in enumerate(series):
        pts = []
        for i, seq in enumerate(SWEEP_SEQS):
            if (dtype, seq) in points:
                v = sweep_ratios(points[(dtype, seq)])[which]
                if v:
                    pts.append((x_of(i), y_of(v), v))
        if not pts:
            continue
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts) + '"/>')
        for x, y, v in pts:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
        parts.append(f'<rect x="{left + width + 20}" y="{top + 16 * k}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{left + width + 34}" y="{top + 16 * k + 9}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def splice(path, text, marker="table"):
    """Puts `text` between the `marker` markers of the document at `path`, if it has them."""
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        return
    begin, end = doc.find(f"<!-- {marker}:begin"), doc.find(f"<!-- {marker}:end -->")
    if begin < 0 or end < begin:
        return
    begin = doc.index("\n", begin) + 1
    with open(path, "w") as f:
        f.write(doc[:begin] + text + doc[end:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--results", default="bench/results/compare.jsonl")
    p.add_argument("--table")
    p.add_argument("--svg")
    p.add_argument("--doc",
                   help="also written between its markers (table:begin/end, or sweep:begin/end with "
                        "--sweep); default docs/performance.md unless --table is given")
    p.add_argument("--sweep", action="store_true", help="issue 18's sweep table and chart")
    p.add_argument("--commit", help="--sweep: only the rows of this commit (or of these, comma-separated)")
    a = p.parse_args()
    rows, floors = load(a.results, set(a.commit.split(",")) if a.sweep and a.commit else None)
    if a.sweep:
        points = sweep_points(rows)
        if not points:
            raise SystemExit(f"no 12-block sweep rows in {a.results}")
        text, chart, marker = sweep_table(points, floors), sweep_svg(points), "sweep"
        table_path, svg_path, what = "docs/performance_sweep.md", "docs/performance_sweep.svg", "sweep points"
        count = len(points)
    else:
        text, chart, marker = table(rows, floors), svg(rows), "table"
        table_path, svg_path, what = "docs/performance_table.md", "docs/performance.svg", "models"
        count = len(rows)
    # A table asked for by name (an older commit's, for reading) leaves the doc and the
    # tracked chart alone: they are written only by default or when named.
    doc = a.doc or (None if a.table else "docs/performance.md")
    svg_out = a.svg or (None if a.table else svg_path)
    a.table = a.table or table_path
    with open(a.table, "w") as f:
        f.write(text)
    if svg_out:
        with open(svg_out, "w") as f:
            f.write(chart)
    if doc:
        splice(doc, text, marker)
    print(f"{count} {what} -> " + ", ".join(x for x in (a.table, svg_out, doc) if x))

if __name__ == "__main__":
    main()
