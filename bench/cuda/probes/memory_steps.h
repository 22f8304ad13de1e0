// Step-by-step device-memory measurement for the hand-built probes in this folder: after
// each step, the device is synchronized and cudaMemGetInfo's used bytes and their change
// since the previous step are printed as one JSON line ("probe" named when given).
#pragma once

#include <cstdio>
#include <cuda_runtime.h>

static size_t used() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return t - f;
}

// Used bytes after the previous step (a probe may set it, e.g. to the context's figure).
static size_t last = 0;

static void step(const char* what, const char* probe = nullptr) {
  cudaDeviceSynchronize();
  const size_t u = used();
  if (probe != nullptr) std::printf("{\"probe\": \"%s\", ", probe);
  else std::printf("{");
  std::printf("\"step\": \"%s\", \"used_mib\": %.2f, \"delta_mib\": %.2f}\n", what, u / 1048576.0,
              (double(u) - double(last)) / 1048576.0);
  last = u;
}
