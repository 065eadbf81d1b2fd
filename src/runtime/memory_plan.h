// Liveness-based memory reuse. The Session frees a value's buffer after its
// last consumer; the pool keeps freed blocks and hands them out again
// (best fit by size), so a run's footprint follows the live set, not the sum
// of all intermediates. The pool never returns memory to the backend during
// its lifetime: with the same input shapes, the same sequence of requests
// gets the same blocks (same addresses), which is what CUDA-graph replay
// needs, and after the first run of a shape no backend allocation happens.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "runtime/backend.h"

namespace fuseopt {

class BufferPool {
 public:
  explicit BufferPool(BackendImpl& backend) : backend_(backend) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A block of at least `bytes` (rounded up to 256). Never nullptr.
  void* acquire(size_t bytes);
  void release(void* p);

  size_t live_bytes() const { return live_; }        // bytes of blocks handed out now
  size_t peak_bytes() const { return peak_; }        // max live_bytes since reset_peak()
  size_t reserved_bytes() const { return reserved_; }  // everything allocated from the backend
  int64_t backend_allocations() const { return backend_allocs_; }
  void reset_peak() { peak_ = live_; }

 private:
  struct Block {
    void* p;
    size_t size;
    bool in_use;
  };
  BackendImpl& backend_;
  std::vector<Block> blocks_;              // creation order: deterministic choice among equals
  std::map<void*, size_t> index_;          // pointer -> position in blocks_
  size_t live_ = 0, peak_ = 0, reserved_ = 0;
  int64_t backend_allocs_ = 0;
};

}  // namespace fuseopt
