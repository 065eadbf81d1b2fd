// fuseopt._fuseopt: the C++ library seen from Python (pybind11). The public
// API is python/fuseopt/__init__.py; this module does the work and keeps to
// plain types: bytes in, bytes (or a file) out, numpy arrays in and out.
//
// - Every fuseopt::Error (and any other std::exception) becomes
//   fuseopt.Error(RuntimeError) with the CLI's one-line message.
// - The GIL is released while a model is loaded, optimized, compiled into a
//   Session and run; the Python objects are only touched with it held.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/fp16.h"
#include "cli/model_inputs.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnx_io/emit_standard.h"
#include "onnx_io/onnx_io.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/text.h"

namespace py = pybind11;
namespace fs = std::filesystem;
using namespace fuseopt;

namespace {

// ---------------------------------------------------------------- optimize

struct OptimizeArgs {
  std::vector<std::string> passes;  // empty = every pass (unless passes_given)
  bool passes_given = false;        // passes=[] means "none"
  std::vector<std::string> disable;
  bool approximate_gelu = false;
  int max_iterations = 10;
  std::string emit = "fuseopt";  // output form, as fuseopt --emit
  std::vector<std::string> input_shapes;  // "NAME=DIMS" specs, as fuseopt --input-shape
  bool fp16 = false, keep_io_types = false;  // as fuseopt --fp16 / --keep-io-types
  // Optimized weights above this come back through a file with external data
  // (tests lower it to exercise that path on a small model).
  size_t external_data_over = kAutoExternalDataBytes;
};

PassManagerOptions manager_options(const OptimizeArgs& a) {
  FUSE_CHECK(a.max_iterations >= 1, "max_iterations must be at least 1");
  FUSE_CHECK(!a.keep_io_types || a.fp16, "keep_io_types only applies with fp16=True");
  PassManagerOptions pmo;
  for (const auto& p : a.passes)
    for (auto& n : split_pass_list(p)) pmo.only.push_back(std::move(n));
  if (a.passes_given && pmo.only.empty()) pmo.only = {"none"};
  for (const auto& p : a.disable)
    for (auto& n : split_pass_list(p)) pmo.disabled.push_back(std::move(n));
  pmo.max_iterations = a.max_iterations;
  pmo.pass_options.approximate_gelu = a.approximate_gelu;
  return pmo;
}

// What optimize() hands back: the model as bytes, or (weights over what one
// protobuf can hold) the path of a model saved with external data in
// `tmp_dir`, which the Python side loads and then deletes.
struct Optimized {
  std::string bytes;
  std::string path;
  std::shared_ptr<FusionReport> report;
};

Optimized optimize_graph(Graph& g, const std::string& label, const OptimizeArgs& a, const std::string& tmp_dir) {
  PassManager pm(manager_options(a));
  EmitOptions eo;
  eo.mode = parse_emit_mode(a.emit);
  if (!a.input_shapes.empty())  // bad names and impossible shapes fail here, before any pass
    cli::specialize_input_shapes(g, cli::parse_shape_flags(g, a.input_shapes, "input_shapes"));
  auto report = std::make_shared<FusionReport>();
  report->set_model(label, "");
  try {
    pm.run(g, *report);
    apply_emit(g, eo, report.get());
    if (a.fp16) {
      cli::Fp16Options fo;
      fo.keep_io_types = a.keep_io_types;
      cli::convert_to_fp16(g, fo);
    }
  } catch (const Error& e) {
    throw Error(label + ": " + e.what());
  }
  Optimized out;
  out.report = report;
  size_t weights = 0;
  for (const Value* v : g.initializers) weights += v->const_data->bytes.size();
  if (weights > a.external_data_over) {
    FUSE_CHECK(!tmp_dir.empty() && fs::is_directory(tmp_dir),
               label << ": the optimized weights need external data but no temporary folder was given");
    out.path = (fs::path(tmp_dir) / "optimized.onnx").string();
    SaveOptions so;
    so.external = SaveOptions::External::Always;
    save_model(g, out.path, so);
  } else {
    out.bytes = serialize_model(g);
  }
  return out;
}

py::tuple to_python(Optimized&& o) {
  py::object bytes = o.path.empty() ? py::object(py::bytes(o.bytes)) : py::object(py::none());
  py::object path = o.path.empty() ? py::object(py::none()) : py::object(py::str(o.path));
  return py::make_tuple(bytes, path, o.report);
}

py::tuple optimize_path(const std::string& path, const OptimizeArgs& a, const std::string& tmp_dir) {
  Optimized o;
  {
    py::gil_scoped_release nogil;
    PassManager check(manager_options(a));  // unknown pass names and emit modes fail before any I/O,
    parse_emit_mode(a.emit);                 // as in the CLI
    auto g = load_model(path);
    o = optimize_graph(*g, path, a, tmp_dir);
  }
  return to_python(std::move(o));
}

py::tuple optimize_bytes(const py::bytes& data, const std::string& label, const std::string& base_dir,
                         const OptimizeArgs& a, const std::string& tmp_dir) {
  std::string bytes = data;  // one copy, taken with the GIL held
  Optimized o;
  {
    py::gil_scoped_release nogil;
    PassManager check(manager_options(a));
    parse_emit_mode(a.emit);
    FUSE_CHECK(!bytes.empty(), label << ": empty model");
    auto g = load_model_from_bytes(bytes, base_dir, label);
    bytes.clear();
    bytes.shrink_to_fit();
    o = optimize_graph(*g, label, a, tmp_dir);
  }
  return to_python(std::move(o));
}

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
            int threads) {
    std::string bytes = data;
    SessionOptions so;
    so.backend = parse_backend(backend);
    so.precision = parse_precision(precision);
    so.profile = profile;
    so.cuda_graphs = cuda_graphs;
    so.threads = threads;
    FUSE_CHECK(threads >= 0, "threads must be 0 (all cores) or more");
    py::gil_scoped_release nogil;
    if (bytes.empty()) {
      graph_ = load_model(path);
      label_ = path;
    } else {
      graph_ = load_model_from_bytes(bytes, base_dir, label);
      label_ = label;
    }
    bytes.clear();
    bytes.shrink_to_fit();
    session_ = std::make_unique<Session>(*graph_, so);
  }

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

  py::list run(const py::object& output_names, const py::dict& feeds) {
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
    std::vector<Tensor> outs;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // released before the GIL is taken back
      outs = session_->run(inputs);
    }
    py::list result;
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

PYBIND11_MODULE(_fuseopt, m) {
  m.doc() = "fuseopt's C++ library (use the `fuseopt` package, not this module)";

  // Library warnings go to stderr as the CLIs print them.
  if (!spdlog::get("fuseopt")) {
    auto log = spdlog::stderr_color_mt("fuseopt");
    spdlog::set_default_logger(log);
    spdlog::set_pattern("fuseopt: %l: %v");
    spdlog::set_level(spdlog::level::warn);
  }

  // Never destroyed: it must outlive every call, interpreter shutdown included.
  static auto* error = new py::exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error->ptr(), printable_line(e.what()).c_str());
    } catch (const std::bad_alloc&) {
      throw;  // pybind11 turns it into MemoryError
    } catch (const py::error_already_set&) {
      throw;
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::exception& e) {
      PyErr_SetString(error->ptr(), printable_line(e.what()).c_str());
    }
  });

  py::class_<OptimizeArgs>(m, "OptimizeArgs")
      .def(py::init<>())
      .def_readwrite("passes", &OptimizeArgs::passes)
      .def_readwrite("passes_given", &OptimizeArgs::passes_given)
      .def_readwrite("disable", &OptimizeArgs::disable)
      .def_readwrite("approximate_gelu", &OptimizeArgs::approximate_gelu)
      .def_readwrite("max_iterations", &OptimizeArgs::max_iterations)
      .def_readwrite("external_data_over", &OptimizeArgs::external_data_over)
      .def_readwrite("emit", &OptimizeArgs::emit)
      .def_readwrite("input_shapes", &OptimizeArgs::input_shapes)
      .def_readwrite("fp16", &OptimizeArgs::fp16)
      .def_readwrite("keep_io_types", &OptimizeArgs::keep_io_types);

  py::class_<PatternStats>(m, "PatternStats")
      .def_readonly("name", &PatternStats::pattern)
      .def_readonly("matched", &PatternStats::matched)
      .def_readonly("rejected", &PatternStats::rejected)
      .def_readonly("reasons", &PatternStats::reasons)
      .def("__repr__", [](const PatternStats& p) {
        return "PatternStats(name='" + p.pattern + "', matched=" + std::to_string(p.matched) +
               ", rejected=" + std::to_string(p.rejected) + ")";
      });

  py::class_<PassStats>(m, "PassStats")
      .def_readonly("name", &PassStats::pass)
      .def_readonly("category", &PassStats::category)
      .def_readonly("runs", &PassStats::runs)
      .def_readonly("rewrites", &PassStats::rewrites)
      .def_property_readonly("nodes_created", [](const PassStats& p) { return p.changes.nodes_created; })
      .def_property_readonly("nodes_erased", [](const PassStats& p) { return p.changes.nodes_erased; })
      .def_property_readonly("constants_added", [](const PassStats& p) { return p.changes.constants_added; })
      .def_property_readonly("constants_removed", [](const PassStats& p) { return p.changes.constants_removed; })
      .def_readonly("millis", &PassStats::millis)
      .def("__repr__", [](const PassStats& p) {
        return "PassStats(name='" + p.pass + "', category='" + p.category + "', rewrites=" +
               std::to_string(p.rewrites) + ")";
      });

  py::class_<EmitStats>(m, "EmitStats")
      .def_readonly("op", &EmitStats::op)
      .def_readonly("standard_as", &EmitStats::standard_as)
      .def_readonly("standard", &EmitStats::standard)
      .def_readonly("fuseopt", &EmitStats::fuseopt)
      .def_readonly("reasons", &EmitStats::reasons)
      .def("__repr__", [](const EmitStats& e) {
        return "EmitStats(op='" + e.op + "', standard_as='" + e.standard_as + "', standard=" +
               std::to_string(e.standard) + ", fuseopt=" + std::to_string(e.fuseopt) + ")";
      });

  py::class_<FusionReport, std::shared_ptr<FusionReport>>(m, "Report",
                                                          "What optimize() did: op counts, passes, fusions")
      .def_property_readonly("nodes_before", &FusionReport::nodes_before)
      .def_property_readonly("nodes_after", &FusionReport::nodes_after)
      .def_property_readonly("ops_before", &FusionReport::ops_before)
      .def_property_readonly("ops_after", &FusionReport::ops_after)
      .def_property_readonly("iterations", &FusionReport::iterations)
      .def_property_readonly("fixed_point", &FusionReport::fixed_point)
      .def_property_readonly("patterns", &FusionReport::patterns, "per fusion pattern: matched, rejected, reasons")
      .def_property_readonly("passes", &FusionReport::passes, "per pass: runs, rewrites, changes, time")
      .def_property_readonly("emit_mode", &FusionReport::emit_mode, "'' (fuseopt form) or 'standard'")
      .def_property_readonly("emit_opset_before", &FusionReport::emit_opset_before)
      .def_property_readonly("emit_opset_after", &FusionReport::emit_opset_after)
      .def_property_readonly("emit_ops", &FusionReport::emit_ops,
                             "per fuseopt op: written as standard_as (standard nodes), kept (fuseopt), reasons")
      .def_property_readonly("emit_notes", &FusionReport::emit_notes)
      .def_property_readonly("matched",
                             [](const FusionReport& r) {
                               std::map<std::string, int> out;
                               for (const auto& p : r.patterns()) out[p.pattern] = p.matched;
                               return out;
                             })
      .def_property_readonly("rejected",
                             [](const FusionReport& r) {
                               std::map<std::string, std::vector<std::string>> out;
                               for (const auto& p : r.patterns())
                                 if (!p.reasons.empty()) out[p.pattern] = p.reasons;
                               return out;
                             })
      .def(
          "pattern",
          [](const FusionReport& r, const std::string& name) -> py::object {
            const PatternStats* p = r.pattern(name);
            return p ? py::cast(*p) : py::object(py::none());
          },
          py::arg("name"))
      .def("to_json", &FusionReport::to_json, "the report as fuseopt --report writes it")
      .def("to_table", &FusionReport::to_table, py::arg("verbose") = false,
           "the table fuseopt prints (verbose: every rejection reason)")
      .def("__str__", [](const FusionReport& r) { return r.to_table(false); })
      .def("__repr__", [](const FusionReport& r) {
        int matched = 0;
        for (const auto& p : r.patterns()) matched += p.matched;
        return "<fuseopt.Report nodes " + std::to_string(r.nodes_before()) + " -> " +
               std::to_string(r.nodes_after()) + ", " + std::to_string(matched) + " fusions>";
      });

  m.def("optimize_path", &optimize_path, py::arg("path"), py::arg("args"), py::arg("tmp_dir"));
  m.def("optimize_bytes", &optimize_bytes, py::arg("data"), py::arg("label"), py::arg("base_dir"), py::arg("args"),
        py::arg("tmp_dir"));
  m.def("list_passes", [] {
    std::vector<py::dict> out;
    for (const PassInfo* p : registered_passes()) {
      py::dict d;
      d["name"] = p->name;
      d["category"] = category_name(p->category);
      d["order"] = p->order;
      d["description"] = p->description;
      out.push_back(d);
    }
    return out;
  });
  m.def("cuda_available", [] {
    std::string why;
    const bool ok = backend_available(Backend::CUDA, &why);
    return py::make_tuple(ok, why);
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
                    const std::string&, bool, bool, int>(),
           py::arg("path"), py::arg("data"), py::arg("label"), py::arg("base_dir"), py::arg("backend"),
           py::arg("precision"), py::arg("profile"), py::arg("cuda_graphs"), py::arg("threads"))
      .def("inputs", &PySession::inputs)
      .def("outputs", &PySession::outputs)
      .def("run", &PySession::run, py::arg("output_names"), py::arg("feeds"))
      .def("profile", &PySession::profile)
      .def("reset_profile", &PySession::reset_profile)
      .def_property_readonly("backend", &PySession::backend)
      .def_property_readonly("precision", &PySession::precision)
      .def_property_readonly("device", &PySession::device)
      .def_property_readonly("label", &PySession::label);
}
