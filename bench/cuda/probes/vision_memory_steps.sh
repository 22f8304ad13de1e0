#!/usr/bin/env bash
# The ledger after each step (program load, method load, first/second/third execute) of
# torchvision models (random weights, ONNX, cuda partition, f32; $MODELS, default resnet18
# and mobilenet_v2) at batch 1 and 32: bench/cuda/probes/method_memory_steps.cpp per case, one
# process each.
#   [MODELS="resnet50 ..."] bench/cuda/probes/vision_memory_steps.sh BUILD_DIR OUT_DIR [python]
set -euo pipefail
build=$1 out=$2 py=${3:-python3}
mkdir -p "$out"
models=${MODELS:-resnet18 mobilenet_v2}
"$py" - "$out" $models <<'PY'
import inspect, os, sys, torch, torchvision
out = sys.argv[1]
for name in sys.argv[2:]:
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(m, (torch.randn(2, 3, 224, 224),), os.path.join(out, f"{name}.onnx"), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, **kw)
PY
for name in $models; do
  for batch in 1 32; do
    prog=$out/$name-b$batch.prog
    "$build/tools/planrt" build "$out/$name.onnx" --dim batch=$batch --partition cuda --device cuda:0 -o "$prog" >/dev/null
    echo "{\"case\": \"$name cuda f32 batch=$batch\"}"
    "$build/bench/method_memory_steps" "$prog" "$batch,3,224,224"
    rm -f "$prog"
  done
done
