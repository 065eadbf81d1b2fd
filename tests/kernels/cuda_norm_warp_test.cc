// The warp-per-row LayerNorm/SkipLayerNorm path (kernels/cuda/fused_norm.cu,
// rows of at most 1024 vectorisable elements) against an fp64 host reference,
// with the block-per-row path run on the same inputs as a second check: many
// rows (a partial last block of warps), every vectors-per-lane count, skip
// broadcast, bias, Sum / mean / inv_std outputs, RMS, fp32 y from fp16 inputs; outputs NaN-poisoned.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

namespace fuseopt::cuda_fused {
// Defined in kernels/cuda/fused_norm.cu (benchmark/test switch, default on).
void set_norm_warp_rows(bool on);
}  // namespace fuseopt::cuda_fused

using namespace fuseopt;

namespace {

using cuda_check::download;
using cuda_check::random_values;
using cuda_check::rel_err;
using cuda_check::upload;
using Buf = cuda_check::DevBuf;

}  // namespace

TEST_CASE("cuda norm warp-per-row path vs fp64 reference", "[cuda][norm]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  const int64_t rows = 4099, skip_rows = 5;
  for (DType dt : {DType::Float16, DType::Float}) {
    const size_t esz = dt == DType::Float ? 4 : 2;
    // fp16: 1..4 vectors per lane (8, 256, 512, 768, 1000, 1024) and 1032 (block path);
    // fp32: also 6 and 8 vectors per lane (768, 1024).
    for (int64_t D : {8, 256, 512, 768, 1000, 1024, 1032}) {
      for (int variant = 0; variant < 3; ++variant) {
        // 0: SkipLayerNorm with bias, beta, Sum, mean/inv_std, skip broadcast every 5 rows;
        // 1: RMS with skip (full); 2: plain LayerNorm with a large mean.
        const bool rms = variant == 1, has_skip = variant != 2, bcast = variant == 0;
        INFO(dtype_name(dt) << " D " << D << " variant " << variant);
        const float off = variant == 2 ? 5.f : 0.f;
        auto x = random_values(dt, rows * D, off - 1.f, off + 1.f);
        auto skip = random_values(dt, (bcast ? skip_rows : rows) * D, -1.f, 1.f);
        auto gamma = random_values(dt, D, 0.5f, 1.5f), beta = random_values(dt, D, -1.f, 1.f);
        auto bias = random_values(dt, D, -1.f, 1.f);
        Buf dx(rows * D * esz), dskip(skip.size() * esz), dg(D * esz), db(D * esz), dbias(D * esz);
        Buf dy(rows * D * esz), dsum(rows * D * esz), dmean(rows * 4), dinv(rows * 4);
        upload(dt, dx.p, x);
        upload(dt, dskip.p, skip);
        upload(dt, dg.p, gamma);
        upload(dt, db.p, beta);
        upload(dt, dbias.p, bias);
        cuda_fused::NormArgs a;
        a.dtype = dt;
        a.rows = rows;
        a.D = D;
        a.x = dx.p;
        a.skip = has_skip ? dskip.p : nullptr;
        a.skip_rows = has_skip ? (bcast ? skip_rows : rows) : 0;
        a.bias = variant == 0 ? dbias.p : nullptr;
        a.gamma = dg.p;
        a.beta = rms ? nullptr : db.p;
        a.y = dy.p;
        a.sum = variant == 0 ? dsum.p : nullptr;
        a.mean = variant == 0 ? static_cast<float*>(dmean.p) : nullptr;
        a.inv_std = variant == 0 ? static_cast<float*>(dinv.p) : nullptr;
        a.eps = 1e-5f;
        a.rms = rms;

        // fp64 reference.
        std::vector<double> want_y(rows * D), want_sum(rows * D), want_mean(rows), want_inv(rows);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<double> z(D);
          double m = 0;
          for (int64_t j = 0; j < D; ++j) {
            double v = x[r * D + j];
            if (variant == 0) v += bias[j];
            if (has_skip) v += skip[(bcast ? r % skip_rows : r) * D + j];
            z[j] = v;
            want_sum[r * D + j] = v;
            m += rms ? v * v : v;
          }
          m /= D;
          double var = 0;
          if (!rms)
            for (double v : z) var += (v - m) * (v - m);
          const double inv = rms ? 1.0 / std::sqrt(m + 1e-5) : 1.0 / std::sqrt(var / D + 1e-5);
          want_mean[r] = rms ? 0.0 : m;
          want_inv[r] = inv;
          for (int64_t j = 0; j < D; ++j)
            want_y[r * D + j] = ((rms ? z[j] : z[j] - m) * inv) * gamma[j] + (rms ? 0.0 : beta[j]);
        }
        const double tol = dt == DType::Float ? 1e-5 : 2e-3;
        for (int warp = 1; warp >= 0; --warp) {
          INFO("warp path " << warp);
          cuda_fused::set_norm_warp_rows(warp != 0);
          cuda_check::ck(cudaMemset(dy.p, 0xff, rows * D * esz), "poison");
          cuda_check::ck(cudaMemset(dsum.p, 0xff, rows * D * esz), "poison");
          cuda_check::ck(cudaMemset(dmean.p, 0xff, rows * 4), "poison");
          cuda_check::ck(cudaMemset(dinv.p, 0xff, rows * 4), "poison");
          cuda_check::ck(cudaDeviceSynchronize(), "poison");  // ordered before a non-blocking stream
          cuda_fused::launch_norm(a, s);
          cuda_check::ck(cudaStreamSynchronize(s), "norm");
          CHECK(rel_err(download(dt, dy.p, rows * D), want_y) < tol);
          if (variant == 0) {
            CHECK(rel_err(download(dt, dsum.p, rows * D), want_sum) < tol);
            CHECK(rel_err(download(DType::Float, dmean.p, rows), want_mean) < 1e-4);
            CHECK(rel_err(download(DType::Float, dinv.p, rows), want_inv) < 1e-4);
          }
          if (dt != DType::Float) {  // y written as fp32 (a float graph output of a 16-bit run)
            Buf dy32(rows * D * 4);
            cuda_check::ck(cudaMemset(dy32.p, 0xff, rows * D * 4), "poison");
            cuda_check::ck(cudaDeviceSynchronize(), "poison");
            cuda_fused::NormArgs a32 = a;
            a32.y = dy32.p;
            a32.y_fp32 = true;
            cuda_fused::launch_norm(a32, s);
            cuda_check::ck(cudaStreamSynchronize(s), "norm fp32 y");
            CHECK(rel_err(download(DType::Float, dy32.p, rows * D), want_y) < 1e-4);
          }
        }
        cuda_fused::set_norm_warp_rows(true);
      }
    }
  }
  cudaStreamDestroy(s);
}
