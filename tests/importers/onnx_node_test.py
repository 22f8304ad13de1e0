#!/usr/bin/python3
"""Runs ONNX's own backend node tests (Debian's libonnx-testdata) through the planrt CLI, as
other ONNX runtimes run them: `planrt build model.onnx`, `planrt run` on test_data_set_*/
input_N.pb, outputs compared with output_N.pb (numpy's allclose, rtol 1e-3 and atol 1e-7:
the tolerances of ONNX's backend test runner).

An input that decides a shape (a Reshape's shape, Slice's bounds, ...) must be known when
a planrt program is built: when `planrt build` says so, the test binds that input to its
test value with --input-value, as a user would, and builds again.

  onnx_node_test.py PLANRT TEST [TEST ...]   exit 0 when every test passes; a TEST is a
                                            folder, or a name under $PLANRT_ONNX_NODE_DIR
                                            (default /usr/share/libonnx-testdata/data/node)
  onnx_node_test.py PLANRT --sweep NODE_DIR  one line per test there: pass, or why not
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

BIND = re.compile(r"input \d+ \([^,]+, '([^']+)'\) is computed at run time")


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def run_one(planrt, test_dir, work):
    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path)
    inputs = graph_inputs(model)
    outputs = [o.name for o in model.graph.output]
    sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
    if not sets:
        return "no test data"
    first = sets[0]
    bound = {}
    prog = os.path.join(work, "m.prog")
    while True:
        cmd = [planrt, "build", model_path, "-o", prog]
        for name, path in bound.items():
            cmd += ["--input-value", f"{name}={path}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            break
        m = BIND.search(r.stderr)
        if not m or m.group(1) in bound or m.group(1) not in inputs:
            return "build: " + r.stderr.strip().splitlines()[-1]
        bound[m.group(1)] = os.path.join(first, f"input_{inputs.index(m.group(1))}.pb")
    for data in sets:
        if bound and data != first:
            continue  # the bound values are those of the first set
        out_dir = os.path.join(work, "out")
        cmd = [planrt, "run", prog, "--output-dir", out_dir]
        for i, name in enumerate(inputs):
            if name not in bound:
                cmd += ["--input", f"{name}={os.path.join(data, f'input_{i}.pb')}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return "run: " + r.stderr.strip().splitlines()[-1]
        for i, name in enumerate(outputs):
            expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"output_{i}.pb")))
            got = np.load(os.path.join(out_dir, f"{name}.npy"))
            if got.shape != expected.shape:
                return f"output {name}: shape {got.shape}, expected {expected.shape}"
            if not np.allclose(got, expected, rtol=1e-3, atol=1e-7, equal_nan=True):
                err = np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))
                return f"output {name}: max abs error {err}"
    return "pass"


def main():
    planrt = sys.argv[1]
    if sys.argv[2] == "--sweep":
        dirs = sorted(glob.glob(os.path.join(sys.argv[3], "test_*")))
        for d in dirs:
            with tempfile.TemporaryDirectory() as work:
                ops = sorted({n.op_type for n in onnx.load(os.path.join(d, "model.onnx")).graph.node})
                print(f"{os.path.basename(d)}\t{'+'.join(ops)}\t{run_one(planrt, d, work)}", flush=True)
        return 0
    failed = 0
    node_dir = os.environ.get("PLANRT_ONNX_NODE_DIR", "/usr/share/libonnx-testdata/data/node")
    for d in sys.argv[2:]:
        if not os.path.isdir(d):
            d = os.path.join(node_dir, d)
        if not os.path.isdir(d):
            print(f"{d}: no such test (install libonnx-testdata: scripts/deps.sh)")
            failed += 1
            continue
        with tempfile.TemporaryDirectory() as work:
            result = run_one(planrt, d, work)
        print(f"{os.path.basename(d)}: {result}")
        failed += result != "pass"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
