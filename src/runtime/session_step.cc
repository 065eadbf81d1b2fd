// The Session's step loop: one kernel call per node through a KernelContext
// (StepContext), host/device views of each value, If branches, host copies
// of device data that CPU code reads (recorded in the profile).
#include <algorithm>
#include <cstring>

#include "runtime/session_impl.h"
#include "util/allocation.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

std::string session_detail::shapes_of(const std::vector<const RtTensor*>& ins) {
  std::string s;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i) s += ", ";
    s += ins[i] ? shape_str(ins[i]->shape) + " " + dtype_name(ins[i]->dtype) : "(none)";
  }
  return s;
}

const RtTensor& Session::Impl::device_view(Plan& p, int id) {
  Slot& sl = slots[id];
  if (sl.has_dev) return sl.dev;
  FUSE_CHECK(sl.has_host, "internal: value '" << sl.v->name << "' read before it was computed");
  // A host value a device kernel reads: it depends only on shapes and
  // constants, so one upload per shape plan is enough.
  auto& up = p.uploads[id];
  size_t bytes = std::max<size_t>(sl.host.nbytes(), 1);
  if (up.first == nullptr || up.second < bytes) {
    if (up.first) be.free(up.first);
    up = {nullptr, 0};
    void* mem = with_allocation_context(
        bytes, "device", [&] { return "uploading value '" + sl.v->name + "' " + shape_str(sl.host.shape); },
        [&] { return be.alloc(bytes); });
    up = {mem, bytes};
    be.copy_from_host(up.first, sl.host.data, sl.host.nbytes());
  } else if (p.runs == 0) {
    be.copy_from_host(up.first, sl.host.data, sl.host.nbytes());
  }
  sl.dev = RtTensor{sl.host.dtype, sl.host.shape, up.first, be.kind()};
  sl.has_dev = true;
  return sl.dev;
}

namespace {

class StepContext final : public KernelContext {
 public:
  StepContext(Session::Impl& im, Plan& p, Step& st, std::vector<const RtTensor*> views, std::vector<Buffer*> bufs,
              Precision prec)
      : im_(im), plan_(p), st_(st), views_(std::move(views)), bufs_(std::move(bufs)), prec_(prec) {
    produced_.assign(st.outs.size(), false);
  }
  ~StepContext() override {
    for (auto& [pool, ptr] : temps_) pool->release(ptr);
  }
  const Node& node() const override { return st_.n(); }
  Backend backend() const override { return st_.on_host ? Backend::CPU : im_.be.kind(); }
  Precision precision() const override { return prec_; }
  size_t num_inputs() const override { return views_.size(); }
  const RtTensor* input(size_t i) const override { return i < views_.size() ? views_[i] : nullptr; }
  const RtTensor* host_input(size_t i) override;
  size_t num_outputs() const override { return st_.outs.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override;
  RtTensor* alias_output(size_t i, size_t input_j, const std::vector<int64_t>& shape) override;
  RtTensor* cache_output(size_t i, size_t past_j, DType dtype, const std::vector<int64_t>& shape) override;
  void* scratch(size_t bytes) override {
    BufferPool* pool = pool_for_step();
    void* p = acquire(pool, bytes, [&] { return st_.n().label() + ": scratch buffer"; });
    temps_.push_back({pool, p});
    return p;
  }
  void* stream() const override { return st_.on_host ? nullptr : im_.be.stream(); }
  bool input_is_constant(size_t i) const override {
    return i < st_.ins.size() && st_.ins[i] >= 0 && im_.slots[st_.ins[i]].is_const;
  }
  bool input_is_run_stable(size_t i) const override {
    if (i >= st_.ins.size() || st_.ins[i] < 0) return false;
    const Slot& sl = im_.slots[st_.ins[i]];
    return sl.is_const || (sl.is_input && sl.input_copied);
  }
  void* shared_derived(size_t i, const char* key, size_t bytes, bool* fill) override {
    *fill = false;
    if (i >= st_.ins.size() || st_.ins[i] < 0 || st_.on_host || !im_.device) return nullptr;
    Plan::Derived& d = plan_.derived[{st_.ins[i], key}];
    // Allocated in the plan's first (uncaptured) execution; a capture never allocates.
    if (d.mem.second < bytes && plan_.runs > 0) return nullptr;
    void* mem = plan_.ensure(d.mem, bytes);
    *fill = d.written_in != plan_.executions;
    d.written_in = plan_.executions;
    return mem;
  }
  DType output_delivered_dtype(size_t i, DType computed) const override {
    if (i >= st_.outs.size() || st_.outs[i] < 0 || st_.on_host || !im_.device) return DType::Undefined;
    const Slot& sl = im_.slots[st_.outs[i]];
    if (!sl.is_output || sl.read_by_step || im_.held_present(st_.outs[i])) return DType::Undefined;
    const DType to = declared_target(computed, sl.model_dtype());
    return dtype_is_float(to) && to != DType::Double ? to : DType::Undefined;
  }

  void check_all_outputs() const {
    for (size_t i = 0; i < st_.outs.size(); ++i)
      FUSE_CHECK(st_.outs[i] < 0 || produced_[i],
                 st_.n().label() << ": the kernel did not produce output " << i);
  }

 private:
  BufferPool* pool_for_step() const { return st_.on_host ? plan_.host_pool : plan_.dev_pool; }
  // pool->acquire(bytes), an allocation failure naming what it was for (what()).
  template <class What>
  void* acquire(BufferPool* pool, uint64_t bytes, What&& what) {
    const bool host = pool == plan_.host_pool || !im_.device;
    return with_allocation_context(bytes, host ? "host" : "device", what, [&] { return pool->acquire(bytes); });
  }
  Slot* out_slot(size_t i) {
    FUSE_CHECK(i < st_.outs.size(), st_.n().label() << ": kernel wrote output " << i << " but the node declares "
                                                   << st_.outs.size());
    FUSE_CHECK(!produced_[i], st_.n().label() << ": output " << i << " written twice");
    produced_[i] = true;
    return st_.outs[i] >= 0 ? &im_.slots[st_.outs[i]] : nullptr;
  }

  Session::Impl& im_;
  Plan& plan_;
  Step& st_;
  std::vector<const RtTensor*> views_;
  std::vector<Buffer*> bufs_;
  Precision prec_;
  std::vector<bool> produced_;
  std::vector<std::pair<BufferPool*, void*>> temps_;
  std::vector<std::unique_ptr<RtTensor>> omitted_;
};

const RtTensor* StepContext::host_input(size_t i) {
  if (i >= views_.size() || !views_[i]) return nullptr;
  if (st_.on_host || !im_.device) return views_[i];
  Slot& sl = im_.slots[st_.ins[i]];
  if (sl.has_host) {
    // The data of a graph input read on the host: fine for this run, but a
    // captured graph would freeze it.
    if (!sl.host_produced) {
      plan_.reads_device_data = true;
      if (plan_.no_capture_reason.empty())
        plan_.no_capture_reason = st_.n().label() + " reads input '" + sl.v->name + "' on the host";
    }
    return &sl.host;
  }
  // Device data needed on the host: copy and record it.
  im_.be.synchronize();
  im_.be.raise_device_errors();  // e.g. an out-of-range index upstream: report it, not its zeros
  void* p = acquire(plan_.host_pool, sl.dev.nbytes(),
                    [&] { return st_.n().label() + ": host copy of '" + sl.v->name + "' " + shape_str(sl.dev.shape); });
  im_.be.copy_to_host(p, sl.dev.data, sl.dev.nbytes());
  sl.host = RtTensor{sl.dev.dtype, sl.dev.shape, p, Backend::CPU};
  sl.has_host = true;
  sl.host_buf = im_.new_buffer(p, plan_.host_pool);
  SessionProfile& prof = im_.prof();
  prof.device_to_host_copies++;
  prof.device_to_host_bytes += static_cast<int64_t>(sl.dev.nbytes());
  std::string label = st_.n().label();
  if (std::find(prof.device_to_host_nodes.begin(), prof.device_to_host_nodes.end(), label) ==
      prof.device_to_host_nodes.end())
    prof.device_to_host_nodes.push_back(label);
  plan_.reads_device_data = true;
  if (plan_.no_capture_reason.empty())
    plan_.no_capture_reason = label + " reads device value '" + sl.v->name + "' on the host";
  return &sl.host;
}

RtTensor* StepContext::output(size_t i, DType dtype, const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    FUSE_CHECK(d >= 0, st_.n().label() << ": kernel asked for output shape " << shape_str(shape));
  Slot* sl = out_slot(i);
  BufferPool* pool = pool_for_step();
  auto what = [&] {
    const Value* v = st_.n().output(i);
    return st_.n().label() + ": output " + std::to_string(i) + (v ? " '" + v->name + "'" : std::string()) + " " +
           shape_str(shape) + " " + dtype_name(dtype);
  };
  const uint64_t bytes = tensor_bytes_checked(shape, dtype_size(dtype), what);  // no wrap-around to a small buffer
  FUSE_CHECK(!sl || !im_.held_present(static_cast<int>(sl - im_.slots.data())),
             st_.n().label() << ": output " << i << " is a present of the held KV cache: the kernel must write it "
                             << "through cache_output");
  if (sl && sl->is_output && im_.export_direct && !st_.on_host && im_.device &&
      declared_target(dtype, sl->model_dtype()) == DType::Undefined) {
    // A graph output of an uncaptured run_device: into the block the caller will own.
    const int id = static_cast<int>(sl - im_.slots.data());
    auto& owner = im_.direct_out[id];
    owner = with_allocation_context(bytes, "device", what, [&] { return im_.be.alloc_exported(bytes); });
    sl->dev = RtTensor{dtype, shape, owner.get(), im_.be.kind()};
    sl->has_dev = true;
    sl->dev_buf = im_.new_buffer(owner.get(), nullptr);
    return &sl->dev;
  }
  void* p = acquire(pool, bytes, what);
  Backend where = st_.on_host ? Backend::CPU : im_.be.kind();
  if (!sl) {  // omitted optional output: a throwaway buffer
    temps_.push_back({pool, p});
    omitted_.push_back(std::make_unique<RtTensor>(RtTensor{dtype, shape, p, where}));
    return omitted_.back().get();
  }
  Buffer* b = im_.new_buffer(p, pool);
  RtTensor t{dtype, shape, p, where};
  if (st_.on_host || !im_.device) {
    sl->host = t;
    sl->has_host = true;
    sl->host_buf = b;
    if (!im_.device) {
      sl->dev = t;
      sl->has_dev = true;
      sl->host_buf = nullptr;
      sl->dev_buf = b;
    }
    return im_.device ? &sl->host : &sl->dev;
  }
  sl->dev = t;
  sl->has_dev = true;
  sl->dev_buf = b;
  return &sl->dev;
}

// The present of a held KV cache pair (session_kv_cache.cc): the block the past input views,
// S rows of it per (b, h) now. nullptr where output i is not held or input `past_j` is not that
// pair's view; the kernel then allocates as usual.
RtTensor* StepContext::cache_output(size_t i, size_t past_j, DType dtype, const std::vector<int64_t>& shape) {
  if (i >= st_.outs.size() || st_.outs[i] < 0 || past_j >= views_.size() || !views_[past_j]) return nullptr;
  const HeldKv* h = im_.held_present(st_.outs[i]);
  const RtTensor& past = *views_[past_j];
  if (!h || past.seq_capacity <= 0 || past.data != h->block.get()) return nullptr;
  FUSE_CHECK(dtype == h->dtype && shape.size() == 4 && shape[0] == h->B && shape[1] == h->H && shape[3] == h->D &&
                 shape[2] >= past.shape[2] && shape[2] <= past.seq_capacity,
             st_.n().label() << ": present " << shape_str(shape) << " " << dtype_name(dtype) << " does not fit the held "
                             << "KV cache [" << h->B << ", " << h->H << ", " << past.seq_capacity << ", " << h->D << "] "
                             << dtype_name(h->dtype));
  Slot* sl = out_slot(i);
  RtTensor t{dtype, shape, h->block.get(), im_.be.kind()};
  t.seq_capacity = past.seq_capacity;
  sl->dev = t;
  sl->has_dev = true;
  sl->dev_buf = nullptr;  // the session's block: no pool owns it
  if (!im_.device) {
    sl->host = t;
    sl->has_host = true;
  }
  return &sl->dev;
}

RtTensor* StepContext::alias_output(size_t i, size_t j, const std::vector<int64_t>& shape) {
  FUSE_CHECK(j < views_.size() && views_[j], st_.n().label() << ": alias of omitted input " << j);
  const RtTensor& in = *views_[j];
  FUSE_CHECK(shape_numel(shape) == in.numel(), st_.n().label() << ": cannot view " << shape_str(in.shape) << " as "
                                                               << shape_str(shape) << " (sizes differ)");
  Slot* sl = out_slot(i);
  RtTensor t{in.dtype, shape, in.data, in.where};
  Buffer* b = bufs_[j];
  if (b) b->refs++;
  if (!sl) {
    omitted_.push_back(std::make_unique<RtTensor>(t));
    Session::Impl::unref(b);
    return omitted_.back().get();
  }
  if (!im_.device) {
    sl->dev = sl->host = t;
    sl->has_dev = sl->has_host = true;
    sl->dev_buf = b;
    return &sl->dev;
  }
  if (in.where == Backend::CPU) {
    sl->host = t;
    sl->has_host = true;
    sl->host_buf = b;
    return &sl->host;
  }
  sl->dev = t;
  sl->has_dev = true;
  sl->dev_buf = b;
  return &sl->dev;
}

}  // namespace

Tensor Session::Impl::host_copy(Plan& p, int id, const Node& reader) {
  Slot& sl = slots[id];
  FUSE_CHECK(sl.has_dev || sl.has_host, "internal: value '" << sl.v->name << "' read before it was computed");
  const RtTensor& v = sl.has_host ? sl.host : sl.dev;
  Tensor t(v.dtype, v.shape);
  if (v.where == Backend::CPU) {
    if (v.nbytes()) std::memcpy(t.bytes.data(), v.data, v.nbytes());
  } else {
    be.synchronize();
    be.raise_device_errors();
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
    SessionProfile& pr = prof();
    pr.device_to_host_copies++;
    pr.device_to_host_bytes += static_cast<int64_t>(v.nbytes());
    if (std::find(pr.device_to_host_nodes.begin(), pr.device_to_host_nodes.end(), reader.label()) ==
        pr.device_to_host_nodes.end())
      pr.device_to_host_nodes.push_back(reader.label());
  }
  return t;
}

void Session::Impl::run_if(Plan& p, Step& st) {
  const Node& n = st.n();
  // The branch is chosen at run time: a captured graph could not follow it.
  p.reads_device_data = true;
  if (p.no_capture_reason.empty()) p.no_capture_reason = n.label() + " picks a branch at run time";
  FUSE_CHECK(!st.ins.empty() && st.ins[0] >= 0, n.label() << ": missing condition");
  Tensor cond = host_copy(p, st.ins[0], n);
  FUSE_CHECK(cond.numel() == 1, n.label() << ": the condition must have one element, got " << shape_str(cond.dims));
  const int b = cond.as_double(0) != 0 ? 0 : 1;
  Session& branch = *st.branch[b];
  std::map<std::string, Tensor> feeds;
  for (const std::string& name : branch.input_names()) {
    const Value* v = s.graph_.find(name);
    FUSE_CHECK(v && slot_of.count(v), n.label() << ": branch reads '" << name << "', which the graph does not define");
    feeds[name] = host_copy(p, slot_of.at(v), n);
  }
  std::vector<Tensor> outs;
  try {
    outs = branch.run(feeds);
  } catch (const Error& e) {
    throw Error(n.label() + (b == 0 ? " then_branch: " : " else_branch: ") + e.what());
  }
  for (size_t i = 0; i < st.outs.size() && i < outs.size(); ++i) {
    if (st.outs[i] < 0) continue;
    Tensor t = std::move(outs[i]);
    if (compute_dtype(t.dtype) != t.dtype) t = convert_float(t, compute_dtype(t.dtype));
    Slot& sl = slots[st.outs[i]];
    void* mem = p.dev_pool->acquire(t.bytes.size());
    if (device) be.copy_from_host(mem, t.bytes.data(), t.bytes.size());
    else if (!t.bytes.empty()) std::memcpy(mem, t.bytes.data(), t.bytes.size());
    sl.dev = RtTensor{t.dtype, t.dims, mem, be.kind()};
    sl.has_dev = true;
    sl.dev_buf = new_buffer(mem, p.dev_pool);
    if (!device) {
      sl.host = sl.dev;
      sl.has_host = true;
    }
  }
  if (device) be.synchronize();  // the host copies above must outlive the uploads
}

void Session::Impl::run_step(Plan& p, Step& st) {
  if (st.is_if) {
    auto call = [&] { run_if(p, st); };
    if (s.opts_.profile) {
      NodeProfile& np = s.profile_.nodes[st.profile_index];
      np.total_ms += be.elapsed_ms(call);
      np.calls++;
    } else {
      call();
    }
    for (int id : st.release) release_slot(slots[id]);
    return;
  }
  const Node& n = st.n();
  std::vector<const RtTensor*> views(st.ins.size(), nullptr);
  std::vector<Buffer*> bufs(st.ins.size(), nullptr);
  for (size_t i = 0; i < st.ins.size(); ++i) {
    int id = st.ins[i];
    if (id < 0) continue;
    Slot& sl = slots[id];
    if (!device) {
      FUSE_CHECK(sl.has_dev, "internal: value '" << sl.v->name << "' read before it was computed");
      views[i] = &sl.dev;
      bufs[i] = sl.dev_buf;
    } else if (st.on_host) {
      if (sl.has_host) {
        views[i] = &sl.host;
        bufs[i] = sl.host_buf;
      } else {
        // Only Shape/Size are placed on the host with a device input; they
        // read the shape, never the data.
        views[i] = &sl.dev;
        bufs[i] = sl.dev_buf;
      }
    } else {
      views[i] = &device_view(p, id);
      bufs[i] = sl.dev_buf;
    }
  }
  Backend b = st.on_host ? Backend::CPU : be.kind();
  auto dtype_of = [&](int i) -> DType {
    if (i < 0 || static_cast<size_t>(i) >= views.size() || !views[i]) {
      for (auto* v : views)
        if (v) return v->dtype;
      return DType::Undefined;
    }
    return views[i]->dtype;
  };
  DType dt = dtype_of(0);
  const KernelInfo* k = st.cached_kernel;
  if (!k || st.cached_dtype != dt) {
    k = lookup_kernel(n, b, dtype_of);
    FUSE_CHECK(k, "no " << backend_name(b) << " kernel for " << n.label() << " with inputs " << shapes_of(views));
    st.cached_kernel = k;
    st.cached_dtype = dt;
  }
  StepContext ctx(*this, p, st, views, bufs, s.opts_.precision);
  auto call = [&] {
    try {
      k->fn(ctx);
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.find("'" + n.name + "'") == std::string::npos) msg = n.label() + ": " + msg;
      throw Error(msg + " (inputs: " + shapes_of(views) + ")");
    } catch (const std::bad_alloc&) {  // a kernel's own working memory
      throw AllocationError(n.label() + ": out of host memory in the kernel (inputs: " + shapes_of(views) + ")");
    } catch (const std::exception& e) {
      throw Error(n.label() + ": " + e.what() + " (inputs: " + shapes_of(views) + ")");
    }
    ctx.check_all_outputs();
  };
  if (s.opts_.profile) {
    BackendImpl& timer = st.on_host && host_backend ? *host_backend : be;
    double ms = timer.elapsed_ms(call);
    NodeProfile& np = s.profile_.nodes[st.profile_index];
    np.total_ms += ms;
    np.calls++;
  } else {
    call();
  }
  // Values whose last reader (or, if unread, producer) is this step.
  for (int id : st.release) release_slot(slots[id]);
}

void Session::Impl::execute_steps(Plan& p) {
  ++p.executions;  // KernelContext::shared_derived: memory derived once an execution
  for (Step& st : steps) run_step(p, st);
}

}  // namespace fuseopt
