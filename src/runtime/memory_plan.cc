#include "runtime/memory_plan.h"

#include <algorithm>

#include "util/error.h"

namespace fuseopt {

BufferPool::~BufferPool() {
  for (const Block& b : blocks_) backend_.free(b.p);
}

void* BufferPool::acquire(size_t bytes) {
  size_t size = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  // Best fit among free blocks; a block more than twice too big is left for
  // a bigger request (a small tensor must not pin a large buffer).
  int best = -1;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.in_use || b.size < size || b.size > 2 * size + 4096) continue;
    if (best < 0 || b.size < blocks_[best].size) best = static_cast<int>(i);
  }
  if (best < 0) {
    void* p = backend_.alloc(size);
    ++backend_allocs_;
    reserved_ += size;
    blocks_.push_back(Block{p, size, false});
    index_[p] = blocks_.size() - 1;
    best = static_cast<int>(blocks_.size() - 1);
  }
  Block& b = blocks_[best];
  b.in_use = true;
  live_ += b.size;
  peak_ = std::max(peak_, live_);
  return b.p;
}

void BufferPool::release(void* p) {
  auto it = index_.find(p);
  FUSE_CHECK(it != index_.end(), "internal: releasing a buffer the pool does not own");
  Block& b = blocks_[it->second];
  FUSE_CHECK(b.in_use, "internal: buffer released twice");
  b.in_use = false;
  live_ -= b.size;
}

}  // namespace fuseopt
