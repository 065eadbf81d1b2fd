// CUDA MatMul / Gemm / fuseopt.FusedMatMul / fuseopt.LayerNormLinear (cuBLASLt
// with epilogues) against the CPU kernels, fresh random inputs, output
// poisoned with NaN, odd sizes, fp32 / tf32 / fp16 / bf16.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/gemm_host.h"
#include "kernels/cuda/gemm_pack.h"
#include "kernels/cuda/gemm_row_phases.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};

void check_case(OpCase& c, DType dt, Precision p = Precision::FP32, size_t outputs = 1) {
  auto got = c.run_cuda(dt, p);
  auto want = c.run_cpu(dt);
  for (size_t i = 0; i < outputs; ++i) {
    INFO(c.node.op_type << " " << cuda_check::short_name(dt) << " output " << i << " shape "
                        << shape_str(want[i].dims));
    REQUIRE(got[i].dims == want[i].dims);
    double err = cuda_check::rel_error(got[i], want[i]);
    INFO("relative error " << err);
    CHECK(err < cuda_check::tolerance(dt, p));
  }
}

}  // namespace

TEST_CASE("cuda MatMul hand-computed 2x3x2", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  OpCase c("", "MatMul", 2, 1);
  Tensor a = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_floats({7, 8, 9, 10, 11, 12}, {3, 2});
  c.inputs = {&a, &b};
  auto y = c.run_cuda(DType::Float)[0];
  REQUIRE(y.dims == std::vector<int64_t>{2, 2});
  const float want[] = {58, 64, 139, 154};
  for (int i = 0; i < 4; ++i) CHECK(y.data<float>()[i] == want[i]);
}

TEST_CASE("cuda MatMul shapes and dtypes", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const Shapes cases[] = {
      {{3, 5, 7}, {7, 9}},                  // batch folded into M
      {{2, 3, 33, 65}, {2, 3, 65, 17}},     // strided batched
      {{65}, {4, 65, 31}},                  // 1-D A, A broadcast over the batch
      {{2, 1, 5, 7}, {1, 3, 7, 4}},         // general broadcast: one GEMM per item
      {{2, 3, 5, 7}, {2, 1, 7, 4}},         // B broadcast over heads (multi-query attention)
      {{2, 3, 5, 7}, {1, 3, 7, 4}},         // B broadcast over the batch (DeBERTa position terms)
      {{1, 3, 5, 7}, {2, 3, 7, 4}},         // A broadcast over the batch
      {{7}, {7}},                           // dot product
      {{5, 7}, {7}},                        // 1-D B
      {{129, 257}, {257, 95}},              // odd sizes
  };
  for (DType dt : kFloatTypes)
    for (const Shapes& s : cases) {
      OpCase c("", "MatMul", 2, 1);
      Tensor a = cuda_check::random_tensor(s.a), b = cuda_check::random_tensor(s.b);
      c.inputs = {&a, &b};
      INFO("A " << shape_str(s.a) << " B " << shape_str(s.b));
      check_case(c, dt);
    }
}

TEST_CASE("cuda MatMul tf32", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  OpCase c("", "MatMul", 2, 1);
  Tensor a = cuda_check::random_tensor({4, 100, 300}), b = cuda_check::random_tensor({300, 77});
  c.inputs = {&a, &b};
  check_case(c, DType::Float, Precision::TF32);
}

TEST_CASE("cuda Gemm attributes and C broadcasts", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  const int64_t M = 37, K = 70, N = 45;
  struct GemmCase {
    int ta, tb;
    float alpha, beta;
    std::vector<int64_t> c;  // empty = no C; {0} = scalar
  };
  const GemmCase cases[] = {
      {0, 0, 1.f, 1.f, {}},         {1, 0, 1.f, 1.f, {N}},     {0, 1, 0.7f, 1.f, {1, N}},
      {1, 1, 1.f, 0.5f, {M, 1}},    {0, 0, 2.f, -1.f, {M, N}}, {0, 1, 1.f, 1.f, {1}},
      {0, 0, 1.f, 0.f, {M, N}},
  };
  for (DType dt : kFloatTypes)
    for (const GemmCase& g : cases) {
      OpCase c("", "Gemm", 3, 1);
      c.attr(Attribute::make_int("transA", g.ta));
      c.attr(Attribute::make_int("transB", g.tb));
      c.attr(Attribute::make_float("alpha", g.alpha));
      c.attr(Attribute::make_float("beta", g.beta));
      Tensor a = cuda_check::random_tensor(g.ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K});
      Tensor b = cuda_check::random_tensor(g.tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
      Tensor cc = cuda_check::random_tensor(g.c);
      c.inputs = {&a, &b, g.c.empty() ? nullptr : &cc};
      INFO("transA " << g.ta << " transB " << g.tb << " alpha " << g.alpha << " beta " << g.beta << " C "
                     << shape_str(g.c));
      check_case(c, dt);
    }
}

TEST_CASE("cuda FusedMatMul epilogues", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  const char* acts[] = {"none", "relu", "gelu", "gelu_tanh", "tanh", "relu2", "quick_gelu", "silu"};
  for (DType dt : kFloatTypes)
    for (const char* act : acts)
      for (int with_bias = 0; with_bias < 2; ++with_bias)
        for (int tb = 0; tb < 2; ++tb) {
          OpCase c("fuseopt", "FusedMatMul", 3, 1);
          c.attr(Attribute::make_string("activation", act));
          c.attr(Attribute::make_int("transB", tb));
          if (tb) c.attr(Attribute::make_float("alpha", 0.5f));
          Tensor a = cuda_check::random_tensor({2, 37, 96});
          Tensor b = cuda_check::random_tensor(tb ? std::vector<int64_t>{130, 96} : std::vector<int64_t>{96, 130});
          Tensor bias = cuda_check::random_tensor({130});
          c.inputs = {&a, &b, with_bias ? &bias : nullptr};
          INFO("activation " << act << " bias " << with_bias << " transB " << tb);
          check_case(c, dt);
        }
}

TEST_CASE("cuda FusedMatMul batched B and 1-D A", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes) {
    {
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "gelu"));
      Tensor a = cuda_check::random_tensor({3, 19, 40}), b = cuda_check::random_tensor({3, 40, 23});
      Tensor bias = cuda_check::random_tensor({23});
      c.inputs = {&a, &b, &bias};
      check_case(c, dt);
    }
    {
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "relu"));
      Tensor a = cuda_check::random_tensor({40}), b = cuda_check::random_tensor({40, 23});
      Tensor bias = cuda_check::random_tensor({1, 23});
      c.inputs = {&a, &b, &bias};
      check_case(c, dt);
    }
  }
}

TEST_CASE("cuda FusedMatMul erf-GELU / tanh vectorised pass (N multiple of 8)", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (int variant = 0; variant < 4; ++variant) {  // bit 0: bias; bit 1: tanh instead of erf-GELU
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", variant & 2 ? "tanh" : "gelu"));
      Tensor a = cuda_check::random_tensor({3, 33, 64}, -2.f, 2.f), b = cuda_check::random_tensor({64, 128});
      Tensor bias = cuda_check::random_tensor({128});
      c.inputs = {&a, &b, variant & 1 ? &bias : nullptr};
      INFO("bias " << (variant & 1) << " tanh " << (variant >> 1));
      check_case(c, dt);
    }
}

// Squared ReLU (Nemotron, Persimmon): cuBLASLt's BIAS epilogue, then the in-place relu2 pass
// (launch_bias_relu2) on its scalar path (N = 130) and its 16-byte vector path (N = 128); M, K
// off every tile (37 x 3 rows, K 75); alpha with transB; decode rows (the weight-streaming
// kernel's epilogue where it takes them); LayerNormLinear (LayerNorm and RMS, skip). Inputs in
// [-2, 2] so the squares stay moderate; the harness poisons Y with NaN first.
TEST_CASE("cuda FusedMatMul / LayerNormLinear squared ReLU (relu2)", "[cuda][gemm][relu2]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes) {
    for (int64_t n : {int64_t{130}, int64_t{128}})
      for (int variant = 0; variant < 3; ++variant) {  // 0: bias; 1: no bias; 2: transB + alpha + bias
        OpCase c("fuseopt", "FusedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", "relu2"));
        const bool tb = variant == 2;
        c.attr(Attribute::make_int("transB", tb));
        if (tb) c.attr(Attribute::make_float("alpha", 0.5f));
        Tensor a = cuda_check::random_tensor({3, 37, 75}, -2.f, 2.f);
        Tensor b = cuda_check::random_tensor(tb ? std::vector<int64_t>{n, 75} : std::vector<int64_t>{75, n});
        Tensor bias = cuda_check::random_tensor({n});
        c.inputs = {&a, &b, variant == 1 ? nullptr : &bias};
        INFO("N " << n << " variant " << variant);
        check_case(c, dt);
      }
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}}) {  // decode rows, N a multiple of 8
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "relu2"));
      c.attr(Attribute::make_int("transB", 1));
      Tensor a = cuda_check::random_tensor({rows, 96}, -2.f, 2.f), b = cuda_check::random_tensor({136, 96});
      Tensor bias = cuda_check::random_tensor({136});
      c.inputs = {&a, &b, &bias};
      INFO("decode rows " << rows);
      check_case(c, dt);
    }
    for (int rms = 0; rms < 2; ++rms) {
      OpCase c("fuseopt", "LayerNormLinear", 6, 2);
      c.attr(Attribute::make_string("activation", "relu2"));
      c.attr(Attribute::make_int("rms", rms));
      c.attr(Attribute::make_float("epsilon", 1e-5f));
      Tensor x = cuda_check::random_tensor({2, 19, 75}, -2.f, 3.f), sk = cuda_check::random_tensor({2, 19, 75});
      Tensor gamma = cuda_check::random_tensor({75}, 0.5f, 1.5f), beta = cuda_check::random_tensor({75});
      Tensor w = cuda_check::random_tensor({75, 130}), bias = cuda_check::random_tensor({130});
      c.inputs = {&x, &gamma, rms ? nullptr : &beta, &w, &bias, &sk};
      INFO("LayerNormLinear rms " << rms);
      check_case(c, dt, Precision::FP32, 2);
    }
  }
}

// 16-bit outputs whose rows are not 16-byte multiples (odd N, like GPT-2's 50257-word
// vocabulary): with FUSEOPT_GEMM_PAD_N=1 two GEMMs (the first N rounded down to 8 columns, then
// the rest) write padded rows and one kernel packs them (gemm_host.h aligned_columns); run twice
// so the second call takes the cached algorithms. fp32 and an aligned N take one GEMM. N 30001
// and 1003 leave 1 and 3 tail columns, 64 + 7 = 71 is the smallest split.
// FUSEOPT_GEMM_ROW_PHASES=1 writes the same split straight into Y's rows, phase by phase
// (gemm_row_phases.h): 38 rows leave phases of 5 and 4 rows at P = 8, 3 rows leave empty
// phases; relu goes through cuBLASLt's epilogue in every phase GEMM, gelu through the pass.
// FUSEOPT_HOPPER_ODD_N=1 (opt-in): on a Hopper GPU our GEMM writes Y's rows itself, in aligned
// 16-byte pieces (gemm_hopper.h); elsewhere it falls back to the padded rows, which this covers too.
TEST_CASE("cuda FusedMatMul with a transB weight and an odd N: padded output rows", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  setenv("FUSEOPT_GEMM_PAD_N", "1", 1);
  const char* acts[] = {"none", "gelu", "relu"};
  for (const char* phases : {"0", "1", "hopper"}) {
    const bool hopper = std::string(phases) == "hopper";
    setenv("FUSEOPT_GEMM_ROW_PHASES", hopper ? "0" : phases, 1);
    setenv("FUSEOPT_HOPPER_ODD_N", hopper ? "1" : "0", 1);
    for (DType dt : {DType::Float16, DType::BFloat16, DType::Float})
      for (const char* act : acts)
        for (int64_t n : {int64_t{30001}, int64_t{1003}, int64_t{71}, int64_t{1024}})
          for (int64_t rows : {int64_t{19}, int64_t{3}}) {
            if (rows == 3 && n == 30001) continue;
            OpCase c("fuseopt", "FusedMatMul", 3, 1);
            c.attr(Attribute::make_string("activation", act));
            c.attr(Attribute::make_int("transB", 1));
            Tensor a = cuda_check::random_tensor({2, rows, 64});
            Tensor b = cuda_check::random_tensor({n, 64});
            Tensor bias = cuda_check::random_tensor({n});
            c.inputs = {&a, &b, &bias};
            INFO("row phases " << phases << " activation " << act << " N " << n << " rows 2 x " << rows);
            check_case(c, dt);
            check_case(c, dt);
          }
  }
  unsetenv("FUSEOPT_GEMM_ROW_PHASES");
  unsetenv("FUSEOPT_HOPPER_ODD_N");
  unsetenv("FUSEOPT_GEMM_PAD_N");
}

// The row pack alone (gemm_pack.h), Y poisoned and placed 0–7 elements past a 16-byte boundary:
// every element lands exactly (fp16 copied bit for bit, widened to fp32 exactly), nothing before
// or after Y is touched; N odd and even, rows that straddle the kernel's 16-byte pieces.
TEST_CASE("cuda GEMM row pack at any Y alignment", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  std::mt19937 rng(7);
  for (bool fp32 : {false, true})
    for (const auto& [rows, n, ld] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {5, 37, 40}, {3, 50257, 50264}, {9, 8, 8}, {1, 3, 8}, {4, 30522, 30528}})
      for (int shift = 0; shift < 8; ++shift) {
        INFO((fp32 ? "fp32" : "fp16") << " Y, rows " << rows << " N " << n << " ld " << ld << " shift " << shift);
        const size_t esz = fp32 ? 4 : 2;
        std::vector<uint16_t> src(static_cast<size_t>(rows * ld));
        for (auto& h : src) h = static_cast<uint16_t>(rng() % 0x7c00);  // finite fp16 bit patterns
        const size_t pad = 64, ybytes = static_cast<size_t>(rows * n) * esz;
        std::vector<unsigned char> host(ybytes + 2 * pad + 16, 0xA5);
        void *dsrc = nullptr, *dy = nullptr;
        REQUIRE(cudaMalloc(&dsrc, src.size() * 2) == cudaSuccess);
        REQUIRE(cudaMalloc(&dy, host.size()) == cudaSuccess);
        REQUIRE(cudaMemcpy(dsrc, src.data(), src.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dy, host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess);
        const size_t off = pad + static_cast<size_t>(shift) * esz % 16;
        cuda_fused::launch_pack_rows(DType::Float16, dsrc, ld, static_cast<char*>(dy) + off, rows, n, nullptr, fp32);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<unsigned char> got(host.size());
        REQUIRE(cudaMemcpy(got.data(), dy, got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        cudaFree(dsrc);
        cudaFree(dy);
        int64_t wrong = 0, touched = 0;
        for (size_t i = 0; i < got.size(); ++i)
          if ((i < off || i >= off + ybytes) && got[i] != 0xA5) ++touched;
        for (int64_t m = 0; m < rows; ++m)
          for (int64_t j = 0; j < n; ++j) {
            const uint16_t h = src[static_cast<size_t>(m * ld + j)];
            const unsigned char* at = got.data() + off + static_cast<size_t>(m * n + j) * esz;
            if (fp32) {
              float f;
              std::memcpy(&f, at, 4);
              if (f != half_to_float(h)) ++wrong;
            } else {
              uint16_t v;
              std::memcpy(&v, at, 2);
              if (v != h) ++wrong;
            }
          }
        CHECK(wrong == 0);
        CHECK(touched == 0);
      }
}

// Which rows each phase GEMM writes (host-side plan, no GPU needed): every row once, each
// phase's columns from `skip` on starting at a 16-byte boundary.
TEST_CASE("odd-N GEMM row phases (row_phases)", "[gemm]") {
  using cuda_fused::row_phase_period;
  CHECK(row_phase_period(30522, 4) == 2);  // BERT-MLM logits as float
  CHECK(row_phase_period(30522, 2) == 4);
  CHECK(row_phase_period(50257, 4) == 4);  // GPT-2 logits as float
  CHECK(row_phase_period(50257, 2) == 8);
  CHECK(row_phase_period(30520, 2) == 1);
  CHECK(row_phase_period(30524, 4) == 1);
  for (size_t esz : {size_t{2}, size_t{4}})
    for (int64_t n : {int64_t{30522}, int64_t{50257}, int64_t{71}, int64_t{1003}, int64_t{30524}})
      for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{38}, int64_t{4096}}) {
        INFO("M " << m << " N " << n << " element " << esz);
        const auto phases = cuda_fused::row_phases(m, n, esz);
        REQUIRE(static_cast<int64_t>(phases.size()) == row_phase_period(n, esz));
        std::vector<int> seen(static_cast<size_t>(m), 0);
        for (const auto& ph : phases) {
          CHECK(ph.skip * static_cast<int64_t>(esz) < 16);
          for (int64_t i = 0; i < ph.rows; ++i) {
            const int64_t r = ph.first_row + i * static_cast<int64_t>(phases.size());
            REQUIRE(r < m);
            ++seen[static_cast<size_t>(r)];
            CHECK((r * n + ph.skip) * static_cast<int64_t>(esz) % 16 == 0);
          }
        }
        for (int s : seen) CHECK(s == 1);
      }
  unsetenv("FUSEOPT_GEMM_ROW_PHASES");
  CHECK(!cuda_fused::row_phases_wanted(4096, 30522, 4));  // default: padded rows + pack
  setenv("FUSEOPT_GEMM_ROW_PHASES", "2", 1);
  CHECK(cuda_fused::row_phases_wanted(4096, 30522, 4));   // BERT-MLM 32 x 128: 2 x 2048 rows
  CHECK(cuda_fused::row_phases_wanted(4096, 50257, 2));   // 8 x 512 rows
  CHECK(!cuda_fused::row_phases_wanted(1024, 50257, 2));  // 8 x 128 rows: padded rows + pack
  setenv("FUSEOPT_GEMM_ROW_PHASES", "1", 1);
  CHECK(cuda_fused::row_phases_wanted(38, 71, 2));
  setenv("FUSEOPT_GEMM_ROW_PHASES", "0", 1);
  CHECK(!cuda_fused::row_phases_wanted(4096, 30522, 4));
  unsetenv("FUSEOPT_GEMM_ROW_PHASES");
}

// Which GEMMs split (host-side policy, no GPU needed): 16-bit, B read as [N, K]
// with 16-byte rows, N not a multiple of 8, M x N >= 2^22 unless forced.
TEST_CASE("odd-N GEMM split policy (aligned_columns)", "[gemm]") {
  using cuda_gemm::aligned_columns;
  unsetenv("FUSEOPT_GEMM_PAD_N");
  CHECK(aligned_columns(DType::Float16, 4096, 30522, 768, true) == 30520);   // BERT-MLM decoder, 32x128
  CHECK(aligned_columns(DType::BFloat16, 4096, 50257, 768, true) == 50256);  // GPT-2 LM head
  CHECK(aligned_columns(DType::Float16, 128, 30522, 768, true) == 30522);    // 1x128: below 2^22 outputs
  CHECK(aligned_columns(DType::Float16, 4096, 30522, 768, false) == 30522);  // B [K, N]: rows unaligned too
  CHECK(aligned_columns(DType::Float, 4096, 30522, 768, true) == 30522);     // fp32 rows: no split
  CHECK(aligned_columns(DType::Float16, 4096, 30520, 768, true) == 30520);   // aligned already
  CHECK(aligned_columns(DType::Float16, 4096, 30522, 765, true) == 30522);   // B rows not 16-byte
  setenv("FUSEOPT_GEMM_PAD_N", "0", 1);
  CHECK(aligned_columns(DType::Float16, 4096, 30522, 768, true) == 30522);
  setenv("FUSEOPT_GEMM_PAD_N", "1", 1);
  CHECK(aligned_columns(DType::Float16, 38, 71, 64, true) == 64);
  CHECK(aligned_columns(DType::Float16, 38, 63, 64, true) == 63);  // N < 64: not worth two GEMMs
  unsetenv("FUSEOPT_GEMM_PAD_N");
}

TEST_CASE("cuda LayerNormLinear", "[cuda][gemm][norm]") {
  if (!cuda_check::gpu_ready()) return;
  const char* acts[] = {"none", "relu", "gelu", "gelu_tanh", "tanh", "relu2", "quick_gelu", "silu"};
  for (DType dt : kFloatTypes)
    for (const char* act : acts)
      for (int variant = 0; variant < 4; ++variant) {
        // variant 0: plain LayerNorm, beta, bias; 1: rms, transB, no beta/bias;
        // 2: skip with Sum output, odd K; 3: broadcast skip [S, K] (position table), Sum.
        const int64_t K = variant == 2 ? 75 : 96, N = 130;
        const bool tb = variant == 1, rms = variant == 1, skip = variant >= 2;
        OpCase c("fuseopt", "LayerNormLinear", 6, skip ? 2 : 1);
        c.attr(Attribute::make_string("activation", act));
        c.attr(Attribute::make_int("transB", tb));
        c.attr(Attribute::make_int("rms", rms));
        c.attr(Attribute::make_float("epsilon", 1e-5f));
        Tensor x = cuda_check::random_tensor({2, 17, K}, -2.f, 3.f);
        Tensor gamma = cuda_check::random_tensor({K}, 0.5f, 1.5f), beta = cuda_check::random_tensor({K});
        Tensor w = cuda_check::random_tensor(tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
        Tensor bias = cuda_check::random_tensor({N});
        Tensor sk = cuda_check::random_tensor(variant == 3 ? std::vector<int64_t>{17, K}
                                                           : std::vector<int64_t>{2, 17, K});
        c.inputs = {&x, &gamma, rms ? nullptr : &beta, &w, rms ? nullptr : &bias, skip ? &sk : nullptr};
        INFO("activation " << act << " variant " << variant);
        check_case(c, dt, Precision::FP32, skip ? 2 : 1);
      }
}

TEST_CASE("cuda FusedMatMul rejects mismatched inner dims", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  OpCase c("fuseopt", "FusedMatMul", 3, 1);
  Tensor a = cuda_check::random_tensor({4, 8}), b = cuda_check::random_tensor({9, 5});
  c.inputs = {&a, &b, nullptr};
  REQUIRE_THROWS_AS(c.run_cuda(DType::Float), Error);
}
