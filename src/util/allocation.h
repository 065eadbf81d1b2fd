// Resource errors as the one line every other error is: what was being
// allocated (an input, a node's output, a weight upload) and how much.
//
// Allocation sites wrap the allocation in with_allocation_context(): a
// std::bad_alloc, or a backend's AllocationError ("out of GPU memory
// allocating ... bytes"), becomes an AllocationError naming the tensor, e.g.
//   input 'input_ids' [1,1099511627776] int64: 8 TiB (8796093022208 bytes) is more
//   than this machine's memory (62.8 GiB)
#pragma once
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "util/error.h"

namespace fuseopt {

// A failed allocation (host or device). Still a fuseopt::Error: one line.
class AllocationError : public Error {
 public:
  explicit AllocationError(const std::string& msg) : Error(msg) {}
};

// "8 TiB (8796093022208 bytes)", "512 bytes"; without the exact count: "8 TiB".
std::string byte_size_text(uint64_t bytes, bool exact = true);

// Bytes of a dense tensor of these dims; throws AllocationError("<what()>: ...")
// when a dim is negative or the count does not fit 64 bits.
template <class What>
uint64_t tensor_bytes_checked(const std::vector<int64_t>& dims, size_t elem_size, What&& what);

// Throws AllocationError("<what>: N bytes is more than this machine's memory";
// no prefix when `what` is empty)
// when `bytes` exceeds the physical memory: such a request could only
// succeed by overcommit and end in the kernel's OOM killer, not in an error.
void check_host_capacity(const std::string& what, uint64_t bytes);

// Runs alloc(); std::bad_alloc and AllocationError come out as one
// AllocationError prefixed with what() (a callable, built only on failure)
// and the size. `memory` names the kind ("host", "GPU").
template <class What, class Alloc>
auto with_allocation_context(uint64_t bytes, const char* memory, What&& what, Alloc&& alloc) -> decltype(alloc()) {
  try {
    return alloc();
  } catch (const std::bad_alloc&) {
    throw AllocationError(what() + ": cannot allocate " + byte_size_text(bytes) + " of " + memory + " memory");
  } catch (const AllocationError& e) {
    throw AllocationError(what() + ": " + e.what());
  }
}

template <class What>
uint64_t tensor_bytes_checked(const std::vector<int64_t>& dims, size_t elem_size, What&& what) {
  uint64_t n = elem_size;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) throw AllocationError(what() + ": negative dimension " + std::to_string(d));
    empty = empty || d == 0;
  }
  if (empty) return 0;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      throw AllocationError(what() + ": more bytes than 64 bits can count");
  return n;
}

}  // namespace fuseopt
