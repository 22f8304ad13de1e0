#!/usr/bin/env python3
"""Table and chart of bench/cuda/memory_ledger.py's lines (issue 19) for docs/performance.md.

  python3 bench/report_ledger.py [--results bench/results/memory_ledger.jsonl] [--commit SHA]
      [--svg docs/memory_ledger.svg]

Takes the lines of one commit (default: the last line's with a prediction), prints a Markdown
table (the measured delta split by ledger line, the remainder, the prediction and its error)
and writes an SVG: per model one bar of the measured delta stacked by line, and a mark at the
prediction `planrt inspect` gave before loading. Each row is scaled to the full width, so
small models stay readable beside large ones (compare rows by the MiB in their labels).
"""
import argparse
import json

MIB = 2 ** 20
LINES = ("weights", "arenas", "engine scratch", "scratch pool", "warm pool", "library handles", "CUDA graphs")
COLOURS = {"weights": "#4c72b0", "arenas": "#55a868", "engine scratch": "#c44e52", "scratch pool": "#8172b2",
           "warm pool": "#ccb974", "library handles": "#64b5cd", "CUDA graphs": "#8c8c8c", "remainder": "#dddddd"}


def rows_of(path, commit):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    lines = [l for l in lines if not l.get("smoke") and "predicted_bytes" in l]
    if not lines:
        raise SystemExit(f"report_ledger: no line with a prediction in {path}")
    commit = commit or lines[-1]["commit"]
    return commit, [l for l in lines if l["commit"] == commit]


def mib(v):
    return f"{v / MIB:.1f}"


def table(rows):
    head = "| model | measured | " + " | ".join(LINES) + " | remainder | predicted | error | within 2% / 4 MiB |"
    out = [head, "|" + " --- |" * (len(LINES) + 6)]
    for r in rows:
        cells = [r["model"], mib(r["measured_bytes"])] + [mib(r["ledger"].get(k, 0)) for k in LINES]
        cells += [mib(r["remainder_bytes"]), mib(r["predicted_bytes"]), mib(r["prediction_error_bytes"]),
                  "yes" if r["prediction_within_target"] else "**no**"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def svg(rows, commit):
    width, left, bar_w, row_h = 910, 330, 570, 26
    height = 60 + row_h * len(rows) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
             f'<text x="10" y="18" font-size="13">Device memory added per model, by ledger line, and the prediction '
             f'before load (| mark), H200, {commit}</text>']
    for i, r in enumerate(rows):
        y = 40 + i * row_h
        scale = bar_w / max(r["measured_bytes"], r["predicted_bytes"], 1)
        parts.append(f'<text x="10" y="{y + 14}">{r["model"]} ({mib(r["measured_bytes"])} MiB)</text>')
        x = left
        for name in LINES + ("remainder",):
            v = r["remainder_bytes"] if name == "remainder" else r["ledger"].get(name, 0)
            if v <= 0:
                continue
            w = v * scale
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 8}" fill="{COLOURS[name]}">'
                         f'<title>{name}: {mib(v)} MiB</title></rect>')
            x += w
        px = left + r["predicted_bytes"] * scale
        parts.append(f'<line x1="{px:.1f}" y1="{y - 2}" x2="{px:.1f}" y2="{y + row_h - 6}" stroke="black" stroke-width="2"/>')
    ly = 50 + row_h * len(rows)
    for j, name in enumerate(LINES + ("remainder",)):
        lx = 10 + j * 110
        parts.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{COLOURS[name]}"/>'
                     f'<text x="{lx + 14}" y="{ly + 9}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default="bench/results/memory_ledger.jsonl")
    ap.add_argument("--commit", default=None)
    ap.add_argument("--svg", default=None)
    a = ap.parse_args()
    commit, rows = rows_of(a.results, a.commit)
    print(f"memory ledger at {commit} ({len(rows)} models)\n")
    print(table(rows))
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(rows, commit))


if __name__ == "__main__":
    main()
