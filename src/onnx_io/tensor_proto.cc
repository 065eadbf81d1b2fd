#include "onnx_io/tensor_proto.h"

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/error.h"
#include "util/mapped_file.h"

namespace fs = std::filesystem;

namespace fuseopt {

namespace {

template <class Src, class Dst>
void copy_field(const Src& src, Tensor& t) {
  FUSE_CHECK(static_cast<int64_t>(src.size()) == t.numel(), "tensor has " << src.size() << " values, shape needs " << t.numel());
  t.bytes.resize(static_cast<size_t>(t.numel()) * sizeof(Dst));  // only once the values are known to be there
  Dst* d = t.data<Dst>();
  int64_t i = 0;
  for (auto v : src) d[i++] = static_cast<Dst>(v);
}

// A decimal byte count of external_data (offset, length); anything else is an
// error naming the tensor (std::stoull would throw a bare "stoull", or wrap "-5").
uint64_t byte_count(const std::string& s, const std::string& who, const std::string& key) {
  const bool digits = !s.empty() && s.size() <= 18 &&
                      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  FUSE_CHECK(digits, who << ": external data " << key << " '" << s << "' is not a byte count");
  return std::stoull(s);
}

// Elements and bytes of a shape, refusing products that overflow (a corrupted
// or hostile file must not wrap around to a small allocation).
uint64_t checked_bytes(const std::vector<int64_t>& dims, size_t elem_size, const std::string& who) {
  constexpr uint64_t kLimit = uint64_t(1) << 62;
  uint64_t n = 1;
  for (int64_t d : dims) {
    FUSE_CHECK(d == 0 || n <= kLimit / static_cast<uint64_t>(d), who << " has shape " << shape_str(dims) << ": too many elements");
    n *= static_cast<uint64_t>(d);
  }
  FUSE_CHECK(n <= kLimit / std::max<size_t>(elem_size, 1), who << " has shape " << shape_str(dims) << ": too many bytes");
  return n * elem_size;
}

void read_external(const onnx::TensorProto& p, const std::string& base_dir, const std::string& label, Tensor& t,
                   uint64_t need, ExternalFiles* files) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  std::string who = label + ": initializer '" + p.name() + "'";
  for (const auto& e : p.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset = byte_count(e.value(), who, "offset");
    else if (e.key() == "length") length = static_cast<int64_t>(byte_count(e.value(), who, "length"));
  }
  FUSE_CHECK(!location.empty(), who << " has external data without a location");
  fs::path loc(location);
  FUSE_CHECK(!loc.is_absolute(), who << ": external data location '" << location << "' is absolute; only paths inside the model's folder are allowed");
  for (const auto& part : loc)
    FUSE_CHECK(part != "..", who << ": external data location '" << location << "' escapes the model's folder");
  const std::string full = (fs::path(base_dir) / loc).lexically_normal().string();
  std::shared_ptr<MappedFile> own;
  std::shared_ptr<MappedFile>& file = files ? files->by_path[full] : own;
  if (!file) {
    std::error_code ec;
    FUSE_CHECK(fs::is_regular_file(full, ec), who << ": external data file '" << full << "' is missing or not a regular file");
    try {
      file = MappedFile::open(full);
    } catch (const Error&) {
      throw Error(who + ": cannot open external data file '" + full + "'");
    }
  }
  FUSE_CHECK(length < 0 || static_cast<uint64_t>(length) == need,
             who << ": external data length " << length << " does not match its shape (" << need << " bytes)");
  FUSE_CHECK(offset <= file->size() && need <= file->size() - offset,
             who << ": external data file '" << full << "' is too short (truncated?)");
  if (need >= (files ? files->map_min_bytes : map_external_min_bytes())) {
    t.bytes = TensorBytes::view(file->map(offset, static_cast<size_t>(need)));  // read-only, never copied
    return;
  }
  t.bytes.resize(need);  // only once the file is known to hold it
  for (uint64_t done = 0; done < need;) {
    ssize_t r = ::pread(file->fd(), t.bytes.data() + done, need - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    FUSE_CHECK(r > 0, who << ": reading external data from '" << full << "' failed");
    done += static_cast<uint64_t>(r);
  }
}

}  // namespace

size_t map_external_min_bytes() {
  static const size_t n = [] {
    const char* e = std::getenv("FUSEOPT_MAP_MIN_BYTES");
    return e && *e ? static_cast<size_t>(std::strtoull(e, nullptr, 10)) : kMapExternalMinBytes;
  }();
  return n;
}

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& label,
                         ExternalFiles* files) {
  DType dt = static_cast<DType>(p.data_type());
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  for (int64_t d : dims)
    FUSE_CHECK(d >= 0, label << ": tensor '" << p.name() << "' has a negative dimension");
  Tensor t;
  t.dtype = dt;
  t.dims = dims;
  if (dt == DType::String) {
    t.strings.assign(p.string_data().begin(), p.string_data().end());
    return t;
  }
  FUSE_CHECK(dtype_size(dt) > 0, label << ": tensor '" << p.name() << "' has unsupported data type " << p.data_type());
  const uint64_t need = checked_bytes(dims, dtype_size(dt), label + ": tensor '" + p.name() + "'");
  try {
    if (p.data_location() == onnx::TensorProto::EXTERNAL) {
      read_external(p, base_dir, label, t, need, files);
    } else if (p.has_raw_data()) {
      FUSE_CHECK(p.raw_data().size() == need, "raw data is " << p.raw_data().size() << " bytes, shape needs " << need);
      t.bytes.resize(need);
      if (need) std::memcpy(t.bytes.data(), p.raw_data().data(), need);  // an empty vector's data() may be null
    } else {
      switch (dt) {
        case DType::Float: copy_field<decltype(p.float_data()), float>(p.float_data(), t); break;
        case DType::Double: copy_field<decltype(p.double_data()), double>(p.double_data(), t); break;
        case DType::Int64: copy_field<decltype(p.int64_data()), int64_t>(p.int64_data(), t); break;
        case DType::UInt32: case DType::UInt64:
          if (dt == DType::UInt32) copy_field<decltype(p.uint64_data()), uint32_t>(p.uint64_data(), t);
          else copy_field<decltype(p.uint64_data()), uint64_t>(p.uint64_data(), t);
          break;
        case DType::Int32: copy_field<decltype(p.int32_data()), int32_t>(p.int32_data(), t); break;
        case DType::Int16: copy_field<decltype(p.int32_data()), int16_t>(p.int32_data(), t); break;
        case DType::Int8: copy_field<decltype(p.int32_data()), int8_t>(p.int32_data(), t); break;
        case DType::UInt16: case DType::Float16: case DType::BFloat16:
          copy_field<decltype(p.int32_data()), uint16_t>(p.int32_data(), t); break;
        case DType::UInt8: case DType::Bool: copy_field<decltype(p.int32_data()), uint8_t>(p.int32_data(), t); break;
        default: throw Error("unsupported data type");
      }
    }
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(label, 0) == 0 && !label.empty()) throw;
    throw Error((label.empty() ? std::string() : label + ": ") + "tensor '" + p.name() + "': " + e.what());
  }
  return t;
}

void tensor_to_proto_header(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  if (!name.empty()) p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) p->add_dims(d);
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  tensor_to_proto_header(t, name, p);
  if (t.dtype == DType::String) {
    for (const auto& s : t.strings) p->add_string_data(s);
    return;
  }
  p->set_raw_data(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

}  // namespace fuseopt
