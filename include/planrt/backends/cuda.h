// The `cuda` backend (docs/design.md §5, §7): runs a method's delegate segments (a nested Graph of
// Kernel instructions, docs/program-format.md) with planrt's CUDA kernels. Available only in
// builds with CUDA (PLANRT_HAVE_CUDA is defined); nothing here includes a CUDA header.
//
//   planrt::register_cuda_backend();             // once, before loading a program
//   Program p = *Program::load("model.prog");
//   Method m = *p.load_method("forward_cuda");    // segments with backend "cuda" init here
//
// What a segment does:
// - init: resolves every op of the graph to its CUDA kernel (NotFound naming op, node and
//   segment), parses attributes once, uploads the constants (weights) the graph reads to the
//   segment's device, acquires the device's warm pool (§5), creates a cuBLAS handle (TF32
//   off unless the compile spec or load option "allow_tf32" is "true") and a stream.
//   Weights are uploaded once per (device, program constant) and shared by every segment
//   and method that reads them, in all programs alive in the process; they are freed when
//   the last segment using them is destroyed (so when the program's last method goes).
//   The cache is keyed by the constant's host bytes (address and size) in the program's
//   mapping, which stays valid as long as any method of that program exists.
// - execute: binds the named dims from the operands and places the graph's intermediates:
//   with a planned scratch (the builder's default, docs/design.md §6) at their offsets in
//   the scratch the Delegate passes as its last output, each kernel's workspace at its
//   planned offset there, nothing allocated; otherwise the Temporary values (and a scratch
//   the graph plans) from the warm pool on the stream just before their first use, freed
//   stream-ordered after their last. Then it enqueues every kernel in order.
//   Streams: the runtime passes the method's stream on the segment's device; everything is
//   enqueued there and nothing synchronizes (the runtime synchronizes once, where the host
//   must read). The kernels' data-dependent errors (an embedding id out of range) land in a
//   device record that is copied back in stream order and reported by finish() after the
//   runtime's synchronization, as the CPU kernel's OutOfRange. Called directly with a null
//   stream, the segment runs on a stream it owns, which first waits for the legacy default
//   stream (where a caller's cudaMemcpy runs), and synchronizes and finishes before
//   returning.
// - destroy: releases the stream, cuBLAS handle, pool handle and the weight references.
//
// Options (compile specs of the program/segment, then load-time options for "cuda", a
// later key wins; a bad value is InvalidArgument naming the key):
//   "allow_tf32"             "true" | "false" (default false): cuBLAS TF32 math
//   "gemm_algorithm"         "timed" | "heuristic" (default timed): each linear's cuBLASLt
//                            algorithm is the fastest of the heuristic's top answers, timed
//                            on the first call of its shape (that call waits for its stream),
//                            or the heuristic's first answer (the same in every process)
//   "attention"              "cudnn" | "planrt" (default cudnn): bf16 attention without a
//                            causal mask runs cuDNN's fused attention (cuDNN 9.13 or later;
//                            planrt's kernel where cuDNN is absent or refuses the shape), or
//                            always planrt's kernel
//   "fuse_kernels"           "true" | "false" (default true): an add whose result a
//                            layer_norm reads next runs as one kernel; false runs every op
//                            as its own kernel (for A/B measurements)
//   "use_planned_scratch"    "true" | "false" (default true): false runs a segment the program
//                            gives a planned scratch from the warm pool instead (A/B)
//   "use_private_pool"       "true" | "false" (default true): false draws the temporaries
//                            from the device's default pool instead (for A/B measurements)
//   "pool_release_threshold" bytes or "max" (default max): what the private pool keeps
//                            across synchronizations
//   "use_cuda_graphs"        "true" | "false" (default false): each execute is captured into
//                            a CUDA graph once per operand addresses and sizes (at most 8
//                            per segment; past that, new shapes run eagerly) and replayed
//                            with one cudaGraphLaunch: one launch per segment instead of one
//                            per kernel, for launch-bound models. Outputs are bit-identical.
//                            Temporaries of a captured execute are graph allocations (owned
//                            by the graph; the pool's release trims the graph pool too), so
//                            the warm pool's statistics do not count them. Engines are not
//                            captured (a pooled engine refuses capture, docs/design.md §6).
// Pool options are fixed per device while it has live segments: loading a segment with
// other pool options then fails (InvalidArgument). Other keys are ignored.
//
// Errors are Status values naming the segment, and for a kernel the step, op and node;
// nothing aborts or throws.
//
// Thread safety: register_cuda_backend and cuda_backend_stats may be called from any thread.
// Segments follow the runtime's rule (one execute per handle at a time, distinct handles
// concurrently, backend.h): segments on one device share its cuBLAS handle, and each
// execute enqueues its kernels under that handle's lock (enqueueing on one device is
// serialized; the kernels still run concurrently on their streams); the weight cache is one
// process-wide lock (held across a constant's upload and its free: a segment init or
// destroy can wait for another device's upload or free).
#pragma once

#include <cstdint>

#include "planrt/core/result.h"

namespace planrt {

// Registers planrt's CUDA allocator (register_cuda_allocator, planrt/platform/cuda.h) and
// the backend under the name "cuda". Idempotent: a second call is ok. InvalidArgument when
// another backend is already registered as "cuda" (or another allocator for CUDA). Works
// on a machine without a GPU: loading a CUDA method then fails with an error naming the
// device, and host methods are unaffected.
Status register_cuda_backend();

// Counters of the process's `cuda` backend (for tests and memory reports).
struct CudaBackendStats {
  int64_t live_segments = 0;          // initialized and not yet destroyed handles
  int64_t weight_uploads = 0;         // constants uploaded to a device, since process start
  int64_t resident_weights = 0;       // constants on devices now (all devices)
  uint64_t resident_weight_bytes = 0; // their bytes
  int64_t weight_allocations = 0;     // device allocations holding them (large ones share one)
  int64_t graph_captures = 0;         // use_cuda_graphs: executes captured, since process start
  int64_t graph_replays = 0;          //   executes that launched a captured graph
  int64_t graph_fallbacks = 0;        //   captures CUDA refused (the segment then runs eagerly)
};
CudaBackendStats cuda_backend_stats();

}  // namespace planrt
