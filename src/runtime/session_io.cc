// The Session's input/output side: per-shape plans, binding inputs
// (uploads, float conversions), fetching outputs in their declared dtypes,
// and the replay of a captured graph.
#include <algorithm>
#include <cstring>

#include "runtime/session_impl.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

// Float <-> Float16/BFloat16 on the host: one loop per (from, to) pair, no
// per-element dispatch (fp16 models on the CPU convert every input/output).
Tensor session_detail::convert_float(const Tensor& t, DType to) {
  if (t.dtype == to) return t;
  Tensor r(to, t.dims);
  const int64_t n = t.numel();
  auto narrow = [&](auto read) {
    uint16_t* y = r.data<uint16_t>();
    // Finite values stay finite (see float_to_half_finite).
    if (to == DType::Float16)
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_finite(read(i));
    else
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16_finite(read(i));
  };
  switch (to) {
    case DType::Float: {
      float* y = r.data<float>();
      if (t.dtype == DType::Float16)
        for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(t.data<uint16_t>()[i]);
      else if (t.dtype == DType::BFloat16)
        for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(t.data<uint16_t>()[i]);
      else
        for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(t.as_double(i));
      break;
    }
    case DType::Float16:
    case DType::BFloat16:
      if (t.dtype == DType::Float) narrow([&](int64_t i) { return t.data<float>()[i]; });
      else if (t.dtype == DType::Float16) narrow([&](int64_t i) { return half_to_float(t.data<uint16_t>()[i]); });
      else if (t.dtype == DType::BFloat16) narrow([&](int64_t i) { return bf16_to_float(t.data<uint16_t>()[i]); });
      else narrow([&](int64_t i) { return static_cast<float>(t.as_double(i)); });
      break;
    default: throw Error(std::string("internal: cannot convert to ") + dtype_name(to));
  }
  return r;
}

// The dtype a computed float output goes back to: the one the model declares
// or implies (fp16/bf16 models computed in fp32 on the CPU, Float computed in
// fp16 on a device); Undefined when it stays as computed.
DType session_detail::declared_target(DType have, DType declared) {
  if (!dtype_is_float(have) || have == DType::Double || have == declared) return DType::Undefined;
  if (declared == DType::Float || declared == DType::Undefined) return have == DType::Float ? DType::Undefined : DType::Float;
  if (declared == DType::Float16 || declared == DType::BFloat16) return declared;
  return DType::Undefined;
}

// --- plans ---------------------------------------------------------------------

std::string Session::Impl::signature(const std::map<std::string, Tensor>& inputs) {
  std::string sig;
  for (int id : input_slots) {
    const Tensor& t = inputs.at(slots[id].v->name);
    sig += std::to_string(static_cast<int>(t.dtype)) + shape_str(t.dims) + ";";
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

// --- running -------------------------------------------------------------------

void Session::Impl::bind_inputs(Plan& p, const std::map<std::string, Tensor>& inputs) {
  for (int id : input_slots) {
    Slot& sl = slots[id];
    const Tensor* t = &inputs.at(sl.v->name);
    if (compute_dtype(t->dtype) != t->dtype) {
      run_tensors.push_back(convert_float(*t, compute_dtype(t->dtype)));
      t = &run_tensors.back();
    }
    sl.host = RtTensor{t->dtype, t->dims, const_cast<uint8_t*>(t->bytes.data()), Backend::CPU};
    sl.has_host = true;
    if (!device) {
      sl.dev = sl.host;
      sl.has_dev = true;
      continue;
    }
    auto& buf = p.input_bufs[id];
    size_t bytes = std::max<size_t>(t->bytes.size(), 1);
    if (buf.first == nullptr || buf.second < bytes) {
      if (buf.first) be.free(buf.first);
      buf = {be.alloc(bytes), bytes};
    }
    be.copy_from_host(buf.first, t->bytes.data(), t->bytes.size());
    sl.dev = RtTensor{t->dtype, t->dims, buf.first, be.kind()};
    sl.has_dev = true;
  }
}

std::vector<Tensor> Session::Impl::collect_outputs(Plan& p, bool record) {
  if (device) be.synchronize();
  if (device) be.raise_device_errors();  // an out-of-range index a kernel met: Error naming the node
  std::vector<Tensor> outs;
  if (record) p.out_views.clear();
  for (int id : output_slots) {
    Slot& sl = slots[id];
    FUSE_CHECK(sl.has_dev || sl.has_host, "graph output '" << sl.v->name << "' was not computed");
    const RtTensor& v = sl.has_host ? sl.host : sl.dev;
    if (record) p.out_views.push_back(v);
    outs.push_back(fetch_output(p, outs.size(), v, sl.model_dtype()));
  }
  return outs;
}

// One output to the host in its declared dtype. A device value in another
// float dtype is converted on the device first: the host then copies the
// declared bytes once instead of converting element by element.
Tensor Session::Impl::fetch_output(Plan& p, size_t index, const RtTensor& v, DType declared) {
  const DType to = declared_target(v.dtype, declared);
  if (v.where != Backend::CPU && to != DType::Undefined) {
    Tensor t(to, v.shape);
    void* staged = p.ensure(p.output_stage[index], t.bytes.size());
    if (be.convert_float(staged, to, v.data, v.dtype, v.numel())) {
      be.copy_to_host(t.bytes.data(), staged, t.bytes.size());
      return t;
    }
  }
  Tensor t(v.dtype, v.shape);
  if (v.where == Backend::CPU) {
    if (v.nbytes()) std::memcpy(t.bytes.data(), v.data, v.nbytes());
  } else {
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
  }
  return to == DType::Undefined ? t : convert_float(t, to);
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
}

std::vector<Tensor> Session::Impl::replay(Plan& p, const std::map<std::string, Tensor>& inputs) {
  for (int id : input_slots) {
    const Tensor* t = &inputs.at(slots[id].v->name);
    void* dst = p.input_bufs.at(id).first;
    const DType want = compute_dtype(t->dtype);
    if (want != t->dtype) {
      // Upload as given, convert on the device (no host pass over the data).
      void* staged = p.ensure(p.input_stage[id], t->bytes.size());
      be.copy_from_host(staged, t->bytes.data(), t->bytes.size());
      if (be.convert_float(dst, want, staged, t->dtype, t->numel())) continue;
      Tensor conv = convert_float(*t, want);
      be.copy_from_host(dst, conv.bytes.data(), conv.bytes.size());
      be.synchronize();  // `conv` dies here; the copy must have read it
      continue;
    }
    be.copy_from_host(dst, t->bytes.data(), t->bytes.size());
  }
  be.replay(p.graph);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < output_slots.size(); ++i)
    outs.push_back(fetch_output(p, i, p.out_views[i], slots[output_slots[i]].model_dtype()));
  be.synchronize();
  be.raise_device_errors();  // an out-of-range index met by the replayed kernels
  return outs;
}

}  // namespace fuseopt
