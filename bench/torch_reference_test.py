#!/usr/bin/python3
"""bench/torch_reference.py --module encoder computes the template's model: PyTorch's own
nn.TransformerEncoder loaded with a template program's weights gives planrt's CPU output
(relative error <= 1e-5 at two sequence lengths), and a model that is not the template's
graph is refused with an error instead of being run as something else.

  torch_reference_test.py PLANRT
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    planrt = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as work:
        model, prog = os.path.join(work, "m.json"), os.path.join(work, "m.prog")
        r = run([planrt, "build", "--template", "transformer", "--layers", "2", "--d-model", "64", "--heads", "4",
                 "--ffn", "96", "--max-seq", "32", "--weights", "random:5", "--partition", "cpu",
                 "--save-model", model, "-o", prog])
        if r.returncode != 0:
            sys.exit(f"planrt build failed: {r.stderr}")
        for s in (1, 23):
            x = os.path.join(work, f"x{s}.npy")
            np.save(x, np.random.default_rng(s).standard_normal((1, s, 64)).astype(np.float32))
            r = run([planrt, "run", prog, "--input", f"x={x}", "--output-dir", os.path.join(work, f"p{s}")])
            if r.returncode != 0:
                sys.exit(f"planrt run failed: {r.stderr}")
            r = run([sys.executable, os.path.join(HERE, "torch_reference.py"), model, "--input", f"x={x}",
                     "--device", "cpu", "--module", "encoder", "--iterations", "2", "--warmup", "1",
                     "--output-dir", os.path.join(work, f"t{s}")])
            if r.returncode != 0:
                failures.append(f"S={s}: torch_reference --module encoder failed: {r.stderr.strip()}")
                continue
            if json.loads(r.stdout)["module"] != "encoder":
                failures.append(f"S={s}: the result does not say which module ran")
            a = np.load(os.path.join(work, f"p{s}", "y.npy")).astype(np.float64)
            b = np.load(os.path.join(work, f"t{s}", "y.npy")).astype(np.float64)
            rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
            print(f"S={s}: nn.TransformerEncoder vs planrt cpu: relative error {rel:.2e}")
            if not rel <= 1e-5:
                failures.append(f"S={s}: relative error {rel:.2e} above 1e-5")
        # One node changed (the GELU made a ReLU): no longer the template's graph.
        m = json.load(open(model))
        for n in m["methods"][0]["nodes"]:
            if n["op"] == "gelu":
                n["op"], n["attrs"] = "relu", {}
        other = os.path.join(work, "other.json")
        json.dump(m, open(other, "w"))
        r = run([sys.executable, os.path.join(HERE, "torch_reference.py"), other, "--input", f"x={x}",
                 "--device", "cpu", "--module", "encoder", "--iterations", "1", "--warmup", "0"])
        if r.returncode == 0 or "not the transformer template's graph" not in r.stderr:
            failures.append(f"a ReLU model ran as the encoder (rc {r.returncode}): {r.stderr.strip()}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
