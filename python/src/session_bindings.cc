// fuseopt._fuseopt's Session side: NodeArg, Session (InferenceSession's
// engine), numpy arrays in and out, CUDA DLPack capsules in and out
// (dlpack.h). The GIL is released while the Session is built and runs.
#include "session_bindings.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlpack.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnx_io/onnx_io.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "util/error.h"

namespace py = pybind11;
using namespace fuseopt;

namespace {

// ----------------------------------------------------------------- tensors

std::string type_string(DType t) {
  switch (t) {
    case DType::Float: return "tensor(float)";
    case DType::UInt8: return "tensor(uint8)";
    case DType::Int8: return "tensor(int8)";
    case DType::UInt16: return "tensor(uint16)";
    case DType::Int16: return "tensor(int16)";
    case DType::Int32: return "tensor(int32)";
    case DType::Int64: return "tensor(int64)";
    case DType::String: return "tensor(string)";
    case DType::Bool: return "tensor(bool)";
    case DType::Float16: return "tensor(float16)";
    case DType::Double: return "tensor(double)";
    case DType::UInt32: return "tensor(uint32)";
    case DType::UInt64: return "tensor(uint64)";
    case DType::BFloat16: return "tensor(bfloat16)";
    default: return "tensor(undefined)";
  }
}

// numpy dtype -> DType by kind and size; bfloat16 (ml_dtypes) by name.
DType dtype_of(const py::dtype& dt, const std::string& input) {
  // Read through Python attributes: pybind11 before 2.12 reads the
  // descriptor struct with NumPy 1's layout, which NumPy 2 changed.
  const std::string kind_s = py::str(dt.attr("kind"));
  const char kind = kind_s.empty() ? '?' : kind_s[0];
  const ssize_t size = py::cast<ssize_t>(dt.attr("itemsize"));
  const std::string name = py::str(dt.attr("name"));
  if (name == "bfloat16") return DType::BFloat16;
  switch (kind) {
    case 'f':
      if (size == 4) return DType::Float;
      if (size == 8) return DType::Double;
      if (size == 2) return DType::Float16;
      break;
    case 'i':
      if (size == 1) return DType::Int8;
      if (size == 2) return DType::Int16;
      if (size == 4) return DType::Int32;
      if (size == 8) return DType::Int64;
      break;
    case 'u':
      if (size == 1) return DType::UInt8;
      if (size == 2) return DType::UInt16;
      if (size == 4) return DType::UInt32;
      if (size == 8) return DType::UInt64;
      break;
    case 'b':
      if (size == 1) return DType::Bool;
      break;
    default: break;
  }
  throw Error("input '" + input + "': numpy dtype " + name + " is not a tensor type fuseopt can run");
}

// numpy dtype of an output (bfloat16 comes back as its bits, uint16; the
// Python side views it as ml_dtypes.bfloat16 when that is installed).
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Float: return py::dtype::of<float>();
    case DType::Double: return py::dtype::of<double>();
    case DType::Float16: return py::dtype("float16");
    case DType::BFloat16: return py::dtype::of<uint16_t>();
    case DType::Int8: return py::dtype::of<int8_t>();
    case DType::Int16: return py::dtype::of<int16_t>();
    case DType::Int32: return py::dtype::of<int32_t>();
    case DType::Int64: return py::dtype::of<int64_t>();
    case DType::UInt8: return py::dtype::of<uint8_t>();
    case DType::UInt16: return py::dtype::of<uint16_t>();
    case DType::UInt32: return py::dtype::of<uint32_t>();
    case DType::UInt64: return py::dtype::of<uint64_t>();
    case DType::Bool: return py::dtype::of<bool>();
    default: throw Error(std::string("outputs of type ") + dtype_name(t) + " cannot be returned as numpy arrays");
  }
}

// A host Tensor from a C-contiguous, native-order numpy array (the Python
// side makes it one); the bytes are copied once.
Tensor tensor_from_array(const std::string& name, const py::array& a) {
  FUSE_CHECK(a.flags() & py::array::c_style, "input '" << name << "': the array is not C-contiguous");
  Tensor t;
  t.dtype = dtype_of(a.dtype(), name);
  for (ssize_t i = 0; i < a.ndim(); ++i) t.dims.push_back(static_cast<int64_t>(a.shape(i)));
  const size_t n = py::cast<size_t>(a.attr("nbytes"));  // not a.nbytes(): see dtype_of
  t.bytes.resize(n);
  if (n) std::memcpy(t.bytes.data(), a.data(), n);
  return t;
}

// The output Tensor moves into the array's owner: no copy.
py::array array_from_tensor(Tensor&& t) {
  auto* owned = new Tensor(std::move(t));
  py::capsule free_it(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<ssize_t> shape(owned->dims.begin(), owned->dims.end());
  const ssize_t item = static_cast<ssize_t>(dtype_size(owned->dtype));
  std::vector<ssize_t> strides(shape.size());
  ssize_t s = item;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<ssize_t>(shape[i], 1);
  }
  return py::array(numpy_dtype(owned->dtype), shape, strides, owned->bytes.data(), free_it);
}

// ----------------------------------------------------------------- session

struct ValueInfo {
  std::string name;
  py::object shape;  // list of int / str / None, or None when the rank is unknown
  std::string type;
};

ValueInfo value_info(const Value* v) {
  ValueInfo vi;
  vi.name = v->name;
  vi.type = type_string(v->dtype);
  if (!v->shape) {
    vi.shape = py::none();
  } else {
    py::list dims;
    for (const Dim& d : *v->shape) {
      if (d.known())
        dims.append(py::int_(d.value));
      else if (!d.symbol.empty())
        dims.append(py::str(d.symbol));
      else
        dims.append(py::none());
    }
    vi.shape = dims;
  }
  return vi;
}

Backend parse_backend(const std::string& s) {
  std::string why;
  if (s.empty()) return backend_available(Backend::CUDA, &why) ? Backend::CUDA : Backend::CPU;
  if (s == "cuda") {
    FUSE_CHECK(backend_available(Backend::CUDA, &why), "backend cuda: " << why);
    return Backend::CUDA;
  }
  if (s == "cpu") return Backend::CPU;
  throw Error("backend " + s + ": expected cuda or cpu");
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "tf32") return Precision::TF32;
  if (s == "fp16") return Precision::FP16;
  if (s == "bf16") return Precision::BF16;
  throw Error("precision " + s + ": expected fp32, tf32, fp16 or bf16");
}

class PySession {
 public:
  // `bytes` empty: load `path`. Otherwise a serialized model whose external
  // data (if any) lies relative to `base_dir`.
  PySession(const std::string& path, const py::bytes& data, const std::string& label, const std::string& base_dir,
            const std::string& backend, const std::string& precision, bool profile, bool cuda_graphs,
            int threads, bool validate) {
    std::string bytes = data;
    SessionOptions so;
    so.backend = parse_backend(backend);
    so.precision = parse_precision(precision);
    so.profile = profile;
    so.cuda_graphs = cuda_graphs;
    so.threads = threads;
    FUSE_CHECK(threads >= 0, "threads must be 0 (all cores) or more");
    LoadOptions lo;
    lo.validate = validate;  // false: as fuserun --no-validate
    py::gil_scoped_release nogil;
    if (bytes.empty()) {
      graph_ = load_model(path, lo);
      label_ = path;
    } else {
      graph_ = load_model_from_bytes(bytes, base_dir, label, lo);
      label_ = label;
    }
    bytes.clear();
    bytes.shrink_to_fit();
    session_ = std::make_unique<Session>(*graph_, so);
  }

  Session& session() { return *session_; }

  std::vector<ValueInfo> inputs() const {
    std::vector<ValueInfo> out;
    for (const auto& n : session_->input_names()) out.push_back(value_info(graph_->find(n)));
    return out;
  }
  std::vector<ValueInfo> outputs() const {
    std::vector<ValueInfo> out;
    for (const Value* v : graph_->outputs) out.push_back(value_info(v));
    return out;
  }

  // feeds: numpy arrays (copied once into host Tensors). device_feeds: CUDA
  // DLPack capsules, read in place on the device (the Python side asked the
  // producer to order them before the session's stream). device_outputs:
  // return "dltensor" capsules owning device memory instead of numpy arrays.
  py::list run(const py::object& output_names, const py::dict& feeds, const py::dict& device_feeds,
               bool device_outputs) {
    const std::vector<std::string> all = session_->output_names();
    std::vector<size_t> pick;
    if (output_names.is_none()) {
      for (size_t i = 0; i < all.size(); ++i) pick.push_back(i);
    } else {
      for (const auto& o : output_names) {
        const std::string name = py::str(o);
        auto it = std::find(all.begin(), all.end(), name);
        if (it == all.end()) {
          std::string list;
          for (const auto& k : all) list += (list.empty() ? "" : ", ") + k;
          throw Error("unknown output '" + name + "' (the model's outputs are: " + list + ")");
        }
        pick.push_back(static_cast<size_t>(it - all.begin()));
      }
    }
    std::map<std::string, Tensor> inputs;
    for (const auto& [k, v] : feeds) {
      const std::string name = py::str(k);
      if (!py::isinstance<py::array>(v)) throw py::type_error("input '" + name + "': expected a numpy array");
      inputs.emplace(name, tensor_from_array(name, py::reinterpret_borrow<py::array>(v)));
    }
    // Released (producer deleters run) when this returns, after the run.
    std::vector<std::unique_ptr<pydlpack::Imported>> imported;
    std::map<std::string, RtTensor> views;
    for (const auto& [k, v] : device_feeds) {
      const std::string name = py::str(k);
      FUSE_CHECK(session_->options().backend == Backend::CUDA,
                 "input '" << name << "': a CUDA tensor cannot feed a session on the "
                           << backend_name(session_->options().backend)
                           << " backend; pass tensor.cpu() or create the session with backend='cuda'");
      if (!py::isinstance<py::capsule>(v)) throw py::type_error("input '" + name + "': expected a DLPack capsule");
      imported.push_back(std::make_unique<pydlpack::Imported>(name, py::reinterpret_borrow<py::capsule>(v)));
      const int dev = session_->backend().device_ordinal();
      FUSE_CHECK(imported.back()->device() == dev, "input '" << name << "' is on cuda:" << imported.back()->device()
                                                             << " but the session runs on cuda:" << dev
                                                             << "; move it there (torch: x.to('cuda:" << dev << "'))");
      views.emplace(name, imported.back()->view());
    }
    FUSE_CHECK(!device_outputs || session_->options().backend == Backend::CUDA,
               "output_device cuda: the session runs on the " << backend_name(session_->options().backend)
                                                             << " backend");
    if (!views.empty() || device_outputs)
      for (const auto& [name, t] : inputs)
        views.emplace(name, RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU});
    std::vector<Tensor> outs;
    std::vector<DeviceTensor> dev_outs;
    std::vector<DeviceTensor> repeats;  // an output asked for twice: a second device copy
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // released before the GIL is taken back
      if (device_outputs) {
        dev_outs = session_->run_device(views);
        repeats = device_repeats(pick, dev_outs);
      } else if (!views.empty()) {
        outs = session_->run_views(views);
      } else {
        outs = session_->run(inputs);
      }
    }
    py::list result;
    if (device_outputs) {
      // (capsule, device, dtype name, shape) each; the Python side wraps them.
      std::vector<bool> given(dev_outs.size(), false);
      size_t r = 0;
      for (size_t i : pick) {
        DeviceTensor t = given[i] ? std::move(repeats.at(r++)) : std::move(dev_outs.at(i));
        given[i] = true;
        const int dev = t.device;
        const std::string dtype = dtype_name(t.dtype);
        py::tuple shape(t.shape.size());
        for (size_t k = 0; k < t.shape.size(); ++k) shape[k] = py::int_(t.shape[k]);
        result.append(py::make_tuple(pydlpack::export_capsule(std::move(t)), dev, dtype, shape));
      }
      return result;
    }
    std::map<size_t, py::array> given;  // an output asked for twice comes back as two arrays
    for (size_t i : pick) {
      auto it = given.find(i);
      if (it != given.end()) {
        result.append(it->second.attr("copy")());
        continue;
      }
      py::array a = array_from_tensor(std::move(outs.at(i)));
      given.emplace(i, a);
      result.append(a);
    }
    return result;
  }

  // Device copies for outputs picked more than once (in pick order), so that
  // each returned tensor owns its memory as the numpy path's arrays do.
  std::vector<DeviceTensor> device_repeats(const std::vector<size_t>& pick, const std::vector<DeviceTensor>& outs) {
    std::vector<DeviceTensor> r;
    std::vector<bool> seen(outs.size(), false);
    BackendImpl& be = session_->backend();
    for (size_t i : pick) {
      if (!seen.at(i)) {
        seen[i] = true;
        continue;
      }
      DeviceTensor c = outs[i];
      const size_t bytes = static_cast<size_t>(shape_numel(c.shape)) * dtype_size(c.dtype);
      c.owner = be.alloc_exported(bytes);
      c.data = c.owner.get();
      be.copy_within(c.data, outs[i].data, bytes);
      r.push_back(std::move(c));
    }
    if (!r.empty()) be.synchronize();
    return r;
  }

  // The session's CUDA stream as an integer (DLPack's `stream` argument);
  // None on the CPU backend.
  py::object stream() {
    void* s = session_->backend().stream();
    if (!s) return py::none();
    return py::int_(reinterpret_cast<uintptr_t>(s));
  }
  int device_ordinal() { return session_->backend().device_ordinal(); }

  py::dict profile() {
    SessionProfile p;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // not while another thread's run() updates it
      p = session_->profile();
    }
    py::dict d;
    d["enabled"] = session_->options().profile;
    d["backend"] = backend_name(session_->options().backend);
    d["runs"] = p.runs;
    d["graph_replays"] = p.graph_replays;
    d["capture_possible"] = p.capture_possible;
    d["capture_disabled_reason"] = p.capture_disabled_reason;
    d["device_to_host_copies"] = p.device_to_host_copies;
    d["device_to_host_bytes"] = p.device_to_host_bytes;
    d["device_to_host_nodes"] = p.device_to_host_nodes;
    d["input_upload_bytes"] = p.input_upload_bytes;
    d["output_download_bytes"] = p.output_download_bytes;
    const double runs = p.runs > 0 ? static_cast<double>(p.runs) : 1.0;
    py::list by_op;
    for (const OpProfile& o : p.by_op_type()) {
      py::dict e;
      e["op"] = o.op;
      e["total_ms"] = o.total_ms;
      e["ms_per_run"] = o.total_ms / runs;
      e["calls"] = o.calls;
      e["nodes"] = o.nodes;
      by_op.append(e);
    }
    d["by_op_type"] = by_op;
    py::list nodes;
    for (const NodeProfile& n : p.nodes_by_time()) {
      py::dict e;
      e["name"] = n.name;
      e["op"] = n.op;
      e["on_host"] = n.on_host;
      e["total_ms"] = n.total_ms;
      e["ms_per_run"] = n.total_ms / runs;
      e["calls"] = n.calls;
      nodes.append(e);
    }
    d["nodes"] = nodes;
    d["peak_bytes"] = session_->peak_bytes();
    d["constant_bytes"] = session_->constant_bytes();
    return d;
  }

  void reset_profile() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    session_->reset_profile();
  }
  std::string backend() const { return backend_name(session_->options().backend); }
  std::string precision() const { return precision_name(session_->options().precision); }
  std::string device() const { return session_->backend().device_name(); }
  const std::string& label() const { return label_; }

 private:
  std::unique_ptr<Graph> graph_;      // declared first: the Session reads it until it is gone
  std::unique_ptr<Session> session_;
  std::string label_;
  std::mutex mu_;  // run() and the profile readers take turns
};

}  // namespace

void fuseopt_bind_session(py::module_& m) {
  // Test hook: parse a DLPack capsule as run() does (CPU memory allowed too),
  // consume it, and say what was read: (dtype, shape, where).
  m.def("_dlpack_view", [](const std::string& name, const py::capsule& cap) {
    pydlpack::Imported im(name, cap, /*allow_host=*/true);
    const RtTensor& v = im.view();
    return py::make_tuple(dtype_name(v.dtype), v.shape, backend_name(v.where));
  });
  py::class_<ValueInfo>(m, "NodeArg")
      .def_readonly("name", &ValueInfo::name)
      .def_readonly("shape", &ValueInfo::shape)
      .def_readonly("type", &ValueInfo::type)
      .def("__repr__", [](const ValueInfo& v) {
        return "NodeArg(name='" + v.name + "', type='" + v.type + "', shape=" + std::string(py::repr(v.shape)) + ")";
      });

  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const py::bytes&, const std::string&, const std::string&, const std::string&,
                    const std::string&, bool, bool, int, bool>(),
           py::arg("path"), py::arg("data"), py::arg("label"), py::arg("base_dir"), py::arg("backend"),
           py::arg("precision"), py::arg("profile"), py::arg("cuda_graphs"), py::arg("threads"),
           py::arg("validate") = true)
      .def("inputs", &PySession::inputs)
      .def("outputs", &PySession::outputs)
      .def("run", &PySession::run, py::arg("output_names"), py::arg("feeds"), py::arg("device_feeds") = py::dict(),
           py::arg("device_outputs") = false)
      .def_property_readonly("stream", &PySession::stream)
      .def_property_readonly("device_ordinal", &PySession::device_ordinal)
      .def("profile", &PySession::profile)
      .def("reset_profile", &PySession::reset_profile)
      .def("hold_kv_cache", [](PySession& s, int64_t capacity) { s.session().hold_kv_cache(capacity); },
           py::arg("capacity"))
      .def("kv_cache_inputs", [](PySession& s) { return s.session().kv_cache_inputs(); })
      .def("kv_cache_length", [](PySession& s) { return s.session().kv_cache_length(); })
      .def("kv_cache_capacity", [](PySession& s) { return s.session().kv_cache_capacity(); })
      .def("set_kv_cache_length", [](PySession& s, int64_t n) { s.session().set_kv_cache_length(n); }, py::arg("length"))
      .def_property_readonly("backend", &PySession::backend)
      .def_property_readonly("precision", &PySession::precision)
      .def_property_readonly("device", &PySession::device)
      .def_property_readonly("label", &PySession::label);
}
