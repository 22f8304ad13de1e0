#!/usr/bin/env python3
"""The include-order check (docs/design.md §2): no file of a layer includes a header of a
layer that is not below it: not a higher one, not a peer (builder and runtime sit side by
side and neither sees the other; backends sit on runtime, not on builder). Every library sees both include roots (include/ and src/), so the compiler and the
linker alone would let an upward include of a header-only piece through; this check does not.

A file's layer is its folder: src/LAYER/... or include/planrt/LAYER/.... An include's layer
is the first folder of "LAYER/..." or "planrt/LAYER/..." (quotes or angle brackets); a bare
"name.h" is the including file's own folder. Anything else (system and third-party headers)
is not a layer.

  scripts/check_layers.py [ROOT]      # ROOT: the repository (default: this script's parent)
  scripts/check_layers.py --self-test # a tree with known violations must be caught
Prints every violation as FILE:LINE: LAYER includes HEADER (LAYER2); exit 1 if any.
"""
import os
import re
import sys
import tempfile

# Each layer and the layers directly below it (src/CMakeLists.txt links the same); a layer
# may include any layer it reaches through these. builder and runtime are peers, and
# backends sit on runtime, not on builder: the runtime side never carries the builder.
BELOW = {"core": [], "platform": ["core"], "format": ["platform"], "kernels": ["core"],
         "planning": ["format", "kernels"], "builder": ["planning"], "runtime": ["planning"],
         "backends": ["runtime"], "importers": ["builder"]}


def reachable(layer):
    out, todo = set(), list(BELOW[layer])
    while todo:
        lower = todo.pop()
        if lower not in out:
            out.add(lower)
            todo.extend(BELOW[lower])
    return out


REACHES = {layer: reachable(layer) for layer in BELOW}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def file_layer(relpath):
    parts = relpath.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in BELOW:
        return parts[1]
    if len(parts) >= 4 and parts[0] == "include" and parts[1] == "planrt" and parts[2] in BELOW:
        return parts[2]
    return None


def include_layer(header, own_layer):
    parts = header.split("/")
    if len(parts) == 1:
        return own_layer
    if parts[0] == "planrt" and len(parts) >= 3 and parts[1] in BELOW:
        return parts[1]
    if parts[0] in BELOW:
        return parts[0]
    return None


def allowed(layer, included):
    return included == layer or included in REACHES[layer]


def violations(root):
    found = []
    for top in ("src", "include"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                layer = file_layer(rel)
                if layer is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        included = include_layer(m.group(1), layer)
                        if included is not None and not allowed(layer, included):
                            found.append(f"{rel}:{number}: {layer} includes {m.group(1)} ({included})")
    return sorted(found)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/kernels/up.h": '#include "builder/graph.h"\n',             # up: caught
            "src/builder/peer.cpp": '#include "runtime/method_impl.h"\n',   # peer: caught
            "include/planrt/core/x.h": "#include <planrt/runtime/tensor.h>\n",  # up: caught
            "src/runtime/fine.cpp": '#include "planning/op_attrs.h"\n#include "local.h"\n'
                                    '#include <vector>\n#include "planrt/core/status.h"\n',
            "src/backends/fine.h": '#include "planrt/runtime/backend.h"\n',
            "src/backends/sideways.cpp": '#include "builder/graph.h"\n',     # not below: caught
            "src/kernels/cuda/k.cu": '#include "platform/cuda/pool.h"\n',   # not below: caught
        }
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        got = [v.split(":")[0] for v in violations(root)]
        want = sorted(["include/planrt/core/x.h", "src/backends/sideways.cpp",
                       "src/builder/peer.cpp", "src/kernels/cuda/k.cu", "src/kernels/up.h"])
        if got != want:
            print(f"check_layers self-test: caught {got}, expected {want}")
            return 1
    print("check_layers self-test: the five planted violations were caught, nothing else")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"check_layers: {len(found)} include(s) go up the layer order (docs/design.md §2)")
        return 1
    print("check_layers: every include of src/ and include/ stays at or below its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
