// Out-of-range indices met on the device (Gather, GatherElements, GatherND,
// ScatterND, ScatterElements): a kernel cannot throw, so it records the first
// bad index in a small per-stream slot and the Session raises a one-line
// fuseopt::Error naming the node at the run's end-of-run synchronization
// (BackendImpl::raise_device_errors).
//
// The slot of a CUDA backend's stream lives at fixed addresses for the
// backend's lifetime, so a kernel captured into a CUDA graph keeps writing to
// it on every replay:
//  - gate: 4 bytes of device memory; the first reporting thread wins it with
//    atomicCAS(0 -> 1), so exactly one report is written per run;
//  - record: mapped pinned host memory; the winner writes index, dim and the
//    reporting node's site id there, and the host reads it after the stream
//    synchronization the run already does (no extra copy, no extra sync).
// reset_index_errors() enqueues the gate's memset on the stream before a run's
// work (so it precedes a replayed graph) and clears the record.
// Kernels on a stream without a slot (no CUDA backend attached) skip reporting.
#pragma once
#include <cstdint>

namespace fuseopt {
class KernelContext;
}

namespace fuseopt::cuda {

struct IndexErrorRecord {
  int32_t site;  // 0: nothing recorded; else the reporting node's site id
  int32_t unused;
  int64_t index;  // the bad index as given (before adding dim to a negative one)
  int64_t dim;    // the size of the indexed dim
};

// Passed by value to a kernel; gate == nullptr disables reporting.
struct IndexErrorSink {
  unsigned int* gate;
  IndexErrorRecord* record;
  int32_t site;
};

// Host side. The sink for a launch by `ctx`'s node on ctx's stream.
IndexErrorSink index_error_sink(KernelContext& ctx);
// Owned by the CUDA backend: one slot per stream (attach never throws: when
// the slot cannot be made, that stream's kernels just do not report).
void attach_index_errors(void* stream);
void detach_index_errors(void* stream);
void reset_index_errors(void* stream);
// After the stream has been synchronized: throws Error
// "<op 'name'>: index <i> out of range [-dim, dim-1]" when a kernel reported one.
void raise_index_errors(void* stream);

#ifdef __CUDACC__
// Device side: records (index, dim) unless another thread was first this run.
__device__ __forceinline__ void report_bad_index(const IndexErrorSink& s, int64_t index, int64_t dim) {
  if (s.gate != nullptr && atomicCAS(s.gate, 0u, 1u) == 0u) {
    volatile IndexErrorRecord* r = s.record;
    r->index = index;
    r->dim = dim;
    __threadfence_system();
    r->site = s.site;
    __threadfence_system();
  }
}
#endif

}  // namespace fuseopt::cuda
