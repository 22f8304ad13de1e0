#!/usr/bin/env bash
# Seed corpora for the fuzz targets (tests/fuzz), made from valid files only:
#   program      programs built by the planrt CLI: the transformer template under each
#                partition (cpu; engine and engine-per-block on device cpu; cuda, cuda-per-op
#                and engine-cuda-interleaved on cuda:0), with --no-reuse, --shared-scratch
#                and --external-weights, and the models below (every_op.json holds a
#                host method, an engine-delegated one and a device-tagged one)
#   model_json   tests/data/models/*.json, tests/fuzz/seeds/*.json, and mlp.json reading its
#                weights from a file (tests/fuzz/data/weights.safetensors)
#   safetensors  the external weights of those builds (f32, f16, bf16, i32, i64)
#   npy          outputs written by `planrt run --output-dir` (f32, i32, i64, f16), plus one
#                format 2.0 header written here (the writer only makes 2.0 for huge headers)
#
#   onnx_model   the model.onnx of every ONNX node test the importer claims
#                (tests/importers/onnx_node_tests.txt, from Debian's libonnx-testdata)
#                and one torch 2.11 dynamo export (tests/data/onnx/dynamo/mlp.onnx), and the
#                Hugging Face exports (tests/data/onnx/hf)
#
#   ./scripts/fuzz-corpus.sh OUT_DIR     # fills OUT_DIR/{program,model_json,safetensors,npy,onnx_model}
#
# The CLI is $PLANRT_CLI if set, else it is built (default compiler, no CUDA) in
# build/fuzz-tools. scripts/fuzz.sh calls this; the committed corpus in tests/fuzz/corpus is
# this output minimised by libFuzzer (-merge=1).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: scripts/fuzz-corpus.sh OUT_DIR}
cli=${PLANRT_CLI:-}
if [[ -z $cli ]]; then
  tools_dir=build/fuzz-tools
  cmake -S . -B "$tools_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLANRT_CUDA=OFF \
    -DPLANRT_BUILD_TESTS=OFF -DPLANRT_BUILD_BENCH=OFF >/dev/null
  cmake --build "$tools_dir" -j "${PLANRT_JOBS:-$(nproc)}" --target planrt_cli >/dev/null
  cli=$tools_dir/tools/planrt
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"/{program,model_json,safetensors,npy,onnx_model}

# A tiny encoder: weights of a few KiB, so a mutated file is still mostly structure.
build_template() {
  local name=$1
  shift
  "$cli" build --template transformer --d-model 8 --heads 2 --ffn 16 --max-seq 4 \
    --weights random:1 "$@" -o "$work/$name.prog" >/dev/null
  cp "$work/$name.prog" "$out/program/template-$name.prog"
}
build_template cpu --layers 1 --partition cpu
build_template cpu-no-reuse --layers 1 --partition cpu --no-reuse
build_template engine-cpu --layers 1 --partition engine --device cpu
build_template engine-per-block-cpu-shared --layers 2 --partition engine-per-block --device cpu --shared-scratch
build_template cuda --layers 1 --partition cuda --device cuda:0
build_template cuda-per-op --layers 1 --partition cuda-per-op --device cuda:0
build_template engine-cuda-interleaved --layers 1 --partition engine-cuda-interleaved --device cuda:0
# Its weights file is tests/fuzz/data/external.safetensors, where the program target
# resolves external names.
build_template external --layers 1 --partition cpu --external-weights
cp "$work/external.safetensors" "$out/safetensors/template-external.safetensors"

# Model descriptions: each a model_json seed. All but two_methods.json (64 KiB of weights;
# every_op.json has host and device-tagged methods in one program too) are also built twice,
# with embedded and with external weights.
for model in tests/data/models/*.json tests/fuzz/seeds/*.json; do
  name=$(basename "$model" .json)
  cp "$model" "$out/model_json/$name.json"
  if [[ $name == two_methods ]]; then continue; fi
  "$cli" build "$model" -o "$work/$name.prog" >/dev/null
  cp "$work/$name.prog" "$out/program/model-$name.prog"
  "$cli" build "$model" --external-weights -o "$work/$name-external.prog" >/dev/null
  cp "$work/$name-external.safetensors" "$out/safetensors/$name.safetensors"
done

# The weights files the targets resolve names against (tests/fuzz/data) must be the ones
# the seeds name, or the seeds stop at "file not found".
check_data_file() {
  if ! cmp -s "$out/safetensors/$1" "tests/fuzz/data/$2"; then
    echo "warning: tests/fuzz/data/$2 differs from what the seeds name; copy $out/safetensors/$1 there" >&2
  fi
}
check_data_file template-external.safetensors external.safetensors
check_data_file mlp.safetensors weights.safetensors
# mlp.json with its weights in a file (tests/fuzz/data/weights.safetensors).
sed -e 's|"weights": {"random": {"seed": 1, "std": 0.1}}|"weights": {"file": "weights.safetensors"}|' \
  tests/data/models/mlp.json >"$out/model_json/mlp-weights-file.json"
grep -q '"file"' "$out/model_json/mlp-weights-file.json"

# Outputs as .npy files.
run_outputs() {
  local prog=$1 method=$2
  local dir="$work/npy-$prog-$method"
  shift 2
  "$cli" run "$work/$prog.prog" --method "$method" --output-dir "$dir" "$@" >/dev/null
  for f in "$dir"/*.npy; do cp "$f" "$out/npy/$prog-$method-$(basename "$f")"; done
}
run_outputs mlp forward --random-inputs 0 --dim B=3
run_outputs every_op ops --random-inputs 0 --dim S=2
run_outputs dtypes ints --random-inputs 0 --dim B=2

# Format 2.0 (a 4-byte header length), which NumPy writes only for headers over 64 KiB.
header="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
pad=$(( (64 - (12 + ${#header} + 1) % 64) % 64 ))
{
  printf '\x93NUMPY\x02\x00'
  printf "\\x$(printf %02x $(( (${#header} + pad + 1) & 255 )))\\x$(printf %02x $(( (${#header} + pad + 1) >> 8 )))\\x00\\x00"
  printf '%s%*s\n' "$header" "$pad" ''
  printf '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40'
} >"$out/npy/v2-f32-2x2.npy"

while read -r t; do
  cp "/usr/share/libonnx-testdata/data/node/$t/model.onnx" "$out/onnx_model/$t.onnx"
done < tests/importers/onnx_node_tests.txt
# A torch 2.11 (dynamo) export: opset 20, and each node's name scopes in the metadata that
# Debian's ONNX definitions read as unknown fields (the blocks of engine-per-block).
cp tests/data/onnx/dynamo/mlp.onnx "$out/onnx_model/dynamo_mlp.onnx"
# Hugging Face exports (tests/data/onnx/hf): masks, bool and integer values at run time.
for f in tests/data/onnx/hf/*.onnx; do cp "$f" "$out/onnx_model/hf_$(basename "$f")"; done

for d in program model_json safetensors npy onnx_model; do
  echo "$d: $(ls "$out/$d" | wc -l) files, $(du -sk "$out/$d" | cut -f1) KiB"
done
