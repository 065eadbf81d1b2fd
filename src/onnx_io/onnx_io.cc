#include "onnx_io/onnx_io.h"

#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "onnx_io/function_bodies.h"
#include "onnx_io/shape_proto.h"
#include "onnx_io/tensor_proto.h"
#include "onnx_io/unknown_fields.h"
#include "onnx_io/validate_model.h"
#include "util/error.h"
#include "util/file.h"
#include "util/mapped_file.h"

namespace fs = std::filesystem;

namespace fuseopt {

namespace {

// Names read inside a subgraph that it does not define: outer-scope reads.
void collect_outer_refs(const onnx::GraphProto& g, std::set<std::string>& defined, std::set<std::string>& refs) {
  std::set<std::string> local = defined;
  for (const auto& i : g.input()) local.insert(i.name());
  for (const auto& i : g.initializer()) local.insert(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) local.insert(o);
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !local.count(i)) refs.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_outer_refs(a.g(), local, refs);
      for (const auto& sg : a.graphs()) collect_outer_refs(sg, local, refs);
    }
  }
  for (const auto& o : g.output())
    if (!local.count(o.name())) refs.insert(o.name());
}

void read_value_info(const onnx::ValueInfoProto& vi, Value* v) {
  if (!vi.has_type() || !vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() != 0) v->dtype = static_cast<DType>(tt.elem_type());
  if (tt.has_shape()) v->shape = shape_from_proto(tt.shape());
}

void write_value_info(const Value* v, onnx::ValueInfoProto* vi) {
  vi->set_name(v->name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(v->dtype));
  if (v->shape) {
    auto* sh = tt->mutable_shape();
    for (const Dim& d : *v->shape) {
      auto* pd = sh->add_dim();
      if (d.known()) pd->set_dim_value(d.value);
      else if (!d.symbol.empty()) pd->set_dim_param(d.symbol);
    }
  }
}


// Rewrites "ai.onnx" node domains to "" in the subgraphs an attribute carries, recursively;
// true when it changed anything.
bool default_domain_spelled_empty(onnx::AttributeProto& a) {
  bool changed = false;
  auto fix_graph = [&changed](onnx::GraphProto& g, auto& self) -> void {
    for (onnx::NodeProto& n : *g.mutable_node()) {
      if (n.domain() == "ai.onnx") {
        n.set_domain("");
        changed = true;
      }
      for (onnx::AttributeProto& na : *n.mutable_attribute()) {
        if (na.has_g()) self(*na.mutable_g(), self);
        for (onnx::GraphProto& sg : *na.mutable_graphs()) self(sg, self);
      }
    }
  };
  if (a.has_g()) fix_graph(*a.mutable_g(), fix_graph);
  for (onnx::GraphProto& g : *a.mutable_graphs()) fix_graph(g, fix_graph);
  return changed;
}

Attribute read_attribute(const onnx::AttributeProto& a) {
  Attribute r;
  r.name = a.name();
  r.ref_attr_name = a.ref_attr_name();
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::FLOAT: r.kind = Attribute::Kind::Float; r.f = a.f(); break;
    case AP::INT: r.kind = Attribute::Kind::Int; r.i = a.i(); break;
    case AP::STRING: r.kind = Attribute::Kind::String; r.s = a.s(); break;
    case AP::TENSOR:
      r.kind = Attribute::Kind::Tensor;
      r.t = std::make_shared<Tensor>(tensor_from_proto(a.t(), ""));
      break;
    case AP::FLOATS: r.kind = Attribute::Kind::Floats; r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case AP::INTS: r.kind = Attribute::Kind::Ints; r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case AP::STRINGS: r.kind = Attribute::Kind::Strings; r.strings.assign(a.strings().begin(), a.strings().end()); break;
    case AP::GRAPH: case AP::GRAPHS: {
      r.kind = Attribute::Kind::Graph;
      // Subgraphs travel as bytes; their nodes' "ai.onnx" domain is spelled "" as the main
      // graph's are on load (ONNX's checker wants an opset import under the exact name:
      // mutate_models.py seed 35 m490, an If branch's Sub in 'ai.onnx').
      AP copy = a;
      r.opaque = default_domain_spelled_empty(copy) ? copy.SerializeAsString() : a.SerializeAsString();
      break;
    }
    default:
      r.kind = Attribute::Kind::Other;
      r.opaque = a.SerializeAsString();
      break;
  }
  return r;
}

void write_attribute(const Attribute& a, onnx::AttributeProto* p) {
  if (!a.opaque.empty()) {
    p->ParseFromString(a.opaque);
    p->set_name(a.name);
    return;
  }
  p->set_name(a.name);
  if (!a.ref_attr_name.empty()) p->set_ref_attr_name(a.ref_attr_name);
  using AP = onnx::AttributeProto;
  switch (a.kind) {
    case Attribute::Kind::Float: p->set_type(AP::FLOAT); p->set_f(a.f); break;
    case Attribute::Kind::Int: p->set_type(AP::INT); p->set_i(a.i); break;
    case Attribute::Kind::String: p->set_type(AP::STRING); p->set_s(a.s); break;
    case Attribute::Kind::Tensor: p->set_type(AP::TENSOR); tensor_to_proto(*a.t, "", p->mutable_t()); break;
    case Attribute::Kind::Floats: p->set_type(AP::FLOATS); for (float f : a.floats) p->add_floats(f); break;
    case Attribute::Kind::Ints: p->set_type(AP::INTS); for (int64_t i : a.ints) p->add_ints(i); break;
    case Attribute::Kind::Strings: p->set_type(AP::STRINGS); for (const auto& s : a.strings) p->add_strings(s); break;
    default: break;
  }
}

}  // namespace

namespace {

// The Graph of a parsed model. Takes the initializers' inline bytes out of
// `model` as it goes, so a big inline model is not held twice.
std::unique_ptr<Graph> graph_from_proto(onnx::ModelProto& model, const std::string& base_dir,
                                        const std::string& label, const LoadOptions& opts) {
  FUSE_CHECK(model.has_graph() && model.ir_version() > 0,
             label << ": not a valid ONNX model (no graph or no ir_version)");

  auto g = std::make_unique<Graph>();
  g->ir_version = model.ir_version();
  for (const auto& op : model.opset_import()) {
    std::string dom = op.domain() == "ai.onnx" ? "" : op.domain();
    g->opset_imports[dom] = op.version();
  }
  int64_t opset = g->opset("");
  FUSE_CHECK(opset <= kMaxKnownOpset, label << ": default-domain opset " << opset
                                            << " is newer than this fuseopt knows (up to " << kMaxKnownOpset << ")");
  // Before anything reads a node or a tensor: unknown fields (damage is refused
  // even under --no-validate: it would be written back unreadable), schemas,
  // tensor protos, scopes.
  check_unknown_fields(model, label);
  if (opts.validate) validate_model(model, label);
  for (const auto& f : model.functions()) g->functions.push_back(f.SerializeAsString());

  onnx::GraphProto& gp = *model.mutable_graph();
  g->name = gp.name();
  {
    // The shells without copying the initializers (all the weights) on the way.
    google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
    inits.Swap(gp.mutable_initializer());
    onnx::GraphProto shell = gp;
    shell.clear_node(); shell.clear_initializer(); shell.clear_input(); shell.clear_output();
    shell.clear_value_info(); shell.clear_sparse_initializer();
    g->graph_shell = shell.SerializeAsString();
    inits.Swap(gp.mutable_initializer());
    onnx::GraphProto graph;
    graph.Swap(model.mutable_graph());
    onnx::ModelProto mshell = model;
    model.mutable_graph()->Swap(&graph);
    mshell.clear_graph(); mshell.clear_functions(); mshell.clear_opset_import();
    g->model_shell = mshell.SerializeAsString();
  }

  ExternalFiles files;  // each side file opened once; big tensors are views of its mapping
  for (auto& init : *gp.mutable_initializer()) {
    Value* v = g->create_value(init.name());
    Tensor t = tensor_from_proto(init, base_dir, label, &files);
    if (init.has_raw_data()) std::string().swap(*init.mutable_raw_data());  // the Tensor has the bytes now
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      g->had_external_data = true;
      for (const auto& e : init.external_data())
        if (e.key() == "location") {
          std::string f = (fs::path(base_dir) / e.value()).lexically_normal().string();
          if (std::find(g->external_files.begin(), g->external_files.end(), f) == g->external_files.end())
            g->external_files.push_back(f);
        }
    }
    v->dtype = t.dtype;
    Shape s;
    for (int64_t d : t.dims) s.push_back(Dim::of(d));
    v->shape = s;
    v->const_data = std::make_shared<const Tensor>(std::move(t));
    g->initializers.push_back(v);
  }
  for (auto& [path, file] : files.by_path) g->weight_files.push_back(file);
  FUSE_CHECK(gp.sparse_initializer_size() == 0, label << ": sparse initializers are not supported");
  // Values are tensors here (read_value_info, write_value_info): a sequence or
  // optional graph input/output would be written back as a tensor, wrongly.
  for (const auto* list : {&gp.input(), &gp.output()})
    for (const auto& vi : *list)
      FUSE_CHECK(!vi.has_type() || vi.type().has_tensor_type(),
                 label << ": graph " << (list == &gp.input() ? "input " : "output ") << quoted(vi.name())
                       << " is not a tensor (a sequence, optional or map); fuseopt reads tensor graph inputs and "
                          "outputs only");
  for (const auto& in : gp.input()) {
    Value* v = g->find(in.name());
    if (v) {  // an initializer also listed as input (IR < 4 style): it stays a constant
      continue;
    }
    v = g->create_value(in.name());
    v->is_graph_input = true;
    v->has_value_info = true;
    read_value_info(in, v);
    g->inputs.push_back(v);
  }

  // Create outputs first so node order in the file does not matter.
  std::vector<Node*> nodes;
  for (const auto& np : gp.node()) {
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    for (const auto& o : outs)
      FUSE_CHECK(o.empty() || !g->find(o) || !(g->find(o)->producer || g->find(o)->is_graph_input || g->find(o)->const_data),
                 label << ": value '" << o << "' is produced twice (second time by node '" << np.name() << "')");
    Node* n = g->add_node(np.op_type(), np.domain() == "ai.onnx" ? "" : np.domain(), {}, outs,
                          np.name().empty() ? np.op_type() : np.name());
    // Node names are preserved exactly where the model had unique ones.
    if (!np.name().empty()) n->name = n->name;  // add_node already uniquified
    n->doc_string = np.doc_string();
    // IR-10/11 fields this build's classes lack (overload, metadata_props,
    // device_configurations), checked well-formed by check_unknown_fields.
    if (const auto& unknown = np.GetReflection()->GetUnknownFields(np); !unknown.empty())
      unknown.SerializeToString(&n->unknown_fields);
    for (const auto& a : np.attribute()) n->attrs.push_back(read_attribute(a));
    nodes.push_back(n);
  }
  int idx = 0;
  for (const auto& np : gp.node()) {
    Node* n = nodes[idx++];
    for (int i = 0; i < np.input_size(); ++i) {
      const std::string& name = np.input(i);
      if (name.empty()) { g->set_input(n, i, nullptr); continue; }
      Value* v = g->find(name);
      FUSE_CHECK(v, label << ": node " << n->label() << " reads '" << name
                          << "', which no node, input or initializer produces");
      g->set_input(n, i, v);
    }
    std::set<std::string> defined, refs;
    for (const auto& a : np.attribute()) {
      if (a.has_g()) collect_outer_refs(a.g(), defined, refs);
      for (const auto& sg : a.graphs()) collect_outer_refs(sg, defined, refs);
    }
    for (const auto& r : refs) {
      Value* v = g->find(r);
      FUSE_CHECK(v, label << ": subgraph of node " << n->label() << " reads '" << r << "', which is not defined");
      g->add_implicit_input(n, v);
    }
  }
  for (const auto& vi : gp.value_info()) {
    Value* v = g->find(vi.name());
    if (!v) continue;
    v->has_value_info = true;
    read_value_info(vi, v);
  }
  for (const auto& out : gp.output()) {
    Value* v = g->find(out.name());
    FUSE_CHECK(v, label << ": graph output '" << out.name() << "' is not produced by any node");
    v->is_graph_output = true;
    read_value_info(out, v);
    g->outputs.push_back(v);
  }
  if (opts.verify) {
    try {
      g->topo_sort();
      g->verify();
    } catch (const Error& e) {
      throw Error(label + ": " + e.what());
    }
  }
  return g;
}

constexpr const char* kParseFailed = ": not a valid ONNX model (protobuf parse failed; truncated or not an .onnx file?)";

}  // namespace

std::unique_ptr<Graph> load_model_from_bytes(const std::string& bytes, const std::string& base_dir,
                                             const std::string& label, const LoadOptions& opts) {
  onnx::ModelProto model;
  FUSE_CHECK(model.ParseFromString(bytes), label << kParseFailed);
  return graph_from_proto(model, base_dir, label, opts);
}

std::unique_ptr<Graph> load_model(const std::string& path, const LoadOptions& opts) {
  std::error_code ec;
  FUSE_CHECK(fs::exists(path, ec), path << ": no such file");
  FUSE_CHECK(fs::is_regular_file(path, ec), path << ": not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  FUSE_CHECK(!ec && size > 0, path << ": file is empty");
  // A protobuf message cannot exceed 2 GiB: such a model must keep its weights in external data.
  FUSE_CHECK(size < (uintmax_t(2) << 30), path << ": the file is " << size / (1 << 20)
                                                << " MiB; an .onnx file of 2 GiB or more cannot be parsed (protobuf's "
                                                   "limit): save the model with its weights as external data");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUSE_CHECK(fd >= 0, path << ": cannot open for reading");
  onnx::ModelProto model;
  // Parsed straight from the file: no copy of its bytes in memory first.
  const bool parsed = model.ParseFromFileDescriptor(fd);
  ::close(fd);
  FUSE_CHECK(parsed, path << kParseFailed);
  fs::path base = fs::path(path).parent_path();
  auto g = graph_from_proto(model, base.empty() ? "." : base.string(), path, opts);
  g->source_path = path;
  return g;
}

namespace {

// (domain, name, overload) of a function: what ONNX requires to be unique in a model. The
// overload is FunctionProto field 13 (IR 10), which libonnx's generated classes predate.
std::string function_key(const onnx::FunctionProto& fp) {
  std::string overload;
  const auto& unknown = fp.GetReflection()->GetUnknownFields(fp);
  for (int i = 0; i < unknown.field_count(); ++i)
    if (unknown.field(i).number() == 13 && unknown.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      overload = unknown.field(i).length_delimited();
  return fp.domain() + "\x1f" + fp.name() + "\x1f" + overload;
}

onnx::ModelProto to_proto(const Graph& g, const std::function<void(const Value*, onnx::TensorProto*)>& write_init) {
  onnx::ModelProto model;
  if (!g.model_shell.empty()) model.ParseFromString(g.model_shell);
  if (model.producer_name().empty()) model.set_producer_name("fuseopt");
  model.set_ir_version(g.ir_version);
  // IR 3 lists every initializer among the graph inputs; the IR keeps initializers
  // apart and writes them so, which IR 4 allows (validate_model refuses the other).
  if (model.ir_version() < 4 && !g.initializers.empty()) model.set_ir_version(4);
  for (const auto& [dom, ver] : g.opset_imports) {
    auto* op = model.add_opset_import();
    op->set_domain(dom);
    op->set_version(ver);
  }
  onnx::GraphProto* gp = model.mutable_graph();
  if (!g.graph_shell.empty()) gp->ParseFromString(g.graph_shell);
  gp->set_name(g.name.empty() ? "fuseopt" : g.name);
  for (const Value* v : g.initializers) write_init(v, gp->add_initializer());
  for (const Value* v : g.inputs) write_value_info(v, gp->add_input());
  for (const Value* v : g.outputs) write_value_info(v, gp->add_output());
  std::map<std::string, std::vector<const Node*>> fused;
  for (const auto& np : g.nodes()) {
    const Node* n = np.get();
    auto* p = gp->add_node();
    p->set_name(n->name);
    p->set_op_type(n->op_type);
    if (!n->domain.empty()) p->set_domain(n->domain);
    if (!n->doc_string.empty()) p->set_doc_string(n->doc_string);
    for (const Value* v : n->inputs) p->add_input(v ? v->name : "");
    // Trailing omitted optional inputs are dropped, as ONNX prefers.
    while (p->input_size() > 0 && p->input(p->input_size() - 1).empty()) p->mutable_input()->RemoveLast();
    for (const Value* v : n->outputs) p->add_output(v ? v->name : "");
    while (p->output_size() > 0 && p->output(p->output_size() - 1).empty()) p->mutable_output()->RemoveLast();
    for (const Attribute& a : n->attrs) write_attribute(a, p->add_attribute());
    const bool has_builder = find_function_body(n->domain, n->op_type) != nullptr;
    if (has_builder) fused[n->domain + "\x1f" + n->op_type].push_back(n);
    if (!n->unknown_fields.empty()) {
      google::protobuf::UnknownFieldSet kept;
      FUSE_CHECK(kept.ParseFromString(n->unknown_fields), "node " << n->label() << ": cannot restore unknown fields");
      auto* dst = p->GetReflection()->MutableUnknownFields(p);
      // A fuseopt op's overload (field 8) is recomputed below; never write it twice.
      for (int i = 0; i < kept.field_count(); ++i)
        if (!(has_builder && kept.field(i).number() == 8)) dst->AddField(kept.field(i));
    }
    // IR-10 NodeProto.overload (field 8): libonnx's generated classes predate it.
    if (std::string ov = function_overload(g, *n); !ov.empty()) {
      p->GetReflection()->MutableUnknownFields(p)->AddLengthDelimited(8, ov);
      if (model.ir_version() < 10) model.set_ir_version(10);
    }
  }
  std::set<const Value*> io(g.inputs.begin(), g.inputs.end());
  io.insert(g.outputs.begin(), g.outputs.end());
  for (const Value* v : g.all_values())
    if (v->has_value_info && !io.count(v) && !v->const_data && v->producer) write_value_info(v, gp->add_value_info());

  // Functions of the top-level fuseopt ops are regenerated from their nodes; a kept function of
  // such an op (read from a model fuseopt wrote, or the body of a fused If branch,
  // subgraph_attribute) is written only when no regenerated one has its (domain, name, overload):
  // never defined twice.
  std::vector<onnx::FunctionProto> regenerated;
  for (const auto& [key, nodes] : fused) {
    const Node* n0 = nodes.front();
    (*find_function_body(n0->domain, n0->op_type))(g, nodes, regenerated);
  }
  std::set<std::string> written;
  for (const auto& fn : regenerated) written.insert(function_key(fn));
  for (const auto& f : g.functions) {
    onnx::FunctionProto fp;
    fp.ParseFromString(f);
    if (find_function_body(fp.domain(), fp.name()) && !written.insert(function_key(fp)).second) continue;
    *model.add_functions() = std::move(fp);
  }
  for (auto& fn : regenerated) *model.add_functions() = std::move(fn);
  return model;
}

// Into the file, not a string first (an inline model is up to 1.8 GiB).
void write_deterministic(const onnx::ModelProto& m, AtomicFile& f) {
  google::protobuf::io::FileOutputStream fos(f.fd());
  {
    google::protobuf::io::CodedOutputStream cos(&fos);
    cos.SetSerializationDeterministic(true);
    FUSE_CHECK(m.SerializeToCodedStream(&cos) && !cos.HadError(),
               f.path() << ": failed to write the model (over 2 GiB? use external data)");
  }
  FUSE_CHECK(fos.Flush(), f.path() << ": write failed: " << std::strerror(fos.GetErrno()));  // not Close: the fd is f's
}

std::string serialize_deterministic(const onnx::ModelProto& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    FUSE_CHECK(m.SerializeToCodedStream(&cos), "failed to serialize the model (over 2 GiB? use external data)");
  }
  return out;
}

}  // namespace

Attribute subgraph_attribute(const Graph& body, const std::string& name, const std::set<std::string>& outer,
                             std::vector<std::string>& functions, int64_t& ir_version) {
  onnx::ModelProto m = to_proto(body, [](const Value* v, onnx::TensorProto* t) { tensor_to_proto(*v->const_data, v->name, t); });
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* gp = a.mutable_g();
  gp->Swap(m.mutable_graph());
  // The outer-scope values load_subgraph listed as inputs are outer reads again.
  auto* ins = gp->mutable_input();
  ins->erase(std::remove_if(ins->begin(), ins->end(), [&](const onnx::ValueInfoProto& vi) { return outer.count(vi.name()) > 0; }),
             ins->end());
  for (const auto& fn : m.functions()) functions.push_back(fn.SerializeAsString());
  ir_version = std::max<int64_t>(ir_version, m.ir_version());
  Attribute r;
  r.name = name;
  r.kind = Attribute::Kind::Graph;
  r.opaque = a.SerializeAsString();
  return r;
}

std::string serialize_model(const Graph& g) {
  auto m = to_proto(g, [](const Value* v, onnx::TensorProto* t) { tensor_to_proto(*v->const_data, v->name, t); });
  return serialize_deterministic(m);
}

bool use_external_data(SaveOptions::External mode, bool had_external_data, size_t weight_bytes) {
  switch (mode) {
    case SaveOptions::External::Always: return true;
    case SaveOptions::External::Never: return false;
    case SaveOptions::External::Auto: break;
  }
  return had_external_data || weight_bytes > kAutoExternalDataBytes;
}

void save_model(const Graph& g, const std::string& path, const SaveOptions& opts) {
  fs::path out(path);
  std::error_code ec;
  if (!opts.input_path.empty() && fs::exists(out, ec) &&
      fs::equivalent(fs::path(opts.input_path), out, ec))
    throw Error(path + ": output path is the input file; refusing to overwrite the input");
  fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  FUSE_CHECK(fs::is_directory(dir, ec), path << ": output folder '" << dir.string() << "' does not exist");

  size_t total = 0;
  for (const Value* v : g.initializers) total += v->const_data->bytes.size();
  const bool external = use_external_data(opts.external, g.had_external_data, total);

  std::string data_name = out.filename().string() + ".data";
  if (external) {
    // The input's own side file must survive: its model still points into it.
    for (const auto& f : g.external_files)
      if (fs::exists(dir / data_name, ec) && fs::equivalent(f, dir / data_name, ec))
        throw Error(path + ": its external-data file '" + (dir / data_name).string() +
                    "' is the input model's weight file; choose another output name");
  }
  AtomicFile data_file(external ? (dir / data_name).string() : std::string());
  uint64_t offset = 0;
  auto write_init = [&](const Value* v, onnx::TensorProto* t) {
    const Tensor& ten = *v->const_data;
    if (!external || ten.bytes.size() < opts.external_threshold_bytes || ten.dtype == DType::String) {
      tensor_to_proto(ten, v->name, t);
      return;
    }
    // Align each tensor to 4 KiB so the side file can be memory-mapped.
    static const char kZeros[4096] = {};
    uint64_t pad = (4096 - offset % 4096) % 4096;
    data_file.write(kZeros, pad);
    offset += pad;
    tensor_to_proto_header(ten, v->name, t);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& val) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(val);
    };
    add("location", data_name);
    add("offset", std::to_string(offset));
    add("length", std::to_string(ten.bytes.size()));
    // A mapped weight (passed through, or spilled by a pass) goes file to file;
    // its pages are never read into this process.
    if (const MappedSpan* span = ten.bytes.span())
      data_file.copy_from(span->file().fd(), span->file_offset(), span->size(), span->file().path());
    else
      data_file.write(ten.bytes.data(), ten.bytes.size());
    offset += ten.bytes.size();
  };
  onnx::ModelProto m = to_proto(g, write_init);
  AtomicFile model_file(path);
  write_deterministic(m, model_file);
  if (external) data_file.commit();
  model_file.commit();
}

}  // namespace fuseopt
