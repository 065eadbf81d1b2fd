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

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs) {
  Impl::Views views;
  for (const auto& [name, t] : inputs)
    views.emplace(name, RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU});
  std::vector<Tensor> outs;
  impl_->run(views, Impl::Outputs{&outs, nullptr}, &inputs);
  return outs;
}

std::vector<Tensor> Session::run_views(const std::map<std::string, RtTensor>& inputs) {
  std::vector<Tensor> outs;
  impl_->run(inputs, Impl::Outputs{&outs, nullptr});
  return outs;
}

std::vector<DeviceTensor> Session::run_device(const std::map<std::string, RtTensor>& inputs) {
  std::vector<DeviceTensor> outs;
  impl_->run(inputs, Impl::Outputs{nullptr, &outs});
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
size_t Session::weights_stored_nk() const { return impl_->weights_nk; }
size_t Session::norms_folded() const { return impl_->norms_folded; }

void Session::reset_profile() {
  for (NodeProfile& n : profile_.nodes) n.total_ms = 0, n.calls = 0;
  profile_.runs = profile_.graph_replays = 0;
  profile_.device_to_host_copies = profile_.device_to_host_bytes = 0;
  profile_.input_upload_bytes = profile_.output_download_bytes = 0;
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
