// fuseopt._fuseopt: the C++ library seen from Python (pybind11). The public
// API is python/fuseopt/__init__.py; this module does the work and keeps to
// plain types: bytes in, bytes (or a file) out, numpy arrays in and out, and
// DLPack capsules for CUDA tensors (dlpack.h).
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
#include "onnx_io/op_schemas.h"
#include "onnx_io/validate_model.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/text.h"
#include "session_bindings.h"

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
  bool validate = true;                      // false: as fuseopt --no-validate
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
  pmo.check_shapes = a.validate;
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
    LoadOptions lo;
    lo.validate = a.validate;
    auto g = load_model(path, lo);
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
    LoadOptions lo;
    lo.validate = a.validate;
    auto g = load_model_from_bytes(bytes, base_dir, label, lo);
    bytes.clear();
    bytes.shrink_to_fit();
    o = optimize_graph(*g, label, a, tmp_dir);
  }
  return to_python(std::move(o));
}

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
      .def_readwrite("keep_io_types", &OptimizeArgs::keep_io_types)
      .def_readwrite("validate", &OptimizeArgs::validate);

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
  // For tests/py/test_schema_validation.py: the signature the load-time
  // validation checks a node of (domain, op) against at `opset` (None when the
  // op does not exist there), and the validation alone on a serialized model.
  m.def("_op_signature", [](const std::string& domain, const std::string& op, int64_t opset) -> py::object {
    const OpSignature* s = canonical_domain(domain) == "fuseopt" ? fuseopt_op_signature(op)
                                                                 : onnx_op_signature(domain, op, opset);
    if (!s) return py::none();
    auto formals = [](const std::vector<OpSignature::Formal>& fs) {
      py::list out;
      for (const auto& f : fs) {
        const char* opt = f.option == OpSignature::Option::Single     ? "single"
                          : f.option == OpSignature::Option::Optional ? "optional"
                                                                      : "variadic";
        out.append(py::make_tuple(f.name, opt, f.min_arity));
      }
      return out;
    };
    py::dict attrs;
    for (const auto& [name, a] : s->attributes) attrs[py::str(name)] = py::make_tuple(attr_type_name(a.type), a.required);
    py::dict d;
    d["since_version"] = s->since_version;
    d["min_inputs"] = s->min_inputs;
    d["max_inputs"] = s->max_inputs;
    d["min_outputs"] = s->min_outputs;
    d["max_outputs"] = s->max_outputs;
    d["inputs"] = formals(s->inputs);
    d["outputs"] = formals(s->outputs);
    d["attributes"] = attrs;
    d["any_attributes"] = s->any_attributes;
    d["deprecated"] = s->deprecated;
    d["deprecation_warning"] = s->deprecation_warning;
    return d;
  }, py::arg("domain"), py::arg("op"), py::arg("opset"));
  m.def("_op_names", [](const std::string& domain) {
    return canonical_domain(domain) == "fuseopt" ? fuseopt_op_names() : onnx_op_names(domain);
  }, py::arg("domain"));
  m.def("_validate_model", [](const py::bytes& data, const std::string& label) {
    std::string bytes = data;
    py::gil_scoped_release nogil;
    validate_model_bytes(bytes, label);
  }, py::arg("data"), py::arg("label"));
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

  fuseopt_bind_session(m);
}
