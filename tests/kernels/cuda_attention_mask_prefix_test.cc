// The Hopper attention's varlen path (AttentionArgs::mask_prefix): launch_mask_prefix against a
// host reference on masks of every dtype (prefixes of every length, all ones, all zeros, left
// padding, holes), its output poisoned first; and the Hopper kernel reading the counts it is
// given — counts that disagree with the mask on purpose, so a kernel that ignored them and read
// the mask would fail. The runtime side (the counts computed once a forward and shared by the
// layers) runs in every masked case of cuda_attention_hopper_test.cc and the session tests.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_check;

namespace {

// Row kinds: keep[j] for j < Skv.
std::vector<bool> row_of(int kind, int64_t Skv, int64_t n) {
  std::vector<bool> keep(size_t(Skv), false);
  for (int64_t j = 0; j < Skv; ++j) {
    switch (kind) {
      case 0: keep[j] = j < n; break;                   // prefix of n (n = Skv: all ones)
      case 1: keep[j] = false; break;                   // every key masked
      case 2: keep[j] = j >= Skv - n; break;            // left padding: the last n kept
      default: keep[j] = j < n || j == Skv - 1; break;  // a prefix and one more key at the end
    }
  }
  return keep;
}

// What launch_mask_prefix must write for the row.
int expected(const std::vector<bool>& keep) {
  int64_t n = 0;
  while (n < int64_t(keep.size()) && keep[size_t(n)]) ++n;
  for (size_t j = size_t(n); j < keep.size(); ++j)
    if (keep[j]) return -1;
  return n >= 1 ? int(n) : -1;
}

// The row's keep flags as mask bytes of dt (kept: a value whose bits are not all zero in any
// of the dtype's ways — high bits only for int64, negative floats; masked: 0, or -0 for floats).
void put(std::vector<uint8_t>& bytes, DType dt, size_t i, bool keep) {
  switch (dt) {
    case DType::Int64: {
      const int64_t v = keep ? int64_t(1) << 40 : 0;
      std::memcpy(bytes.data() + 8 * i, &v, 8);
      break;
    }
    case DType::Int32: {
      const int32_t v = keep ? 7 : 0;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
      break;
    }
    case DType::Float: {
      const float v = keep ? -2.f : (i % 2 ? -0.f : 0.f);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
      break;
    }
    case DType::Float16: {
      const uint16_t v = keep ? float_to_half(0.5f) : (i % 2 ? 0x8000 : 0);
      std::memcpy(bytes.data() + 2 * i, &v, 2);
      break;
    }
    default: bytes[i] = keep ? 1 : 0; break;  // Bool
  }
}

}  // namespace

TEST_CASE("cuda Attention mask prefix: per-batch key counts", "[cuda][attention][mask_prefix]") {
  if (!gpu_ready()) return;
  TestStream stream;
  for (DType dt : {DType::Int64, DType::Bool, DType::Int32, DType::Float, DType::Float16}) {
    for (int64_t Skv : {1, 2, 255, 300, 1000, 4097}) {
      INFO(dtype_name(dt) << " S_kv " << Skv);
      std::vector<std::vector<bool>> rows;
      for (int64_t n : {int64_t(1), Skv / 2, Skv - 1, Skv, Skv > 256 ? int64_t(257) : Skv})
        for (int kind = 0; kind < 4; ++kind) rows.push_back(row_of(kind, Skv, std::max<int64_t>(n, 0)));
      const int B = int(rows.size());
      const size_t esz = dtype_size(dt);
      std::vector<uint8_t> bytes(size_t(B) * size_t(Skv) * esz);
      for (int b = 0; b < B; ++b)
        for (int64_t j = 0; j < Skv; ++j) put(bytes, dt, size_t(b) * size_t(Skv) + size_t(j), rows[size_t(b)][size_t(j)]);
      DevBuf mask(bytes.size()), out(size_t(B) * sizeof(int));
      upload_bytes(mask.p, bytes.data(), bytes.size());
      ck(cudaMemset(out.p, 0x5a, size_t(B) * sizeof(int)), "poison");
      ck(cudaDeviceSynchronize(), "poison (synchronize)");
      cuda_fused::launch_mask_prefix(mask.p, dt, B, int(Skv), static_cast<int*>(out.p), stream.s);
      ck(cudaStreamSynchronize(stream.s), "mask prefix kernel");
      std::vector<int> got(static_cast<size_t>(B), 0);
      ck(cudaMemcpy(got.data(), out.p, got.size() * sizeof(int), cudaMemcpyDeviceToHost), "download");
      for (int b = 0; b < B; ++b) {
        INFO("row " << b);
        CHECK(got[size_t(b)] == expected(rows[size_t(b)]));
      }
    }
  }
}

TEST_CASE("cuda Attention Hopper kernel: the varlen path reads the key counts", "[cuda][attention][hopper][mask_prefix]") {
  if (!gpu_ready()) return;
  if (!device_is_hopper()) {
    WARN("Hopper varlen test skipped: the device is not compute capability 9.0 (only the Hopper kernel reads the counts)");
    return;
  }
  // The mask keeps every key; the counts say batch 0 keeps 77 of its keys, batch 1 all, batch 2
  // 130 (past a 128-key tile), and batch 3 either is not a prefix (-1: the mask's flags, so the
  // launch mixes both paths) or keeps 1 key (every batch a prefix: the one-thread producer). The
  // answer is the reference over a mask that pads as the counts say (-1: all ones).
  const int B = 4, H = 4, Hkv = 2;
  for (int last : {-1, 1})
  for (int D : {64, 128})
    for (bool causal : {false, true})
      for (int S : {257, 600}) {
        for (DType dt : {DType::Float16, DType::BFloat16}) {
          INFO("head dim " << D << (causal ? " causal" : "") << " S " << S << " " << short_name(dt) << " batch 3 "
                           << last);
          const std::vector<int> counts = {77, S, 130, last};
          const size_t qn = size_t(B) * S * H * D, kn = size_t(B) * S * Hkv * D;
          const std::vector<float> q = random_values(dt, qn, -2.f, 2.f), k = random_values(dt, kn, -2.f, 2.f),
                                   v = random_values(dt, kn, -1.f, 1.f);
          DevBuf dq(qn * 2), dk(kn * 2), dv(kn * 2), dy(qn * 2), dmask(size_t(B) * S * 8), dcounts(B * sizeof(int));
          upload(dt, dq.p, q);
          upload(dt, dk.p, k);
          upload(dt, dv.p, v);
          const std::vector<int64_t> ones(size_t(B) * S, 1);
          upload_bytes(dmask.p, ones.data(), ones.size() * 8);
          upload_bytes(dcounts.p, counts.data(), counts.size() * sizeof(int));
          ck(cudaMemset(dy.p, 0xff, qn * 2), "poison");
          ck(cudaDeviceSynchronize(), "poison (synchronize)");
          cuda_fused::AttentionArgs a;
          a.dtype = dt;
          a.B = B, a.H = H, a.Hkv = Hkv, a.Sq = S, a.Skv = S, a.Dh = a.Dv = D;
          a.q = dq.p, a.k = dk.p, a.v = dv.p, a.y = dy.p;
          a.q_seq_stride = int64_t(H) * D, a.q_batch_stride = int64_t(S) * H * D;
          a.k_seq_stride = a.v_seq_stride = int64_t(Hkv) * D;
          a.k_batch_stride = a.v_batch_stride = int64_t(S) * Hkv * D;
          a.mask = dmask.p;
          a.mask_dtype = DType::Int64;
          a.mask_filter_value = -3.4028234663852886e38f;
          a.mask_prefix = static_cast<const int*>(dcounts.p);
          a.scale = 1.f / std::sqrt(float(D));
          a.causal = causal;
          TestStream stream;
          const long long launches = cuda_fused::attention_hopper_launch_count();
          REQUIRE(cuda_fused::launch_hopper_attention(a, stream.s));
          CHECK(cuda_fused::attention_hopper_launch_count() == launches + 1);
          ck(cudaStreamSynchronize(stream.s), "attention");
          const std::vector<float> got = download(dt, dy.p, qn);

          // Reference: the CPU kernel over the mask the counts describe.
          OpCase op("fuseopt", "Attention", 4, 1);
          op.attr(Attribute::make_int("num_heads", H));
          op.attr(Attribute::make_int("kv_num_heads", Hkv));
          op.attr(Attribute::make_int("causal", causal));
          op.attr(Attribute::make_float("mask_filter_value", a.mask_filter_value));
          Tensor tq(DType::Float, {B, S, H * D}), tk(DType::Float, {B, S, Hkv * D}), tv(DType::Float, {B, S, Hkv * D});
          std::copy(q.begin(), q.end(), tq.data<float>());
          std::copy(k.begin(), k.end(), tk.data<float>());
          std::copy(v.begin(), v.end(), tv.data<float>());
          Tensor tm(DType::Int64, {B, S});
          for (int b = 0; b < B; ++b)
            for (int j = 0; j < S; ++j) tm.data<int64_t>()[b * S + j] = counts[size_t(b)] < 0 || j < counts[size_t(b)];
          op.inputs = {&tq, &tk, &tv, &tm};
          const Tensor want = op.run_cpu(DType::Float)[0];
          std::vector<double> w(qn);
          for (size_t i = 0; i < qn; ++i) w[i] = want.data<float>()[i];
          CHECK(rel_err(got, w) < (dt == DType::BFloat16 ? 2e-2 : 5e-3));
        }
      }
}
