// The public Session methods (session.h); the work is in session_setup.cc,
// session_step.cc and session_io.cc (session_impl.h says which is which).
#include "runtime/session.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "runtime/parallel.h"
#include "runtime/session_impl.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

// --- Session -------------------------------------------------------------------

Session::Session(const Graph& g, SessionOptions o) : graph_(g), opts_(o) {
  set_num_threads(o.threads);
  backend_ = make_backend(o.backend);
  impl_ = std::make_unique<Impl>(*this, *backend_);
  impl_->setup();
}

Session::~Session() {
  if (impl_) {
    impl_->plans.clear();
    for (void* p : impl_->const_device_allocs) backend_->free(p);
    impl_.reset();
  }
}

static void check_inputs(const Graph& g, const std::vector<int>& input_slots, const std::vector<Slot>& slots,
                         const std::map<std::string, Tensor>& inputs) {
  std::set<std::string> known;
  for (int id : input_slots) known.insert(slots[id].v->name);
  for (const auto& [name, t] : inputs)
    FUSE_CHECK(known.count(name), "unknown input '" << name << "' (the model's inputs are: " << [&] {
      std::string s;
      for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
      return s;
    }() << ")");
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (size, input)
  for (int id : input_slots) {
    const Value* v = slots[id].v;
    auto it = inputs.find(v->name);
    FUSE_CHECK(it != inputs.end(), "missing input '" << v->name << "'");
    const Tensor& t = it->second;
    FUSE_CHECK(t.dtype != DType::String, "input '" << v->name << "': string tensors are not supported");
    FUSE_CHECK(v->dtype == DType::Undefined || t.dtype == v->dtype,
               "input '" << v->name << "' is " << dtype_name(t.dtype) << " but the model declares "
                         << dtype_name(v->dtype));
    for (int64_t d : t.dims) FUSE_CHECK(d >= 0, "input '" << v->name << "' has a negative dim " << shape_str(t.dims));
    FUSE_CHECK(t.bytes.size() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype),
               "input '" << v->name << "' has " << t.bytes.size() << " bytes for shape " << shape_str(t.dims));
    if (!v->shape) continue;
    const Shape& s = *v->shape;
    FUSE_CHECK(s.size() == t.dims.size(), "input '" << v->name << "' has shape " << shape_str(t.dims)
                                                    << " but the model declares " << shape_str(s));
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].known()) {
        FUSE_CHECK(s[i].value == t.dims[i], "input '" << v->name << "' has shape " << shape_str(t.dims)
                                                      << " but the model declares " << shape_str(s));
      } else if (!s[i].symbol.empty()) {
        auto b = bound.find(s[i].symbol);
        if (b == bound.end()) {
          bound[s[i].symbol] = {t.dims[i], v->name};
        } else {
          FUSE_CHECK(b->second.first == t.dims[i],
                     "input '" << v->name << "' has " << s[i].symbol << " = " << t.dims[i] << " but input '"
                               << b->second.second << "' has " << s[i].symbol << " = " << b->second.first);
        }
      }
    }
  }
  (void)g;
}

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  check_inputs(graph_, im.input_slots, im.slots, inputs);
  Plan& p = im.plan_for(im.signature(inputs));
  im.last_plan = &p;
  backend_->reset_device_errors();  // enqueued before this run's kernels or replayed graph
  profile_.runs++;
  if (p.graph) {
    profile_.graph_replays++;
    return im.replay(p, inputs);
  }
  p.dev_pool->reset_peak();
  if (p.host_pool != p.dev_pool) p.host_pool->reset_peak();
  bool capture = profile_.capture_possible && p.runs >= 1 && !p.reads_device_data;
  std::vector<Tensor> outs;
  try {
    im.bind_inputs(p, inputs);
    if (capture) {
      p.graph = backend_->capture([&] { im.execute_steps(p); });
      if (p.graph) {
        backend_->replay(p.graph);
        profile_.graph_replays++;
      } else {
        p.no_capture_reason = "the backend refused the capture";
        p.reads_device_data = true;
        im.finish_run();
        im.bind_inputs(p, inputs);
        im.execute_steps(p);
      }
    } else {
      im.execute_steps(p);
    }
    outs = im.collect_outputs(p, capture && p.graph);
  } catch (...) {
    im.finish_run();
    p.runs++;
    throw;
  }
  im.finish_run();
  p.runs++;
  if (profile_.capture_possible && p.reads_device_data && profile_.capture_disabled_reason.empty())
    profile_.capture_disabled_reason = p.no_capture_reason;
  return outs;
}

double Session::device_replay_ms() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  if (im.last_plan == nullptr || !im.last_plan->graph) return -1;
  Plan& p = *im.last_plan;
  return backend_->elapsed_ms([&] { backend_->replay(p.graph); });
}

std::vector<std::string> Session::input_names() const {
  std::vector<std::string> r;
  for (int id : impl_->input_slots) r.push_back(impl_->slots[id].v->name);
  return r;
}
std::vector<std::string> Session::output_names() const {
  std::vector<std::string> r;
  for (int id : impl_->output_slots) r.push_back(impl_->slots[id].v->name);
  return r;
}

size_t Session::peak_bytes() const {
  const Plan* p = impl_->last_plan;
  if (!p) return 0;
  size_t b = p->dev_pool->peak_bytes();
  if (p->host_pool != p->dev_pool) b += p->host_pool->peak_bytes();
  return b;
}
size_t Session::reserved_bytes() const {
  size_t b = 0;
  std::set<const BufferPool*> seen;
  auto add = [&](const BufferPool* pool) {
    if (pool && seen.insert(pool).second) b += pool->reserved_bytes();
  };
  add(impl_->shared_dev.get());
  add(impl_->shared_host.get());
  for (auto& [sig, p] : impl_->plans) {
    add(p->own_dev.get());
    add(p->own_host.get());
  }
  return b;
}
size_t Session::constant_bytes() const { return impl_->const_bytes; }

void Session::reset_profile() {
  for (NodeProfile& n : profile_.nodes) n.total_ms = 0, n.calls = 0;
  profile_.runs = profile_.graph_replays = 0;
  profile_.device_to_host_copies = profile_.device_to_host_bytes = 0;
  profile_.device_to_host_nodes.clear();
}

std::vector<std::string> Session::missing_kernels(const Graph& g, Backend b) {
  try {
    SessionOptions o;
    o.backend = b;
    Session s(g, o);
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.rfind("no ", 0) == 0 && m.find(" kernel for ") != std::string::npos) return {m};
    throw;
  }
  return {};
}

std::vector<NodeProfile> SessionProfile::nodes_by_time() const {
  std::vector<NodeProfile> r = nodes;
  std::stable_sort(r.begin(), r.end(), [](const NodeProfile& a, const NodeProfile& b) { return a.total_ms > b.total_ms; });
  return r;
}

std::vector<OpProfile> SessionProfile::by_op_type() const {
  std::map<std::string, OpProfile> m;
  for (const NodeProfile& n : nodes) {
    OpProfile& o = m[n.op];
    o.op = n.op;
    o.total_ms += n.total_ms;
    o.calls += n.calls;
    o.nodes++;
  }
  std::vector<OpProfile> r;
  for (auto& [k, v] : m) r.push_back(v);
  std::stable_sort(r.begin(), r.end(), [](const OpProfile& a, const OpProfile& b) { return a.total_ms > b.total_ms; });
  return r;
}

}  // namespace fuseopt
