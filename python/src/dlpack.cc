// DLPack import/export for the Python module (dlpack.h says what and why).
#include "dlpack.h"

#include <sstream>
#include <vector>

#include "util/error.h"

namespace py = pybind11;

namespace fuseopt::pydlpack {

namespace {

constexpr const char* kName = "dltensor";
constexpr const char* kUsedName = "used_dltensor";

DType from_dl(const DLDataType& t, const std::string& input) {
  if (t.lanes == 1) {
    switch (t.code) {
      case 0:  // int
        if (t.bits == 8) return DType::Int8;
        if (t.bits == 16) return DType::Int16;
        if (t.bits == 32) return DType::Int32;
        if (t.bits == 64) return DType::Int64;
        break;
      case 1:  // uint
        if (t.bits == 8) return DType::UInt8;
        if (t.bits == 16) return DType::UInt16;
        if (t.bits == 32) return DType::UInt32;
        if (t.bits == 64) return DType::UInt64;
        break;
      case 2:  // float
        if (t.bits == 16) return DType::Float16;
        if (t.bits == 32) return DType::Float;
        if (t.bits == 64) return DType::Double;
        break;
      case 4:  // bfloat
        if (t.bits == 16) return DType::BFloat16;
        break;
      case 6:  // bool
        if (t.bits == 8) return DType::Bool;
        break;
      default: break;
    }
  }
  throw Error("input '" + input + "': DLPack dtype (code " + std::to_string(t.code) + ", bits " +
              std::to_string(t.bits) + ", lanes " + std::to_string(t.lanes) +
              ") is not a tensor type fuseopt can run");
}

// What the exported capsule's DLManagedTensor points at.
struct ExportCtx {
  DeviceTensor t;
  std::vector<int64_t> shape, strides;
};

void delete_exported(DLManagedTensor* self) {
  delete static_cast<ExportCtx*>(self->manager_ctx);  // frees the device block (after a device sync)
  delete self;
}

// An exported capsule nobody consumed: free it. (A consumer renames it to
// "used_dltensor" and calls the deleter itself.)
void capsule_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, kUsedName)) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);  // may run while an exception is pending
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kName));
  if (m && m->deleter) m->deleter(m);
  if (!m) PyErr_Clear();
  PyErr_Restore(type, value, trace);
}

std::string dims_str(const int64_t* v, int32_t n) {
  std::ostringstream os;
  os << "[";
  for (int32_t i = 0; i < n; ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

}  // namespace

Imported::Imported(const std::string& input, const py::capsule& capsule, bool allow_host) {
  PyObject* cap = capsule.ptr();
  const char* name = PyCapsule_GetName(cap);
  if (!name) PyErr_Clear();
  FUSE_CHECK(name && std::string(name) == kName,
             "input '" << input << "': __dlpack__() gave a capsule named '" << (name ? name : "")
                       << "', not an unconsumed 'dltensor' (each DLPack capsule can be read once)");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kName));
  if (!m) {
    PyErr_Clear();
    throw Error("input '" + input + "': the DLPack capsule holds no tensor");
  }
  // Checked first and taken over last: a refused capsule stays the
  // producer's, whose capsule destructor frees it.
  const DLTensor& t = m->dl_tensor;
  const bool host = allow_host && t.device.device_type == kDLCPU;
  FUSE_CHECK(t.device.device_type == kDLCUDA || host,
             "input '" << input << "': DLPack device type " << t.device.device_type << " is not CUDA memory (2)");
  device_ = t.device.device_id;
  view_.dtype = from_dl(t.dtype, input);
  FUSE_CHECK(t.ndim >= 0 && (t.ndim == 0 || t.shape), "input '" << input << "': the DLPack tensor has no shape");
  view_.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) {
    // Dense row-major only; a size-1 dim's stride does not matter (frameworks write any value there).
    int64_t want = 1;
    bool dense = true;
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != want) dense = false;
      want *= t.shape[i];
    }
    FUSE_CHECK(dense || shape_numel(view_.shape) == 0,
               "input '" << input << "': the DLPack tensor is not contiguous (shape " << dims_str(t.shape, t.ndim)
                         << ", strides " << dims_str(t.strides, t.ndim)
                         << " in elements); pass a contiguous one (torch: x.contiguous())");
  }
  view_.data = t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr;
  view_.where = host ? Backend::CPU : Backend::CUDA;
  // Ours from here on: the capsule's destructor leaves it alone.
  PyCapsule_SetName(cap, kUsedName);
  managed_ = m;
}

Imported::~Imported() {
  if (managed_ && managed_->deleter) managed_->deleter(managed_);
}

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::Int8: return {0, 8, 1};
    case DType::Int16: return {0, 16, 1};
    case DType::Int32: return {0, 32, 1};
    case DType::Int64: return {0, 64, 1};
    case DType::UInt8: return {1, 8, 1};
    case DType::UInt16: return {1, 16, 1};
    case DType::UInt32: return {1, 32, 1};
    case DType::UInt64: return {1, 64, 1};
    case DType::Float16: return {2, 16, 1};
    case DType::Float: return {2, 32, 1};
    case DType::Double: return {2, 64, 1};
    case DType::BFloat16: return {4, 16, 1};
    case DType::Bool: return {6, 8, 1};
    default: throw Error(std::string("outputs of type ") + dtype_name(t) + " cannot be returned through DLPack");
  }
}

py::capsule export_capsule(DeviceTensor&& t) {
  const DLDataType dt = dl_dtype(t.dtype);
  auto ctx = std::make_unique<ExportCtx>();
  ctx->t = std::move(t);
  ctx->shape = ctx->t.shape;
  // Explicit row-major strides (newer DLPack readers prefer them to NULL).
  ctx->strides.resize(ctx->shape.size());
  int64_t s = 1;
  for (size_t i = ctx->shape.size(); i-- > 0;) {
    ctx->strides[i] = s;
    // A present of a held KV cache (DeviceTensor::seq_capacity): its rows of the cache block.
    s *= (i == 2 && ctx->t.seq_capacity > 0 && ctx->shape.size() == 4) ? ctx->t.seq_capacity : ctx->shape[i];
  }
  auto m = std::make_unique<DLManagedTensor>();
  m->dl_tensor.data = ctx->t.data;
  m->dl_tensor.device = DLDevice{kDLCUDA, ctx->t.device};
  m->dl_tensor.ndim = static_cast<int32_t>(ctx->shape.size());
  m->dl_tensor.dtype = dt;
  m->dl_tensor.shape = ctx->shape.data();
  m->dl_tensor.strides = ctx->strides.data();
  m->dl_tensor.byte_offset = 0;
  m->manager_ctx = ctx.get();
  m->deleter = delete_exported;
  PyObject* cap = PyCapsule_New(m.get(), kName, capsule_destructor);
  if (!cap) throw py::error_already_set();
  ctx.release();
  m.release();
  return py::reinterpret_steal<py::capsule>(cap);
}

}  // namespace fuseopt::pydlpack
