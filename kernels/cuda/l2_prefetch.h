// Weights into L2 ahead of the GEMM that reads them (NOTES-perf.md v48). At a few hundred rows a
// transformer layer alternates weight-streaming GEMMs with latency-bound kernels (norms, rotary,
// attention) during which HBM idles; a tiny kernel on a side stream, forked after a GEMM, asks
// the TMA units to bring the next GEMM's weight into L2 (cp.async.bulk.prefetch.L2, fire and
// forget), so that GEMM reads it from L2 instead of HBM. The fork and the join are the CUDA
// backend's (prefetch_to_l2, join_prefetches).
#pragma once
#include <cstddef>

namespace fuseopt::cuda {

// Whether L2 prefetching is on for the current device: FUSEOPT_L2_PREFETCH is "1" (default off
// until measured) and the device is sm_90 or newer (the bulk prefetch instruction).
bool l2_prefetch_enabled();

// Enqueues the prefetch of [p, p + bytes) on `stream` (the side stream), capped at half the
// device's L2. false when nothing was enqueued (off, under 64 KB, misaligned).
bool launch_l2_prefetch(const void* p, size_t bytes, void* stream);

// Tests and benchmarks: -1 = the environment's choice, 0 = off, 1 = on where the device allows;
// and the number of prefetch kernels enqueued so far in the process.
void set_l2_prefetch_override(int mode);
long long l2_prefetch_launch_count();

}  // namespace fuseopt::cuda
