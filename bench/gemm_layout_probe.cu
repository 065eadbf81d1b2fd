// GEMM layout probe (issue 10): is cuBLASLt slower on fuseopt's row-major
// A[M,K]·B[K,N] ("NN" in Lt's column-major view) than on the PyTorch layout
// A[M,K]·W[N,K]ᵀ ("TN", both operands K-major), and does split-K help small M?
// Standalone so it builds on the GPU machine with nvcc alone:
//
//   nvcc -O2 -arch=sm_90 bench/gemm_layout_probe.cu -lcublasLt -o /tmp/probe && /tmp/probe
//
// For each shape: the heuristic's first algorithm and the best of its top 8,
// for both layouts, fp16 in/out, fp32 compute, 32 MiB workspace; median of 50
// CUDA-event timings after 10 warm-ups, weights rotated over buffers > L2.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    auto e_ = (x);                                                                    \
    if (e_ != 0) {                                                                    \
      std::printf("error %d at %s:%d: %s\n", static_cast<int>(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void fill(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u + seed;
    h ^= h >> 13;
    p[i] = __float2half(((h & 0xffff) / 65536.f - 0.5f) * 0.1f);
  }
}

struct Shape {
  int M, K, N;
};

// tn = false: Lt A = our B [K,N] row-major (N×K col-major, op N); Lt B = our A (K×M, op N).
// tn = true:  Lt A = W [N,K] row-major (K×N col-major, op T);   Lt B = our A (K×M, op N).
float time_layout(cublasLtHandle_t h, const Shape& s, bool tn, int rank, std::vector<__half*>& ws, __half* a, __half* d,
                  void* work, size_t work_bytes, int* n_algos) {
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = tn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t la, lb, lc;
  if (tn)
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.K, s.N, s.K));
  else
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.N, s.K, s.N));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.K, s.M, s.K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, s.N, s.M, s.N));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wb = work_bytes;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wb, sizeof(wb)));
  cublasLtMatmulHeuristicResult_t res[8];
  int got = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, rank, res, &got));
  *n_algos = got;
  float alpha = 1.f, beta = 0.f;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int c = 0; c < got; ++c) {
    if (res[c].state != CUBLAS_STATUS_SUCCESS) continue;
    std::vector<float> t;
    for (int it = 0; it < 60; ++it) {
      __half* w = ws[it % ws.size()];
      CK(cudaEventRecord(e0));
      CK(cublasLtMatmul(h, op, &alpha, w, la, a, lb, &beta, d, lc, d, lc, &res[c].algo, work, res[c].workspaceSize, 0));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (it >= 10) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    best = std::min(best, t[t.size() / 2]);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return best;
}

// Split-K sweep on the NN layout: every heuristic candidate (top 8) with
// SPLITK_NUM forced to 1..16 and each reduction scheme cuBLASLt accepts
// (cublasLtMatmulAlgoCheck), fastest median. Prints the winner's split.
float time_splitk(cublasLtHandle_t h, const Shape& s, std::vector<__half*>& ws, __half* a, __half* d, void* work,
                  size_t work_bytes, int* best_split) {
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tn, sizeof(tn)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof(tn)));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, s.N, s.K, s.N));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, s.K, s.M, s.K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, s.N, s.M, s.N));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wb = work_bytes;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wb, sizeof(wb)));
  cublasLtMatmulHeuristicResult_t res[8];
  int got = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, res, &got));
  float alpha = 1.f, beta = 0.f;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  *best_split = 0;
  const int splits[] = {1, 2, 3, 4, 6, 8, 12, 16};
  const uint32_t schemes[] = {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                              CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE};
  for (int c = 0; c < got; ++c) {
    for (int sp : splits)
      for (uint32_t sch : schemes) {
        if (sp == 1 && sch != schemes[0]) continue;
        cublasLtMatmulAlgo_t algo = res[c].algo;
        int32_t spl = sp;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &spl, sizeof(spl)) != 0)
          continue;
        if (sp > 1 &&
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &sch, sizeof(sch)) != 0)
          continue;
        cublasLtMatmulHeuristicResult_t chk{};
        if (cublasLtMatmulAlgoCheck(h, op, la, lb, lc, lc, &algo, &chk) != CUBLAS_STATUS_SUCCESS) continue;
        if (chk.workspaceSize > work_bytes) continue;
        std::vector<float> t;
        bool ok = true;
        for (int it = 0; it < 40 && ok; ++it) {
          __half* w = ws[it % ws.size()];
          CK(cudaEventRecord(e0));
          ok = cublasLtMatmul(h, op, &alpha, w, la, a, lb, &beta, d, lc, d, lc, &algo, work, chk.workspaceSize, 0) == 0;
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          if (it >= 8) t.push_back(ms * 1000.f);
        }
        if (!ok || t.empty()) continue;
        std::sort(t.begin(), t.end());
        if (t[t.size() / 2] < best) {
          best = t[t.size() / 2];
          *best_split = sp * 10 + static_cast<int>(sch);
        }
      }
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return best;
}

int main() {
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  const size_t work_bytes = 32u << 20;
  void* work;
  CK(cudaMalloc(&work, work_bytes));
  const Shape shapes[] = {{128, 768, 2304}, {128, 768, 768},  {128, 768, 3072},  {128, 3072, 768},
                          {4096, 768, 2304}, {4096, 768, 3072}, {4096, 3072, 768}, {2048, 2048, 3072},
                          {2048, 2048, 16384}, {2048, 8192, 2048}, {128, 2048, 3072},  {128, 2048, 2048},
                          {128, 2048, 16384}, {128, 8192, 2048}, {1, 2048, 16384}};
  std::printf("%-18s %10s %10s %10s %10s   (us; NN = fuseopt's [K,N] weights, TN = torch's [N,K])\n", "M x K x N",
              "NN top1", "NN best8", "TN top1", "TN best8"); // then NN split-K best
  for (const Shape& s : shapes) {
    const size_t wn = static_cast<size_t>(s.K) * s.N;
    const int copies = std::max<size_t>(2, (200u << 20) / (wn * 2) + 1);
    std::vector<__half*> ws(copies);
    for (auto& w : ws) {
      CK(cudaMalloc(&w, wn * 2));
      fill<<<512, 256>>>(w, wn, 7);
    }
    __half *a, *d;
    CK(cudaMalloc(&a, static_cast<size_t>(s.M) * s.K * 2));
    CK(cudaMalloc(&d, static_cast<size_t>(s.M) * s.N * 2));
    fill<<<512, 256>>>(a, static_cast<size_t>(s.M) * s.K, 3);
    CK(cudaDeviceSynchronize());
    int n1, n8, m1, m8;
    float nn1 = time_layout(h, s, false, 1, ws, a, d, work, work_bytes, &n1);
    float nn8 = time_layout(h, s, false, 8, ws, a, d, work, work_bytes, &n8);
    float tn1 = time_layout(h, s, true, 1, ws, a, d, work, work_bytes, &m1);
    float tn8 = time_layout(h, s, true, 8, ws, a, d, work, work_bytes, &m8);
    char name[64];
    std::snprintf(name, sizeof name, "%dx%dx%d", s.M, s.K, s.N);
    int split = 0;
    const float sk = s.M <= 512 ? time_splitk(h, s, ws, a, d, work, work_bytes, &split) : 0.f;
    std::printf("%-18s %10.1f %10.1f %10.1f %10.1f %10.1f (split %d, scheme %d)  (%d / %d candidates)\n", name, nn1,
                nn8, tn1, tn8, sk, split / 10, split % 10, n8, m8);
    for (auto w : ws) cudaFree(w);
    cudaFree(a);
    cudaFree(d);
  }
  return 0;
}
