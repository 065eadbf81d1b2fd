// DLPack for fuseopt._fuseopt: CUDA tensors in (a producer's "dltensor"
// capsule viewed as a device RtTensor) and out (a Session::run_device output
// handed to the consumer as a "dltensor" capsule that owns it).
//
// The structs are DLPack's own (dlpack.h v0.8, the "legacy" unversioned
// ABI every framework reads and writes); the header is not a dependency.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "ir/tensor.h"
#include "runtime/kernel.h"
#include "runtime/session.h"

namespace fuseopt::pydlpack {

constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;

struct DLDevice {
  int32_t device_type;  // DLDeviceType (a C enum: int-sized)
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL = compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// A CUDA tensor taken from a producer's capsule (renamed "used_dltensor":
// this object owns it now). `view` is its memory as the Session reads it;
// the producer's deleter runs when this object goes, i.e. after the run.
class Imported {
 public:
  // Throws Error naming `input` when the capsule is not an unconsumed
  // "dltensor", not CUDA memory, of a dtype fuseopt cannot run, or not
  // contiguous (row-major, dense; size-1 dims may have any stride).
  // allow_host: also take CPU memory (the test hook _fuseopt._dlpack_view,
  // which checks the parsing on machines without a GPU).
  Imported(const std::string& input, const pybind11::capsule& capsule, bool allow_host = false);
  ~Imported();
  Imported(const Imported&) = delete;
  Imported& operator=(const Imported&) = delete;

  const RtTensor& view() const { return view_; }
  int device() const { return device_; }

 private:
  DLManagedTensor* managed_ = nullptr;
  RtTensor view_;
  int device_ = -1;
};

// DLPack's dtype for a fuseopt DType; Error for types DLPack cannot carry
// (string, undefined).
DLDataType dl_dtype(DType t);

// A "dltensor" capsule owning `t` (kDLCUDA, device t.device): the block is
// freed when the consumer's tensor is freed, or with the capsule if nobody
// consumed it.
pybind11::capsule export_capsule(DeviceTensor&& t);

}  // namespace fuseopt::pydlpack
