#include "cli/model_inputs.h"

#include "ir/sym_expr.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "onnx_io/tensor_proto.h"
#include "util/allocation.h"
#include "util/error.h"

namespace fuseopt::cli {

namespace fs = std::filesystem;

static std::vector<int64_t> parse_dims(const std::string& opt, const std::string& flag, const std::string& text) {
  std::vector<int64_t> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    FUSE_CHECK(!part.empty() && part.find_first_not_of("0123456789") == std::string::npos,
               opt << " " << flag << ": dims must look like 8x128 (got '" << text << "')");
    dims.push_back(std::stoll(part));
  }
  FUSE_CHECK(!dims.empty() || text.empty(), opt << " " << flag << ": no dims");
  return dims;
}

ShapeOverrides parse_shape_flags(const Graph& g, const std::vector<std::string>& flags, const std::string& opt) {
  ShapeOverrides o;
  o.flag = opt;
  std::set<std::string> symbols, inputs;
  for (const Value* v : g.inputs) {
    inputs.insert(v->name);
    if (v->shape)
      for (const Dim& d : *v->shape)
        if (!d.known() && !d.symbol.empty()) symbols.insert(d.symbol);
  }
  for (const std::string& f : flags) {
    auto eq = f.rfind('=');
    FUSE_CHECK(eq != std::string::npos && eq > 0, opt << " " << f << ": expected NAME=DIMS, e.g. input_ids=8x128");
    std::string name = f.substr(0, eq);
    std::vector<int64_t> dims = parse_dims(opt, f, f.substr(eq + 1));
    if (inputs.count(name)) {
      o.inputs[name] = dims;
    } else if (symbols.count(name)) {
      FUSE_CHECK(dims.size() == 1, opt << " " << f << ": '" << name << "' is a symbolic dim and takes one number");
      o.symbols[name] = dims[0];
    } else {
      std::string known;
      for (const auto& n : inputs) known += (known.empty() ? "" : ", ") + n;
      throw Error(opt + " " + f + ": the model has no input or symbolic dim '" + name + "' (inputs: " + known + ")");
    }
  }
  return o;
}

static std::string lower_name(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_cache_input(const Value* v) {
  return lower_name(v->name).find("past") != std::string::npos && v->shape && v->shape->size() >= 3;
}

bool is_cache_output(const Value* v) { return lower_name(v->name).find("present") != std::string::npos; }

bool is_mask_input(const Value* v) {
  return lower_name(v->name).find("mask") != std::string::npos && v->shape && v->shape->size() == 2;
}

// --past N: the cache inputs' sequence axis (rank-2) is N.
static void bind_past(const Graph& g, int64_t past, const std::map<std::string, std::vector<int64_t>>& explicit_shapes,
                      std::map<std::string, int64_t>& bound) {
  int caches = 0;
  for (const Value* v : g.inputs) {
    if (!is_cache_input(v)) continue;
    ++caches;
    const size_t axis = v->shape->size() - 2;
    auto ex = explicit_shapes.find(v->name);
    if (ex != explicit_shapes.end()) {
      FUSE_CHECK(ex->second[axis] == past, "--past " << past << ": --shape gives '" << v->name << "' "
                                                     << shape_str(ex->second) << " (" << ex->second[axis]
                                                     << " cached positions)");
      continue;
    }
    const Dim& d = (*v->shape)[axis];
    if (d.known()) {
      FUSE_CHECK(d.value == past, "--past " << past << ": cache input '" << v->name << "' is declared "
                                            << shape_str(*v->shape) << " with " << d.value << " cached positions");
      continue;
    }
    FUSE_CHECK(!d.symbol.empty(), "--past: cache input '" << v->name << "' has an unnamed sequence dim; give its shape with --shape");
    auto b = bound.find(d.symbol);
    FUSE_CHECK(b == bound.end() || b->second == past,
               "--past " << past << ": '" << d.symbol << "' (the cache length of '" << v->name << "') is already "
                         << b->second);
    bound[d.symbol] = past;
  }
  FUSE_CHECK(caches > 0, "--past: the model has no cache input (an input named like past_key_values.0.key, rank >= 3)");
}

// --past N: a rank-2 mask whose length was free covers the cache and the new
// tokens (N + the sequence length of the first other rank-2 input).
static void size_masks(const Graph& g, int64_t past, std::map<std::string, std::vector<int64_t>>& shapes) {
  int64_t fresh = -1;
  for (const Value* v : g.inputs)
    if (!is_cache_input(v) && !is_mask_input(v) && v->shape && v->shape->size() == 2 && fresh < 0)
      fresh = shapes.at(v->name)[1];
  if (fresh < 0) return;
  for (const Value* v : g.inputs) {
    if (!is_mask_input(v)) continue;
    const Dim& d = (*v->shape)[1];
    if (d.known()) continue;
    // Only a mask dim that no other input shares (a sequence symbol shared with
    // input_ids would make the mask as short as the new tokens).
    bool shared = false;
    for (const Value* u : g.inputs)
      if (u != v && u->shape && !d.symbol.empty())
        for (const Dim& e : *u->shape) shared = shared || (!e.known() && e.symbol == d.symbol);
    if (!shared) shapes[v->name][1] = past + fresh;
  }
}

std::map<std::string, std::vector<int64_t>> resolve_input_shapes(const Graph& g, const ShapeOverrides& o,
                                                                 std::vector<std::string>* defaulted) {
  std::map<std::string, int64_t> bound = o.symbols;
  std::map<std::string, std::vector<int64_t>> shapes;
  // Explicit input shapes bind their symbols first, so other inputs follow them.
  for (const Value* v : g.inputs) {
    auto it = o.inputs.find(v->name);
    if (it == o.inputs.end()) continue;
    const std::vector<int64_t>& dims = it->second;
    if (v->shape) {
      const Shape& s = *v->shape;
      FUSE_CHECK(s.size() == dims.size(), o.flag << " " << v->name << "=" << shape_str(dims) << ": the model declares "
                                                     << shape_str(s) << " (rank " << s.size() << ")");
      for (size_t i = 0; i < s.size(); ++i) {
        FUSE_CHECK(!s[i].known() || s[i].value == dims[i], o.flag << " " << v->name << ": dim " << i << " must be "
                                                                       << s[i].value << " (the model declares "
                                                                       << shape_str(s) << ")");
        if (!s[i].known() && !s[i].symbol.empty()) {
          auto b = bound.find(s[i].symbol);
          FUSE_CHECK(b == bound.end() || b->second == dims[i],
                     o.flag << " " << v->name << ": '" << s[i].symbol << "' is already " << b->second);
          bound[s[i].symbol] = dims[i];
        }
      }
    }
    shapes[v->name] = dims;
  }
  if (o.past >= 0) bind_past(g, o.past, shapes, bound);
  const int64_t seq_default = o.past >= 0 ? 1 : 128;  // one decode step after a cache
  struct Deferred {
    std::string input;
    size_t dim;
    std::string symbol;
    int64_t dflt;
  };
  std::vector<Deferred> deferred;
  for (const Value* v : g.inputs) {
    if (shapes.count(v->name)) continue;
    FUSE_CHECK(v->shape, "input '" << v->name << "' has no declared shape; give it with " << o.flag << " " << v->name << "=DIMS");
    std::vector<int64_t> dims;
    int symbolic_seen = 0;
    for (const Dim& d : *v->shape) {
      if (d.known()) { dims.push_back(d.value); continue; }
      int64_t dflt = symbolic_seen++ == 0 ? 1 : seq_default;  // batch, then sequence
      if (d.symbol.empty()) {
        if (defaulted) defaulted->push_back(v->name + " dim " + std::to_string(dims.size()) + "=" + std::to_string(dflt));
        dims.push_back(dflt);
        continue;
      }
      auto b = bound.find(d.symbol);
      if (b == bound.end()) {
        // A dim written as an expression of other dims ("past_sequence_length + sequence_length"):
        // its value once every input's plain dims are bound (below).
        if (!SymExpr::parse(d.symbol).is_atom()) {
          deferred.push_back({v->name, dims.size(), d.symbol, dflt});
          dims.push_back(dflt);
          continue;
        }
        b = bound.emplace(d.symbol, dflt).first;
        if (defaulted) defaulted->push_back(d.symbol + "=" + std::to_string(dflt));
      }
      dims.push_back(b->second);
    }
    shapes[v->name] = dims;
  }
  for (const Deferred& e : deferred) {
    const std::optional<int64_t> val = SymExpr::parse(e.symbol).evaluate(bound);
    if (val && *val >= 0) {
      shapes[e.input][e.dim] = *val;
      bound.emplace(e.symbol, *val);
    } else {
      bound.emplace(e.symbol, e.dflt);
      if (defaulted) defaulted->push_back(e.symbol + "=" + std::to_string(e.dflt));
    }
  }
  if (o.past >= 0) size_masks(g, o.past, shapes);
  return shapes;
}

// The embedding table size behind a token-id input: a Gather (maybe after a
// Cast) whose data is an initializer and whose indices are this input.
static int64_t vocab_size(const Value* input) {
  std::vector<const Value*> frontier{input};
  for (int depth = 0; depth < 3 && !frontier.empty(); ++depth) {
    std::vector<const Value*> next;
    for (const Value* v : frontier)
      for (const Use& u : v->uses) {
        const Node* n = u.node;
        if (n->is("Gather") && u.index == 1 && n->input(0) && n->input(0)->const_data &&
            !n->input(0)->const_data->dims.empty() && n->attr_int("axis", 0) == 0)
          return n->input(0)->const_data->dims[0];
        if ((n->is("Cast") || n->is("Reshape") || n->is("Unsqueeze") || n->is("Flatten")) && u.index == 0 &&
            n->output(0))
          next.push_back(n->output(0));
      }
    frontier = next;
  }
  return -1;
}

std::map<std::string, Tensor> generate_inputs(const Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes,
                                              uint64_t seed) {
  std::map<std::string, Tensor> r;
  uint64_t k = 0;
  for (const Value* v : g.inputs) {
    std::mt19937_64 rng(seed * 1000003ull + k++);
    const std::vector<int64_t>& dims = shapes.at(v->name);
    DType dt = v->dtype == DType::Undefined ? DType::Float : v->dtype;
    // A --shape of 2^40 elements: one line naming the input and the size, not std::bad_alloc.
    auto what = [&] { return "input '" + v->name + "' " + shape_str(dims) + " " + dtype_name(dt); };
    const uint64_t bytes = tensor_bytes_checked(dims, dtype_size(dt), what);
    check_host_capacity(what(), bytes);
    Tensor t = with_allocation_context(bytes, "host", what, [&] { return Tensor(dt, dims); });
    const int64_t n = t.numel();
    const std::string name = lower_name(v->name);
    const bool mask = name.find("mask") != std::string::npos;
    if (dtype_is_float(dt)) {
      std::normal_distribution<float> dist(0.f, 1.f);
      for (int64_t i = 0; i < n; ++i) {
        float x = mask ? 1.f : dist(rng);
        switch (dt) {
          case DType::Float: t.data<float>()[i] = x; break;
          case DType::Double: t.data<double>()[i] = x; break;
          case DType::Float16: t.data<uint16_t>()[i] = float_to_half(x); break;
          default: t.data<uint16_t>()[i] = float_to_bf16(x); break;
        }
      }
    } else if (dt == DType::Bool) {
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = mask ? 1 : static_cast<uint8_t>(rng() & 1);
    } else if (dtype_is_integer(dt)) {
      int64_t vocab = vocab_size(v);
      const int64_t last = dims.empty() ? 1 : std::max<int64_t>(1, dims.back());
      for (int64_t i = 0; i < n; ++i) {
        int64_t x = 0;
        if (mask) x = 1;
        else if (name.find("position") != std::string::npos) x = i % last;
        else if (name.find("token_type") != std::string::npos) x = 0;
        else if (vocab > 0) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
        switch (dt) {
          case DType::Int64: t.data<int64_t>()[i] = x; break;
          case DType::Int32: t.data<int32_t>()[i] = static_cast<int32_t>(x); break;
          case DType::Int16: t.data<int16_t>()[i] = static_cast<int16_t>(x); break;
          case DType::Int8: t.data<int8_t>()[i] = static_cast<int8_t>(x); break;
          case DType::UInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(x); break;
          default: std::memset(t.bytes.data() + i * dtype_size(dt), 0, dtype_size(dt));
        }
      }
    } else {
      throw Error(std::string("input '") + v->name + "' has dtype " + dtype_name(dt) + ", which fuserun cannot generate");
    }
    r[v->name] = std::move(t);
  }
  return r;
}

// 1x128, as the user typed it.
static std::string dims_x(const std::vector<int64_t>& dims) {
  std::string r;
  for (size_t i = 0; i < dims.size(); ++i) r += (i ? "x" : "") + std::to_string(dims[i]);
  return r;
}

std::map<std::string, int64_t> specialize_input_shapes(Graph& g, const ShapeOverrides& o) {
  std::map<std::string, int64_t> bound = o.symbols;
  for (const auto& [sym, n] : o.symbols)
    FUSE_CHECK(n >= 1, o.flag << " " << sym << "=" << n << ": dims must be at least 1");
  for (const auto& [name, dims] : o.inputs)
    for (int64_t d : dims)
      FUSE_CHECK(d >= 1, o.flag << " " << name << "=" << dims_x(dims) << ": dims must be at least 1");
  // Explicit input shapes: the same checks as fuserun's, and they bind symbols.
  for (Value* v : g.inputs) {
    auto it = o.inputs.find(v->name);
    if (it == o.inputs.end()) continue;
    const std::vector<int64_t>& dims = it->second;
    if (v->shape) {
      const Shape& s = *v->shape;
      FUSE_CHECK(s.size() == dims.size(), o.flag << " " << v->name << "=" << dims_x(dims) << ": the model declares "
                                                 << shape_str(s) << " (rank " << s.size() << ")");
      for (size_t i = 0; i < s.size(); ++i) {
        FUSE_CHECK(!s[i].known() || s[i].value == dims[i], o.flag << " " << v->name << "=" << dims_x(dims) << ": dim "
                                                                   << i << " must be " << s[i].value
                                                                   << " (the model declares " << shape_str(s) << ")");
        if (!s[i].known() && !s[i].symbol.empty()) {
          auto b = bound.find(s[i].symbol);
          FUSE_CHECK(b == bound.end() || b->second == dims[i],
                     o.flag << " " << v->name << "=" << dims_x(dims) << ": '" << s[i].symbol << "' is already "
                            << b->second);
          bound[s[i].symbol] = dims[i];
        }
      }
    }
  }
  for (Value* v : g.inputs) {
    auto it = o.inputs.find(v->name);
    if (it == o.inputs.end()) continue;
    Shape s;
    for (int64_t d : it->second) s.push_back(Dim::of(d));
    v->shape = s;
    v->has_value_info = true;
  }
  // Every other shape that names a bound symbol (inputs, outputs, value_info).
  for (Value* v : g.all_values()) {
    if (!v->shape) continue;
    for (Dim& d : *v->shape) {
      if (d.known() || d.symbol.empty()) continue;
      auto b = bound.find(d.symbol);
      if (b != bound.end()) d = Dim::of(b->second);
    }
  }
  return bound;
}

static bool read_proto(const fs::path& p, onnx::TensorProto* proto) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FUSE_CHECK(proto->ParseFromString(bytes), "--check: " << p.string() << " is not a serialized TensorProto");
  return true;
}

CheckData read_check_dir(const Graph& g, const std::string& dir) {
  FUSE_CHECK(fs::is_directory(dir), "--check " << dir << ": not a folder");
  CheckData d;
  std::vector<std::pair<std::string, Tensor>> ins;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    fs::path p = fs::path(dir) / ("input_" + std::to_string(i) + ".pb");
    onnx::TensorProto proto;
    FUSE_CHECK(read_proto(p, &proto), "--check " << dir << ": missing " << p.filename().string() << " (the model has "
                                                 << g.inputs.size() << " input(s))");
    ins.emplace_back(proto.name(), tensor_from_proto(proto, dir, p.string()));
  }
  // By name when every proto names a distinct graph input, else by position.
  std::set<std::string> names;
  for (const Value* v : g.inputs) names.insert(v->name);
  bool by_name = true;
  std::set<std::string> seen;
  for (auto& [n, t] : ins)
    if (!names.count(n) || !seen.insert(n).second) by_name = false;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string& name = by_name ? ins[i].first : g.inputs[i]->name;
    d.inputs[name] = std::move(ins[i].second);
  }
  // Every graph output has its reference, and every reference is compared: a
  // folder with more output_N.pb files than the model has outputs (a model that
  // lost one) is an error, not a check that silently skips them.
  std::vector<std::pair<std::string, Tensor>> outs;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    fs::path p = fs::path(dir) / ("output_" + std::to_string(i) + ".pb");
    onnx::TensorProto proto;
    FUSE_CHECK(read_proto(p, &proto), "--check " << dir << ": missing " << p.filename().string() << " (the model has "
                                                 << g.outputs.size() << " output(s))");
    outs.emplace_back(proto.name(), tensor_from_proto(proto, dir, p.string()));
  }
  const fs::path extra = fs::path(dir) / ("output_" + std::to_string(g.outputs.size()) + ".pb");
  FUSE_CHECK(!fs::exists(extra), "--check " << dir << ": " << extra.filename().string() << " has no model output to "
                                            << "compare with (the model has " << g.outputs.size() << " output(s))");
  // By name when every reference names a distinct graph output (the backend-test
  // layout), else by position, as for the inputs.
  std::map<std::string, size_t> out_pos;
  for (size_t i = 0; i < g.outputs.size(); ++i) out_pos.emplace(g.outputs[i]->name, i);
  bool out_by_name = out_pos.size() == g.outputs.size();
  std::set<std::string> out_seen;
  for (auto& [n, t] : outs)
    if (!out_pos.count(n) || !out_seen.insert(n).second) out_by_name = false;
  d.outputs.resize(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) d.outputs[out_by_name ? out_pos[outs[i].first] : i] = std::move(outs[i].second);
  return d;
}

}  // namespace fuseopt::cli
