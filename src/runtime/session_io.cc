// The Session's input/output side: per-shape plans, input checks, binding
// inputs (host uploads or device copies, float conversions), fetching outputs
// in their declared dtypes (to the host, or into caller-owned device memory),
// the replay of a captured graph, and one run from start to end.
#include <algorithm>
#include <cstring>
#include <set>

#include "runtime/session_impl.h"
#include "util/allocation.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

// --- plans ---------------------------------------------------------------------

// Dtypes and shapes only: where an input lives changes how it is copied in,
// not the plan (the copies are outside any captured graph).
std::string Session::Impl::signature(const Views& inputs) {
  std::string sig;
  for (int id : input_slots) {
    const RtTensor& t = inputs.at(slots[id].v->name);
    sig += std::to_string(static_cast<int>(t.dtype)) + shape_str(t.shape) + ";";
  }
  return sig;
}

Plan& Session::Impl::plan_for(const std::string& sig) {
  auto it = plans.find(sig);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) {
      auto oldest = plans.begin();
      for (auto i = plans.begin(); i != plans.end(); ++i)
        if (i->second->last_used < oldest->second->last_used) oldest = i;
      if (oldest->second.get() == last_plan) last_plan = nullptr;
      plans.erase(oldest);
    }
    auto p = std::make_unique<Plan>();
    p->signature = sig;
    p->backend = &be;
    if (s.profile_.capture_possible) {
      // Own pools: a captured graph keeps pointing at this plan's buffers.
      p->own_dev = std::make_unique<BufferPool>(be);
      if (device) p->own_host = std::make_unique<BufferPool>(*host_backend);
      p->dev_pool = p->own_dev.get();
      p->host_pool = device ? p->own_host.get() : p->dev_pool;
    } else {
      p->dev_pool = shared_dev.get();
      p->host_pool = device ? shared_host.get() : shared_dev.get();
    }
    it = plans.emplace(sig, std::move(p)).first;
  }
  it->second->last_used = ++clock;
  return *it->second;
}

// --- inputs --------------------------------------------------------------------

void Session::Impl::check_inputs(const Views& inputs, const std::map<std::string, Tensor>* tensors) const {
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
    if (it == inputs.end() && held_past(id)) continue;  // taken from the held KV cache (kv_prepare)
    FUSE_CHECK(it != inputs.end(), "missing input '" << v->name << "'");
    const RtTensor& t = it->second;
    FUSE_CHECK(t.dtype != DType::String, "input '" << v->name << "': string tensors are not supported");
    FUSE_CHECK(v->dtype == DType::Undefined || t.dtype == v->dtype,
               "input '" << v->name << "' is " << dtype_name(t.dtype) << " but the model declares "
                         << dtype_name(v->dtype));
    for (int64_t d : t.shape) FUSE_CHECK(d >= 0, "input '" << v->name << "' has a negative dim " << shape_str(t.shape));
    if (tensors) {
      const Tensor& h = tensors->at(v->name);
      FUSE_CHECK(h.bytes.size() == static_cast<size_t>(h.numel()) * dtype_size(h.dtype),
                 "input '" << v->name << "' has " << h.bytes.size() << " bytes for shape " << shape_str(h.dims));
    }
    FUSE_CHECK(t.where == Backend::CPU || t.where == be.kind(),
               "input '" << v->name << "' is in " << backend_name(t.where) << " memory but the session runs on the "
                         << backend_name(be.kind()) << " backend");
    FUSE_CHECK(t.data || t.numel() == 0, "input '" << v->name << "' has no data");
    if (!v->shape) continue;
    const Shape& s = *v->shape;
    FUSE_CHECK(s.size() == t.shape.size(), "input '" << v->name << "' has shape " << shape_str(t.shape)
                                                     << " but the model declares " << shape_str(s));
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].known()) {
        FUSE_CHECK(s[i].value == t.shape[i], "input '" << v->name << "' has shape " << shape_str(t.shape)
                                                       << " but the model declares " << shape_str(s));
      } else if (!s[i].symbol.empty()) {
        auto b = bound.find(s[i].symbol);
        if (b == bound.end()) {
          bound[s[i].symbol] = {t.shape[i], v->name};
        } else {
          FUSE_CHECK(b->second.first == t.shape[i],
                     "input '" << v->name << "' has " << s[i].symbol << " = " << t.shape[i] << " but input '"
                               << b->second.second << "' has " << s[i].symbol << " = " << b->second.first);
        }
      }
    }
  }
}

// A device input into `dst` (the plan's input buffer) in the compute dtype:
// a copy on the device, or a conversion there.
void Session::Impl::copy_device_input(void* dst, DType want, const RtTensor& in) {
  if (want == in.dtype) {
    be.copy_within(dst, in.data, in.nbytes());
    return;
  }
  if (be.convert_float(dst, want, in.data, in.dtype, in.numel())) return;
  // A backend that cannot convert: through the host, counted.
  Tensor t(in.dtype, in.shape);
  be.copy_to_host(t.bytes.data(), in.data, in.nbytes());
  Tensor c = convert_float(t, want);
  be.copy_from_host(dst, c.bytes.data(), c.bytes.size());
  be.synchronize();  // `c` dies here; the copy must have read it
  prof().input_upload_bytes += static_cast<int64_t>(c.bytes.size());
}

void Session::Impl::bind_inputs(Plan& p, const Views& inputs, bool in_place) {
  for (int id : input_slots) {
    Slot& sl = slots[id];
    const RtTensor& in = inputs.at(sl.v->name);
    // Held pasts are written in place by this run's attention; a converted input by a kernel.
    sl.input_copied = !held_past(id) && compute_dtype(in.dtype) == in.dtype;
    if (held_past(id)) {
      // A view of the held KV cache (kv_prepare): the session's own block, at a fixed address
      // while the cache does not move, so a captured graph may read it in place too.
      sl.dev = in;
      sl.has_dev = true;
      if (!device) {
        sl.host = in;
        sl.has_host = true;
      }
      continue;
    }
    const DType want = compute_dtype(in.dtype);
    if (in.where != Backend::CPU && in_place && want == in.dtype) {
      // Read where it is: no kernel writes its inputs, and no pool owns this memory, so
      // nothing recycles it (a generation loop's cache: no copy of it per step).
      sl.dev = in;
      sl.has_dev = true;
      continue;
    }
    if (in.where != Backend::CPU) {
      // Device memory: copied on the device into the plan's buffer, because a
      // captured graph reads its inputs from fixed addresses. Host code that
      // reads it (rare: small integer inputs) copies it down and the profile
      // records that (StepContext::host_input).
      void* dst = with_allocation_context(
          static_cast<uint64_t>(in.numel()) * dtype_size(want), "device",
          [&] { return "input '" + sl.v->name + "' " + shape_str(in.shape) + " " + dtype_name(want); },
          [&] { return p.ensure(p.input_bufs[id], static_cast<size_t>(in.numel()) * dtype_size(want)); });
      copy_device_input(dst, want, in);
      sl.dev = RtTensor{want, in.shape, dst, be.kind()};
      sl.has_dev = true;
      continue;
    }
    RtTensor host = in;
    if (want != in.dtype) {
      run_tensors.push_back(convert_float(in, want));
      const Tensor& t = run_tensors.back();
      host = RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU};
    }
    sl.host = host;
    sl.has_host = true;
    if (!device) {
      sl.dev = sl.host;
      sl.has_dev = true;
      continue;
    }
    void* dst = with_allocation_context(
        host.nbytes(), "device",
        [&] { return "input '" + sl.v->name + "' " + shape_str(host.shape) + " " + dtype_name(host.dtype); },
        [&] { return p.ensure(p.input_bufs[id], host.nbytes()); });
    be.copy_from_host(dst, host.data, host.nbytes());
    prof().input_upload_bytes += static_cast<int64_t>(host.nbytes());
    sl.dev = RtTensor{host.dtype, host.shape, dst, be.kind()};
    sl.has_dev = true;
  }
}

// --- outputs -------------------------------------------------------------------

std::vector<RtTensor> Session::Impl::output_views(Plan& p, bool record) {
  if (device) be.synchronize();
  if (device) be.raise_device_errors();  // an out-of-range index a kernel met: Error naming the node
  std::vector<RtTensor> views;
  for (int id : output_slots) {
    Slot& sl = slots[id];
    FUSE_CHECK(sl.has_dev || sl.has_host, "graph output '" << sl.v->name << "' was not computed");
    // The device copy when there is one: a graph input returned as an output
    // then reads the plan's input buffer, which a replay refills.
    views.push_back(sl.has_dev ? sl.dev : sl.host);
  }
  if (record) p.out_views = views;
  return views;
}

void Session::Impl::deliver_outputs(Plan& p, const std::vector<RtTensor>& views, Outputs out) {
  if (out.host) {
    out.host->clear();
    for (size_t i = 0; i < views.size(); ++i)
      out.host->push_back(fetch_output(p, i, views[i], slots[output_slots[i]].model_dtype()));
  } else {
    out.device->clear();
    for (size_t i = 0; i < views.size(); ++i)
      out.device->push_back(export_output(views[i], slots[output_slots[i]].model_dtype(), output_slots[i]));
  }
}

// One output to the host in its declared dtype. A device value in another
// float dtype is converted on the device first: the host then copies the
// declared bytes once instead of converting element by element.
Tensor Session::Impl::fetch_output(Plan& p, size_t index, const RtTensor& v, DType declared) {
  const DType to = declared_target(v.dtype, declared);
  if (v.seq_capacity > 0) {  // a present of the held KV cache: rows of its block, made dense
    Tensor t = kv_download(v);
    return to == DType::Undefined ? t : convert_float(t, to);
  }
  if (v.where != Backend::CPU && to != DType::Undefined) {
    Tensor t(to, v.shape);
    void* staged = p.ensure(p.output_stage[index], t.bytes.size());
    if (be.convert_float(staged, to, v.data, v.dtype, v.numel())) {
      be.copy_to_host(t.bytes.data(), staged, t.bytes.size());
      prof().output_download_bytes += static_cast<int64_t>(t.bytes.size());
      return t;
    }
  }
  Tensor t(v.dtype, v.shape);
  if (v.where == Backend::CPU) {
    if (v.nbytes()) std::memcpy(t.bytes.data(), v.data, v.nbytes());
  } else {
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
    prof().output_download_bytes += static_cast<int64_t>(v.nbytes());
  }
  return to == DType::Undefined ? t : convert_float(t, to);
}

// One output into device memory the caller owns, in its declared dtype; the
// caller synchronizes the stream before handing it out.
DeviceTensor Session::Impl::export_output(const RtTensor& v, DType declared, int slot) {
  const DType to = declared_target(v.dtype, declared);
  DeviceTensor d;
  d.dtype = to == DType::Undefined ? v.dtype : to;
  d.shape = v.shape;
  d.device = be.device_ordinal();
  if (const HeldKv* h = held_present(slot); h && v.seq_capacity > 0) {
    // A present of the held KV cache: handed out as the view it is, in the cache's dtype.
    d.dtype = v.dtype;
    d.owner = h->block;
    d.data = v.data;
    d.seq_capacity = v.seq_capacity;
    return d;
  }
  // Computed straight into an exported block (export_direct): handed out as it is, once (an
  // output listed twice gets a copy the second time).
  if (auto it = direct_out.find(slot); it != direct_out.end() && it->second.get() == v.data && to == DType::Undefined) {
    d.owner = std::move(it->second);
    d.data = d.owner.get();
    direct_out.erase(it);
    return d;
  }
  const size_t bytes = static_cast<size_t>(v.numel()) * dtype_size(d.dtype);
  d.owner = be.alloc_exported(bytes);
  d.data = d.owner.get();
  if (v.where != Backend::CPU) {
    if (to == DType::Undefined) {
      be.copy_within(d.data, v.data, bytes);
      return d;
    }
    if (be.convert_float(d.data, to, v.data, v.dtype, v.numel())) return d;
    Tensor t(v.dtype, v.shape);  // a backend that cannot convert: through the host, counted
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
    prof().output_download_bytes += static_cast<int64_t>(v.nbytes());
    Tensor c = convert_float(t, to);
    be.copy_from_host(d.data, c.bytes.data(), bytes);
    be.synchronize();  // `c` dies here
    return d;
  }
  // A value computed on the host (shape math) or a host constant: uploaded.
  if (to == DType::Undefined) {
    be.copy_from_host(d.data, v.data, bytes);
  } else {
    Tensor c = convert_float(v, to);
    be.copy_from_host(d.data, c.bytes.data(), bytes);
    be.synchronize();  // `c` dies here
  }
  return d;
}

void Session::Impl::finish_run() {
  for (Slot& sl : slots) {
    if (sl.is_const) continue;
    unref(sl.dev_buf);
    unref(sl.host_buf);
    sl.has_dev = sl.has_host = false;
  }
  run_buffers.clear();
  run_tensors.clear();
  direct_out.clear();
  export_direct = false;
}

// --- runs ----------------------------------------------------------------------

void Session::Impl::replay(Plan& p, const Views& inputs, Outputs out) {
  for (int id : input_slots) {
    if (held_past(id)) continue;  // the held KV cache: read in place by the graph
    const RtTensor& in = inputs.at(slots[id].v->name);
    void* dst = p.input_bufs.at(id).first;
    const DType want = compute_dtype(in.dtype);
    if (in.where != Backend::CPU) {
      copy_device_input(dst, want, in);
      continue;
    }
    prof().input_upload_bytes += static_cast<int64_t>(in.nbytes());
    if (want != in.dtype) {
      // Upload as given, convert on the device (no host pass over the data).
      void* staged = p.ensure(p.input_stage[id], in.nbytes());
      be.copy_from_host(staged, in.data, in.nbytes());
      if (be.convert_float(dst, want, staged, in.dtype, in.numel())) continue;
      Tensor conv = convert_float(in, want);
      be.copy_from_host(dst, conv.bytes.data(), conv.bytes.size());
      be.synchronize();  // `conv` dies here; the copy must have read it
      continue;
    }
    be.copy_from_host(dst, in.data, in.nbytes());
  }
  be.replay(p.graph);
  kv_advance(p.out_views);
  deliver_outputs(p, p.out_views, out);
  be.synchronize();
  be.raise_device_errors();  // an out-of-range index met by the replayed kernels
}

void Session::Impl::run(const Views& caller_inputs, Outputs out, const std::map<std::string, Tensor>* tensors) {
  std::lock_guard<std::mutex> lock(run_mutex);
  check_inputs(caller_inputs, tensors);
  // With a held KV cache the pasts are views of it (loaded first from the caller's, if given).
  Views held_inputs;
  if (!held.empty()) {
    held_inputs = caller_inputs;
    kv_prepare(held_inputs);
  }
  const Views& inputs = held.empty() ? caller_inputs : held_inputs;
  FUSE_CHECK(out.host || device, "outputs on the device need a device backend (this session runs on the "
                                     << backend_name(be.kind()) << " backend)");
  Plan& p = plan_for(signature(inputs));
  last_plan = &p;
  be.reset_device_errors();  // enqueued before this run's kernels or replayed graph
  SessionProfile& pr = prof();
  pr.runs++;
  if (p.graph) {
    pr.graph_replays++;
    replay(p, inputs, out);
    return;
  }
  p.dev_pool->reset_peak();
  if (p.host_pool != p.dev_pool) p.host_pool->reset_peak();
  bool capture = pr.capture_possible && p.runs >= 1 && !p.reads_device_data;
  try {
    export_direct = !capture && out.device != nullptr;
    bind_inputs(p, inputs, !capture);
    if (capture) {
      p.graph = be.capture([&] { execute_steps(p); });
      if (p.graph) {
        be.replay(p.graph);
        pr.graph_replays++;
      } else {
        p.no_capture_reason = "the backend refused the capture";
        p.reads_device_data = true;
        finish_run();
        export_direct = out.device != nullptr;
        bind_inputs(p, inputs, true);
        execute_steps(p);
      }
    } else {
      execute_steps(p);
    }
    const std::vector<RtTensor> views = output_views(p, capture && p.graph);
    kv_advance(views);
    deliver_outputs(p, views, out);
    if (out.device) be.synchronize();  // the outputs are complete when the run returns
  } catch (...) {
    finish_run();
    p.runs++;
    throw;
  }
  finish_run();
  p.runs++;
  if (pr.capture_possible && p.reads_device_data && pr.capture_disabled_reason.empty())
    pr.capture_disabled_reason = p.no_capture_reason;
}

}  // namespace fuseopt
