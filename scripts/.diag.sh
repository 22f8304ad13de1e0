export LD_LIBRARY_PATH=$PWD/build/gpu/lib PLANRT_REQUIRE_GPU=1 PLANRT_COMMIT=48b8158
PY=/opt/torch/.venv/bin/python3
(cd bench && timeout 200 $PY vision_models.py --planrt ../build/gpu/tools/planrt --dtype bf16 f32 --no-compile --iterations 10 --warmup 3 --out $OUT/vision_check.jsonl > $OUT/vision_check.log 2>&1; echo vision rc $?)
grep -v "Warning\|^ \|^{" $OUT/vision_check.log | cut -c1-300 | tail -4
for t in kernels_cuda_test backends_cuda_test backends_engine_cuda_test; do timeout 100 build/gpu/tests/$t 2>&1 | tail -2; done
