// A tiny parallel_for for the CPU kernels: splits [0, n) into contiguous
// chunks over a few std::threads. Cheap enough for outer loops of MatMul,
// Conv and row-wise ops; callers pass a grain so tiny loops stay serial.
#pragma once
#include <cstdint>
#include <functional>

namespace fuseopt {

// 0 = hardware concurrency. Set by SessionOptions::threads / fuserun.
void set_num_threads(int n);
int num_threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n). Runs serially
// when n < 2 * min_chunk or only one thread is allowed. Exceptions thrown by
// fn are rethrown on the calling thread.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace fuseopt
