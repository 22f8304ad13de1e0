// Times one ONNX model in ONNX Runtime's CPU provider (onnxruntime-node) for
// bench/cpu_compare.py and prints one JSON line.
//
//   node ort_run.mjs ORT_DIR MODEL.onnx X.f32 DIM0,DIM1,... THREADS ITERATIONS WARMUP OUT.f32
//
// ORT_DIR holds node_modules/onnxruntime-node (installed there by the driver, never in the
// repository). X.f32 and OUT.f32 are raw little-endian float32. Graph optimisations: all;
// one inter-op thread, THREADS intra-op threads, sequential execution.
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';

const [ortDir, model, xPath, dims, threads, iterations, warmup, outPath] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(ortDir), 'node_modules', 'x.js'));
const ort = require('onnxruntime-node');

const shape = dims.split(',').map(Number);
const raw = fs.readFileSync(xPath);
const data = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
const session = await ort.InferenceSession.create(model, {
  intraOpNumThreads: Number(threads),
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
});
const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, shape) };
const times = [];
let result;
for (let i = 0; i < Number(warmup) + Number(iterations); ++i) {
  const t0 = process.hrtime.bigint();
  result = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (i >= Number(warmup)) times.push(ms);
}
const y = result[session.outputNames[0]];
fs.writeFileSync(outPath, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
console.log(JSON.stringify({ times_ms: times, output_dims: y.dims }));
