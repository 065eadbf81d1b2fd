// The KV cache a Session holds between runs (Session::hold_kv_cache; session.h says what a
// caller sees). Why: ONNX's present is a new tensor, so a decode step copies the whole cache
// into it (at 8 x 2048 cached tokens of a Llama-1B-shaped model, 33.5 MB written per layer per
// token: half of the step's attention traffic) and a generation loop allocates and frees it
// every step. Held, each past/present pair is one block of `capacity` positions per (b, h):
// the past is a view of its first kv_length rows, the attention writes the new rows after
// them (KernelContext::cache_output), and the present is the same block, one step longer.
//
// Which pairs: a fuseopt.Attention past_key/past_value (inputs 5, 6) that is a graph input
// read by no other node but Shape/Size (they read the shape, which the view keeps), with its
// present (outputs 1, 2) a graph output that no node reads. Anything else is refused, naming
// the node, because a kernel that does not know the view's row stride would read it wrong.
#include <algorithm>
#include <cstring>

#include "runtime/session_impl.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

namespace {

bool reads_shape_only(const Node& n) { return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size"); }

}  // namespace

void Session::Impl::find_kv_pairs() {
  held.clear();
  for (const Step& st : steps) {
    const Node& n = st.n();
    if (n.domain != "fuseopt" || n.op_type != "Attention") continue;
    if (st.ins.size() <= 6 || st.ins[5] < 0 || st.ins[6] < 0) continue;  // no past
    // Both pasts graph inputs, or neither (computed in the graph: not a cache the caller feeds).
    const bool key_in = slots[st.ins[5]].is_input, value_in = slots[st.ins[6]].is_input;
    if (!key_in && !value_in) continue;
    FUSE_CHECK(key_in && value_in, "hold_kv_cache: " << n.label() << " reads its past "
                                                     << (key_in ? "value '" : "key '")
                                                     << slots[st.ins[key_in ? 6 : 5]].v->name
                                                     << "' from a node of the graph, not from an input: the pair "
                                                     << "cannot be held");
    for (size_t j : {size_t(5), size_t(6)}) {
      const int past = st.ins[j];
      const std::string& name = slots[past].v->name;
      const size_t out = j - 4;  // present_key / present_value
      FUSE_CHECK(st.outs.size() > out && st.outs[out] >= 0,
                 "hold_kv_cache: " << n.label() << " reads past input '" << name << "' but has no present output "
                                   << out << " to grow in place");
      const int present = st.outs[out];
      const std::string& pname = slots[present].v->name;
      FUSE_CHECK(slots[present].is_output, "hold_kv_cache: present '" << pname << "' of " << n.label()
                                                                      << " is not a graph output");
      FUSE_CHECK(!slots[past].is_output, "hold_kv_cache: past input '" << name << "' is also a graph output");
      for (const Step& o : steps) {
        for (size_t k = 0; k < o.ins.size(); ++k) {
          if (o.ins[k] == past && !(&o == &st && k == j))
            FUSE_CHECK(reads_shape_only(o.n()), "hold_kv_cache: past input '"
                                                    << name << "' is read by " << o.n().label() << " besides "
                                                    << n.label() << "; a cache can be held only where the attention "
                                                    << "alone reads it");
          FUSE_CHECK(o.ins[k] != present,
                     "hold_kv_cache: present '" << pname << "' is read by " << o.n().label()
                                                << "; a held present must only leave the graph");
        }
        for (int id : o.implicit)
          FUSE_CHECK(id != past && id != present,
                     "hold_kv_cache: '" << slots[id].v->name << "' is read inside " << o.n().label());
      }
      HeldKv h;
      h.past_slot = past;
      h.present_slot = present;
      h.attention = n.label();
      held.push_back(std::move(h));
    }
  }
  FUSE_CHECK(!held.empty(), "hold_kv_cache: the model has no fused attention (fuseopt.Attention) whose past_key / "
                            "past_value are graph inputs; optimise it with fuseopt first");
}

const HeldKv* Session::Impl::held_past(int slot) const {
  for (const HeldKv& h : held)
    if (h.past_slot == slot) return &h;
  return nullptr;
}

const HeldKv* Session::Impl::held_present(int slot) const {
  for (const HeldKv& h : held)
    if (h.present_slot == slot) return &h;
  return nullptr;
}

RtTensor Session::Impl::kv_view(const HeldKv& h) const {
  RtTensor t{h.dtype, {h.B, h.H, kv_length, h.D}, h.block.get(), be.kind()};
  t.seq_capacity = kv_capacity;
  return t;
}

void Session::Impl::kv_prepare(Views& inputs) {
  size_t given = 0;
  for (const HeldKv& h : held) given += inputs.count(slots[h.past_slot].v->name);
  if (given == 0) {
    FUSE_CHECK(kv_loaded, "the KV cache the session holds is empty: the first run must pass the past inputs ('"
                              << slots[held[0].past_slot].v->name << "', ...)");
  } else {
    FUSE_CHECK(given == held.size(), "pass every past input of the held KV cache or none (" << given << " of "
                                                                                              << held.size() << " given)");
    // Load: each given past into its block's first S rows per (b, h), in the compute dtype.
    bool moved = false;
    int64_t S = -1;
    for (HeldKv& h : held) {
      const std::string& name = slots[h.past_slot].v->name;
      const RtTensor& t = inputs.at(name);
      FUSE_CHECK(t.rank() == 4, "past input '" << name << "' must be [B, H, S, D], got " << shape_str(t.shape));
      FUSE_CHECK(S < 0 || t.shape[2] == S, "past input '" << name << "' holds " << t.shape[2]
                                                          << " positions, the other pasts " << S);
      S = t.shape[2];
      FUSE_CHECK(S <= kv_capacity, "past input '" << name << "' holds " << S << " positions but the held KV cache "
                                                  << "takes " << kv_capacity << " (Session::hold_kv_cache)");
      const DType want = compute_dtype(t.dtype);
      const size_t esz = dtype_size(want);
      if (!h.block || h.B != t.shape[0] || h.H != t.shape[1] || h.D != t.shape[3] || h.dtype != want) {
        h.B = t.shape[0], h.H = t.shape[1], h.D = t.shape[3], h.dtype = want;
        const uint64_t bytes = std::max<uint64_t>(1, uint64_t(h.B * h.H * kv_capacity * h.D) * esz);
        h.block = be.alloc_exported(bytes);
        moved = true;
      }
      // The tensor in the compute dtype, where it is (device) or on the host.
      const size_t row_bytes = size_t(S * h.D) * esz, n = size_t(t.numel());
      const uint8_t* src = static_cast<const uint8_t*>(t.data);
      Tensor host_conv;
      void* dev_conv = nullptr;
      if (want != t.dtype) {
        if (t.where == Backend::CPU) {
          host_conv = convert_float(t, want);
          src = host_conv.bytes.data();
        } else {
          dev_conv = be.alloc(std::max<size_t>(1, n * esz));
          if (!be.convert_float(dev_conv, want, t.data, t.dtype, int64_t(n))) {
            Tensor c(t.dtype, t.shape);
            be.copy_to_host(c.bytes.data(), t.data, t.nbytes());
            host_conv = convert_float(c, want);
            be.copy_from_host(dev_conv, host_conv.bytes.data(), host_conv.bytes.size());
          }
          src = static_cast<const uint8_t*>(dev_conv);
        }
      }
      uint8_t* dst = static_cast<uint8_t*>(h.block.get());
      const size_t block_row = size_t(kv_capacity * h.D) * esz;
      for (int64_t bh = 0; bh < h.B * h.H && row_bytes; ++bh) {
        if (t.where == Backend::CPU) be.copy_from_host(dst + bh * block_row, src + bh * row_bytes, row_bytes);
        else be.copy_within(dst + bh * block_row, src + bh * row_bytes, row_bytes);
      }
      be.synchronize();  // host_conv / dev_conv die here; the copies must have read them
      if (dev_conv) be.free(dev_conv);
      if (t.where == Backend::CPU) prof().input_upload_bytes += int64_t(row_bytes * size_t(h.B * h.H));
    }
    if (moved) {  // captured graphs point at the old blocks
      plans.clear();
      last_plan = nullptr;
    }
    kv_length = S;
    kv_loaded = true;
  }
  for (const HeldKv& h : held) inputs[slots[h.past_slot].v->name] = kv_view(h);
}

void Session::Impl::kv_advance(const std::vector<RtTensor>& views) {
  int64_t len = -1;
  for (const HeldKv& h : held)
    for (size_t i = 0; i < output_slots.size(); ++i) {
      if (output_slots[i] != h.present_slot) continue;
      const RtTensor& v = views[i];
      FUSE_CHECK(v.seq_capacity == kv_capacity && v.data == h.block.get() && v.rank() == 4,
                 "internal: " << h.attention << " did not write its present into the held KV cache");
      FUSE_CHECK(len < 0 || v.shape[2] == len, "internal: the held presents have different lengths");
      len = v.shape[2];
    }
  if (len >= 0) kv_length = len;
}

Tensor Session::Impl::kv_download(const RtTensor& v) {
  Tensor t(v.dtype, v.shape);
  const size_t esz = dtype_size(v.dtype);
  const size_t row_bytes = size_t(v.shape[2] * v.shape[3]) * esz, block_row = size_t(v.seq_capacity * v.shape[3]) * esz;
  const uint8_t* src = static_cast<const uint8_t*>(v.data);
  be.synchronize();
  for (int64_t bh = 0; bh < v.shape[0] * v.shape[1] && row_bytes; ++bh)
    be.copy_to_host(t.bytes.data() + bh * row_bytes, src + bh * block_row, row_bytes);
  prof().output_download_bytes += int64_t(t.bytes.size());
  return t;
}

// --- the public side -----------------------------------------------------------

void Session::hold_kv_cache(int64_t capacity) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  FUSE_CHECK(capacity > 0, "hold_kv_cache: the capacity must be positive, got " << capacity);
  im.held.clear();
  im.plans.clear();
  im.last_plan = nullptr;
  im.kv_loaded = false;
  im.kv_length = 0;
  im.kv_capacity = capacity;
  try {
    im.find_kv_pairs();
  } catch (...) {
    im.held.clear();
    im.kv_capacity = 0;
    throw;
  }
}

bool Session::kv_cache_held() const { return !impl_->held.empty(); }
int64_t Session::kv_cache_capacity() const { return impl_->kv_capacity; }
int64_t Session::kv_cache_length() const { return impl_->kv_length; }

void Session::set_kv_cache_length(int64_t length) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  FUSE_CHECK(!im.held.empty(), "set_kv_cache_length: the session holds no KV cache (hold_kv_cache)");
  FUSE_CHECK(length >= 0 && length <= im.kv_length,
             "set_kv_cache_length: " << length << " is not in [0, " << im.kv_length << "] (the positions held)");
  im.kv_length = length;
}

std::vector<std::string> Session::kv_cache_inputs() const {
  std::vector<std::string> r;
  for (const HeldKv& h : impl_->held) r.push_back(impl_->slots[h.past_slot].v->name);
  return r;
}

Tensor Session::download(const DeviceTensor& d) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  RtTensor v{d.dtype, d.shape, d.data, backend_->kind()};
  v.seq_capacity = d.seq_capacity;
  if (d.seq_capacity > 0) {
    FUSE_CHECK(v.rank() == 4, "download: a cache view must be [B, H, S, D], got " << shape_str(d.shape));
    Tensor t = im.kv_download(v);
    // In the dtype the model declares for the present (the cache stores the compute dtype).
    for (const HeldKv& h : im.held) {
      if (h.block.get() != d.data) continue;
      const DType to = declared_target(t.dtype, im.slots[h.present_slot].model_dtype());
      if (to != DType::Undefined) t = convert_float(t, to);
      break;
    }
    return t;
  }
  Tensor t(d.dtype, d.shape);
  backend_->synchronize();
  if (!t.bytes.empty()) backend_->copy_to_host(t.bytes.data(), d.data, t.bytes.size());
  return t;
}

}  // namespace fuseopt
