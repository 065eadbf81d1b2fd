// Weights into L2 ahead of the GEMM that reads them (NOTES-perf.md v48). At a few hundred rows a
// transformer layer alternates weight-streaming GEMMs with latency-bound kernels (norms, rotary,
// attention) during which HBM idles; one tiny kernel, launched after a GEMM, asks the TMA unit to
// bring the next GEMM's weight into L2 (cp.async.bulk.prefetch.L2, fire and forget), so that GEMM
// reads it from L2 instead of HBM.
#pragma once
#include <cstddef>

namespace fuseopt::cuda {

// Whether L2 prefetching is on for the current device: FUSEOPT_L2_PREFETCH is "1" (default off
// until measured), the device is sm_90 or newer (the bulk prefetch instruction) and programmatic
// dependent launch is on (without it the extra kernel would cost a full serialised launch).
bool l2_prefetch_enabled();

// Enqueues the prefetch of [p, p + bytes) on `stream`, capped at half the device's L2; the
// kernel reads nothing a kernel of the run writes, and its completion still implies the
// previous kernel's (it waits for it before exiting), so the stream's order is unchanged.
// false when nothing was enqueued (off, too small, misaligned).
bool launch_l2_prefetch(const void* p, size_t bytes, void* stream);

// Tests and benchmarks: -1 = the environment's choice, 0 = off, 1 = on where the device allows;
// and the number of prefetch kernels enqueued so far in the process.
void set_l2_prefetch_override(int mode);
long long l2_prefetch_launch_count();

}  // namespace fuseopt::cuda
