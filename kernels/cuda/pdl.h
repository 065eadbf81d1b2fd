// Programmatic dependent launch (PDL, sm_90+), host side: whether fuseopt's
// own kernels are launched with cudaLaunchAttributeProgrammaticStreamSerialization.
// Includable from .cc files; kernels/cuda/pdl.cuh has the launcher and the
// device-side wait/trigger (NOTES-perf.md v8 says why and what it gains).
//
// The attribute lets a kernel start (launch, block scheduling, prologue) while
// the previous kernel on the stream is still finishing; every kernel launched
// through pdl_launch therefore begins with pdl_wait(), which blocks until the
// previous kernel has completed and its writes are visible. Captured into a
// CUDA graph, the attribute becomes a programmatic edge between kernel nodes.
#pragma once
#include <cuda_runtime_api.h>

namespace fuseopt::cuda_pdl {

// True when launches on the current device use PDL: FUSEOPT_PDL is not "0"
// (default on), the device has compute capability >= 9.0 and the driver is
// CUDA 12.3 or newer (programmatic edges in captured graphs). Cached per device.
bool enabled();

// While `stream` is being captured: true only when every node the next
// captured node will depend on is a kernel node. A programmatic edge is
// defined between kernel nodes only; after a memcpy/memset (the graph's input
// copies, a poison fill) the launch is plain: there is no kernel tail to
// overlap, and the capture is never asked for an edge it might refuse. True
// when the stream is not capturing.
bool capture_allows(cudaStream_t stream);

// Tests and benchmarks: -1 = back to the environment's choice, 0 = off, 1 = on
// where the device supports it. Takes effect for later launches (and for graphs
// captured later); not meant to be flipped while another thread launches.
void set_override(int mode);

// FUSEOPT_PDL_TRIGGER_FIRST: "0" off, unset / "1" on. Short kernels that sit between a GEMV
// and the decode attention (RotaryEmbedding) trigger their dependents before their own wait
// (pdl.cuh: pdl_begin_trigger_first), so the attention's pre-wait prefetch overlaps the GEMV.
bool trigger_first_enabled();

// Called by the launcher when a PDL launch failed and a plain one of the same
// kernel succeeded: PDL is switched off for that device for the process (with
// one warning), so an unexpected driver refusal degrades to normal launches.
void disable_for_device(int device, int error_code);

}  // namespace fuseopt::cuda_pdl
