// cuBLASLt wrapper: descriptors per call (cheap), heuristic algorithm per
// configuration cached (the expensive part), workspace from the caller.
#include "kernels/cuda/gemm_cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/gemm_tune_cache.h"

namespace fuseopt::cuda_fused {

namespace {

#define LT_CHECK(expr)                                                                          \
  do {                                                                                          \
    cublasStatus_t lt_st_ = (expr);                                                             \
    FUSE_CHECK(lt_st_ == CUBLAS_STATUS_SUCCESS, "cuBLASLt: " #expr " failed with status "       \
                                                    << static_cast<int>(lt_st_));               \
  } while (0)

constexpr size_t kMaxWorkspace = 32u << 20;
// Heuristic candidates timed per configuration on first use, and timed
// repetitions per candidate (after one untimed launch).
constexpr int kTuneCandidates = 8;
constexpr int kTuneReps = 5;
// Split-K variants added for few-tile shapes: splits of the first kSplitBases
// heuristic candidates, at most kSplitCandidates of them.
constexpr int kSplitBases = 3;
constexpr int kSplitCandidates = 21;
// A timed candidate replaces the heuristic's first choice only when it is this much faster in
// the timing loop: winners by a few percent there lost 1-2 % end to end inside the replayed graph
// (BERT-base with every GEMM tuned, session 28, NOTES-perf.md v33), while the few-tile shapes
// tuning is for gain 2x from split-K.
constexpr float kTuneMargin = 0.05f;

// Which configurations the first call tunes. Small (the default): those whose
// output has fewer 128x128 tiles than the card has SMs, where the heuristic's
// first choice leaves most SMs idle and a split-K candidate can be 2x faster
// (bench/gemm_layout_probe.cu, NOTES-perf.md v6); large GEMMs gained 2% from
// tuning (v4), not worth a pause. FUSEOPT_GEMM_AUTOTUNE=1 tunes every
// configuration, =0 none. Winners persist on disk (gemm_tune_cache.h).
enum class TuneMode { Off, Small, All };

std::atomic<int>& autotune_mode() {
  static std::atomic<int> mode{[] {
    const char* e = std::getenv("FUSEOPT_GEMM_AUTOTUNE");
    if (e && std::strcmp(e, "1") == 0) return static_cast<int>(TuneMode::All);
    if (e && std::strcmp(e, "0") == 0) return static_cast<int>(TuneMode::Off);
    return static_cast<int>(TuneMode::Small);
  }()};
  return mode;
}

// Read once per device: gemm() asks on every call (the tuning flag is part of
// the cache key), so no lock on this path.
int sm_count(int device) {
  static std::atomic<int> counts[64];
  if (device < 0 || device >= 64) return 1;
  int n = counts[device].load(std::memory_order_relaxed);
  if (n > 0) return n;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) n = 1;
  counts[device].store(n, std::memory_order_relaxed);
  return n;
}

// Fewer output tiles than SMs: the configurations split-K can speed up.
bool few_tiles(int64_t M, int64_t N, int64_t batch, int device) {
  const int64_t tiles = ((M + 127) / 128) * ((N + 127) / 128) * batch;
  return tiles < sm_count(device);
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::Float: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: FUSE_CHECK(false, "cuBLASLt GEMM: unsupported dtype " << dtype_name(t));
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::GeluTanh: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::GeluTanhBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool needs_bias(GemmEpilogue e) {
  return e == GemmEpilogue::Bias || e == GemmEpilogue::ReluBias || e == GemmEpilogue::GeluTanhBias;
}

// Largest power of two (<= 16) dividing the address: the heuristic must only
// return algorithms whose vector loads this pointer allows.
int alignment_of(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

struct AlgoKey {
  int device;
  int dtype;
  bool tf32;
  int d_dtype;
  int64_t M, N, K, batch, sa, sb, sd, ldd, lda;
  bool ta, tb;
  int epilogue;
  bool beta_nonzero;
  int align_a, align_b, align_d, align_bias;
  bool tuned;
  auto tie() const {
    return std::tie(device, dtype, tf32, d_dtype, M, N, K, batch, sa, sb, sd, ldd, lda, ta, tb, epilogue,
                    beta_nonzero, align_a, align_b, align_d, align_bias, tuned);
  }
  bool operator<(const AlgoKey& o) const { return tie() < o.tie(); }
};

struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;  // what the algorithm uses
  // What every call of this configuration asks the scratch allocator for: the
  // largest candidate's workspace when it was tuned. The same request on every
  // run keeps the memory plan's scratch sequence (and so the CUDA-graph
  // addresses) identical between the tuning run and later ones.
  size_t workspace_request;
  int candidates_timed;
  int winner_index;
};

GemmTuneInfo& last_info() {
  static GemmTuneInfo i;
  return i;
}

std::mutex& lt_mutex() {
  static std::mutex m;
  return m;
}
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static std::map<AlgoKey, AlgoChoice> c;
  return c;
}

// One handle per device, created on first use and kept for the process.
cublasLtHandle_t handle_for(int device) {
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(lt_mutex());
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  LT_CHECK(cublasLtCreate(&h));
  handles[device] = h;
  return h;
}

// RAII for the per-call descriptors.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  if (batch <= 1) return;
  int32_t count = static_cast<int32_t>(batch);
  LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                            sizeof(stride)));
}

// The in-memory key as text, for the persisted cache (gemm_tune_cache.h);
// the device index is left out (the prefix names the card itself).
std::string key_string(const AlgoKey& k) {
  std::string s;
  auto add = [&s](int64_t v) {
    if (!s.empty()) s += ',';
    s += std::to_string(v);
  };
  for (int64_t v : {int64_t(k.dtype), int64_t(k.tf32), k.M, k.N, k.K, k.batch, k.sa, k.sb, k.sd, int64_t(k.ta),
                    int64_t(k.tb), int64_t(k.epilogue), int64_t(k.beta_nonzero), int64_t(k.align_a),
                    int64_t(k.align_b), int64_t(k.align_d), int64_t(k.align_bias)})
    add(v);
  if (k.ldd != k.N) s += ",ldd" + std::to_string(k.ldd);  // packed rows keep the older keys
  if (k.d_dtype != k.dtype) s += ",d" + std::to_string(k.d_dtype);
  if (k.lda != (k.ta ? k.M : k.K)) s += ",lda" + std::to_string(k.lda);
  return s;
}

// Split-K variants of the first heuristic candidates, appended to `res` after
// cublasLtMatmulAlgoCheck accepts them (within the workspace cap). cuBLASLt's
// heuristic rarely offers split-K itself, yet for few-tile shapes (M = 128
// rows of BERT/Llama at batch 1) it is what fills the SMs. Returns the new count.
int add_split_k_candidates(cublasLtHandle_t h, const LtDescs& ds, cublasLtMatmulHeuristicResult_t* res, int n,
                           int64_t K) {
  const int base = std::min(n, kSplitBases);
  int out = n;
  for (int i = 0; i < base; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    for (int32_t split : {2, 3, 4, 6, 8, 12, 16}) {
      if (out >= kTuneCandidates + kSplitCandidates) return out;
      if (K < 64 * split) break;
      cublasLtMatmulAlgo_t algo = res[i].algo;
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split)) !=
          CUBLAS_STATUS_SUCCESS)
        break;
      const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme));
      cublasLtMatmulHeuristicResult_t chk{};
      if (cublasLtMatmulAlgoCheck(h, ds.op, ds.a, ds.b, ds.c, ds.c, &algo, &chk) != CUBLAS_STATUS_SUCCESS) continue;
      if (chk.workspaceSize > kMaxWorkspace) continue;
      chk.algo = algo;
      chk.state = CUBLAS_STATUS_SUCCESS;
      res[out++] = chk;
    }
  }
  return out;
}

}  // namespace

size_t gemm_algo_cache_size() {
  std::lock_guard<std::mutex> lock(lt_mutex());
  return algo_cache().size();
}

void set_gemm_autotune(bool on) {
  autotune_mode().store(static_cast<int>(on ? TuneMode::All : TuneMode::Off));
}
bool gemm_autotune() { return autotune_mode().load() != static_cast<int>(TuneMode::Off); }

GemmTuneInfo gemm_last_tune_info() {
  std::lock_guard<std::mutex> lock(lt_mutex());
  return last_info();
}

namespace {

// Mean time of kTuneReps launches of one candidate, or a negative value when
// cuBLASLt refuses it. A, B, C and the bias are only read; every launch writes
// D_timed: D itself where beta is 0, else a scratch copy of D's footprint, so
// that a residual (C, or D's own contents) is read as the real call reads it and
// left intact for that call.
float time_candidate(cublasLtHandle_t h, const LtDescs& ds, const cublasLtMatmulAlgo_t& algo, const void* A,
                     const void* B, const void* C, void* D_timed, void* workspace, size_t ws, float alpha,
                     float beta, cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1) {
  auto launch = [&] {
    return cublasLtMatmul(h, ds.op, &alpha, B, ds.a, A, ds.b, &beta, C, ds.c, D_timed, ds.c, &algo, workspace, ws,
                          stream);
  };
  if (launch() != CUBLAS_STATUS_SUCCESS) return -1.f;
  FUSED_CUDA_CHECK(cudaEventRecord(e0, stream), "cuBLASLt autotune");
  for (int r = 0; r < kTuneReps; ++r)
    if (launch() != CUBLAS_STATUS_SUCCESS) return -1.f;
  FUSED_CUDA_CHECK(cudaEventRecord(e1, stream), "cuBLASLt autotune");
  FUSED_CUDA_CHECK(cudaEventSynchronize(e1), "cuBLASLt autotune");
  float ms = 0.f;
  FUSED_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1), "cuBLASLt autotune");
  return ms / kTuneReps;
}

// Bytes D spans: its last batch item's last row ends the footprint.
size_t d_footprint_bytes(const GemmDesc& d, uint64_t ldd, DType d_type) {
  const int64_t elems = (d.batch - 1) * d.stride_d + (d.M - 1) * static_cast<int64_t>(ldd) + d.N;
  return static_cast<size_t>(elems) * dtype_size(d_type);
}

}  // namespace

void gemm(const GemmDesc& d, const void* A, const void* B, void* D, cudaStream_t stream, const ScratchFn& scratch) {
  FUSE_CHECK(d.M >= 0 && d.N >= 0 && d.K >= 0 && d.batch >= 1, "cuBLASLt GEMM: bad sizes");
  FUSE_CHECK(!needs_bias(d.epilogue) || d.bias, "cuBLASLt GEMM: bias epilogue without a bias pointer");
  if (d.M == 0 || d.N == 0) return;
  FUSE_CHECK(d.K > 0, "cuBLASLt GEMM: K = 0 must be handled by the caller");

  int device = 0;
  FUSED_CUDA_CHECK(cudaGetDevice(&device), "cuBLASLt GEMM");
  cublasLtHandle_t h = handle_for(device);

  const cudaDataType_t t = cuda_type(d.dtype);
  const DType d_type = d.d_dtype == DType::Undefined ? d.dtype : d.d_dtype;
  FUSE_CHECK(d_type == d.dtype || d_type == DType::Float,
             "cuBLASLt GEMM: " << dtype_name(d.dtype) << " product written as " << dtype_name(d_type));
  const cudaDataType_t td = cuda_type(d_type);  // C, D and the bias
  const cublasComputeType_t compute =
      (d.dtype == DType::Float && d.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  LtDescs ds;
  LT_CHECK(cublasLtMatmulDescCreate(&ds.op, compute, CUDA_R_32F));
  // Column-major view: Lt's A is our B, Lt's B is our A (see the header).
  cublasOperation_t op_lt_a = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_lt_b = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof(op_lt_a)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof(op_lt_b)));
  cublasLtEpilogue_t epi = lt_epilogue(d.epilogue);
  LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (needs_bias(d.epilogue)) {
    LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d.bias, sizeof(d.bias)));
    cudaDataType_t bt = td;
    LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    int64_t bias_stride = 0;  // one bias for every batch item
    LT_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride,
                                            sizeof(bias_stride)));
  }

  const uint64_t M = d.M, N = d.N, K = d.K;
  // Lt A = our B: stored row-major [K,N] -> column-major N×K (ld N); transposed [N,K] -> K×N (ld K).
  if (!d.trans_b)
    LT_CHECK(cublasLtMatrixLayoutCreate(&ds.a, t, N, K, N));
  else
    LT_CHECK(cublasLtMatrixLayoutCreate(&ds.a, t, K, N, K));
  // Lt B = our A: row-major [M,K] -> K×M (ld K); transposed [K,M] -> M×K (ld M).
  const uint64_t lda = d.lda > 0 ? static_cast<uint64_t>(d.lda) : (d.trans_a ? M : K);
  FUSE_CHECK(lda >= (d.trans_a ? M : K), "cuBLASLt GEMM: leading dimension " << lda << " of A is too small");
  if (!d.trans_a)
    LT_CHECK(cublasLtMatrixLayoutCreate(&ds.b, t, K, M, lda));
  else
    LT_CHECK(cublasLtMatrixLayoutCreate(&ds.b, t, M, K, lda));
  const uint64_t ldd = d.ldd > 0 ? static_cast<uint64_t>(d.ldd) : N;
  FUSE_CHECK(ldd >= N, "cuBLASLt GEMM: leading dimension " << ldd << " of D is below N = " << N);
  LT_CHECK(cublasLtMatrixLayoutCreate(&ds.c, td, N, M, ldd));
  set_batch(ds.a, d.batch, d.stride_b);
  set_batch(ds.b, d.batch, d.stride_a);
  set_batch(ds.c, d.batch, d.stride_d);

  // Tuning needs an uncaptured stream (it synchronises). A first call under capture takes the
  // heuristic's first choice and caches it, so later eager runs use what the graph holds. With
  // beta != 0 (the residual GEMMs of pre-LN layers: Llama's o-proj and down-proj at batch 1, whose
  // heuristic first choice is a split-K kernel plus a separate reduce) the candidates write a
  // scratch D, never D (see time_candidate).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FUSED_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture), "cuBLASLt GEMM");
  const TuneMode mode = static_cast<TuneMode>(autotune_mode().load());
  const bool split_k_pays = few_tiles(d.M, d.N, d.batch, device);
  const bool tune = mode == TuneMode::All || (mode == TuneMode::Small && (split_k_pays || d.tune));
  // C and D share one layout and one alignment preference: the smaller of the two pointers'.
  const void* C = d.beta != 0.f && d.c ? d.c : D;
  const int align_cd = std::min(alignment_of(D), alignment_of(C));
  AlgoKey key{device, static_cast<int>(d.dtype), d.tf32 && d.dtype == DType::Float, static_cast<int>(d_type),
              d.M, d.N, d.K, d.batch, d.stride_a, d.stride_b, d.stride_d, static_cast<int64_t>(ldd),
              static_cast<int64_t>(lda), d.trans_a, d.trans_b,
              static_cast<int>(d.epilogue), d.beta != 0.f, alignment_of(A), alignment_of(B), align_cd,
              d.bias ? alignment_of(d.bias) : 16, tune};
  AlgoChoice choice{};
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(lt_mutex());
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      choice = it->second;
      found = true;
    }
  }
  void* workspace = nullptr;
  if (!found) {
    LT_CHECK(cublasLtMatmulPreferenceCreate(&ds.pref));
    uint64_t ws = kMaxWorkspace;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                  sizeof(ws)));
    uint32_t al_a = key.align_b, al_b = key.align_a, al_cd = key.align_d;  // Lt's A is our B
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                                  sizeof(al_a)));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                                  sizeof(al_b)));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_cd,
                                                  sizeof(al_cd)));
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_cd,
                                                  sizeof(al_cd)));
    const std::string disk_key = tune ? tune_cache::device_prefix(device) + "|" + key_string(key) : std::string();
    tune_cache::Entry stored{};
    bool from_disk = false;
    if (tune && tune_cache::lookup(disk_key, &stored)) {
      // Re-validated: a stale line (other driver build) falls back to tuning.
      cublasLtMatmulHeuristicResult_t chk{};
      from_disk = cublasLtMatmulAlgoCheck(h, ds.op, ds.a, ds.b, ds.c, ds.c, &stored.algo, &chk) ==
                      CUBLAS_STATUS_SUCCESS &&
                  chk.workspaceSize <= stored.workspace_request;
      if (from_disk) choice = AlgoChoice{stored.algo, chk.workspaceSize, stored.workspace_request, -1, 0};
    }
    const bool timing = tune && !from_disk && capture == cudaStreamCaptureStatusNone;
    cublasLtMatmulHeuristicResult_t res[kTuneCandidates + kSplitCandidates] = {};
    int returned = 0;
    if (!from_disk) {
      LT_CHECK(cublasLtMatmulAlgoGetHeuristic(h, ds.op, ds.a, ds.b, ds.c, ds.c, ds.pref,
                                              timing ? kTuneCandidates : 1, res, &returned));
      FUSE_CHECK(returned > 0, "cuBLASLt GEMM: no algorithm for M=" << d.M << " N=" << d.N << " K=" << d.K
                                                                    << " dtype " << dtype_name(d.dtype));
      choice = AlgoChoice{res[0].algo, res[0].workspaceSize, res[0].workspaceSize, 0, 0};
      if (timing && split_k_pays) returned = add_split_k_candidates(h, ds, res, returned, d.K);
    }
    if (timing && returned > 1) {
      size_t max_ws = 0;
      for (int i = 0; i < returned; ++i)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) max_ws = std::max(max_ws, res[i].workspaceSize);
      // One scratch block: the workspace, then (beta != 0) the copy of D the candidates write.
      const size_t ws_span = (max_ws + 255) / 256 * 256;
      const size_t timed_d_bytes = d.beta != 0.f ? d_footprint_bytes(d, ldd, d_type) : 0;
      if (ws_span + timed_d_bytes > 0) {
        workspace = scratch(ws_span + timed_d_bytes);
        FUSE_CHECK(workspace, "cuBLASLt GEMM: no workspace");
      }
      void* D_timed = timed_d_bytes > 0 ? static_cast<char*>(workspace) + ws_span : D;
      cudaEvent_t e0 = nullptr, e1 = nullptr;
      FUSED_CUDA_CHECK(cudaEventCreate(&e0), "cuBLASLt autotune");
      FUSED_CUDA_CHECK(cudaEventCreate(&e1), "cuBLASLt autotune");
      float best = -1.f, first = -1.f;  // the fastest other candidate; the heuristic's first
      int best_index = -1;
      int timed = 0;
      try {
        for (int i = 0; i < returned; ++i) {
          if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
          const float t = time_candidate(h, ds, res[i].algo, A, B, C, D_timed, workspace, res[i].workspaceSize,
                                         d.alpha, d.beta, stream, e0, e1);
          if (t < 0.f) continue;
          ++timed;
          if (i == 0) {
            first = t;
          } else if (best < 0.f || t < best) {
            best = t;
            best_index = i;
          }
        }
      } catch (...) {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        throw;
      }
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      // choice holds the heuristic's first (index 0); another wins by kTuneMargin, or when the
      // first could not be timed.
      if (best_index > 0 && (first < 0.f || best < first * (1.f - kTuneMargin))) {
        choice.algo = res[best_index].algo;
        choice.workspace = res[best_index].workspaceSize;
        choice.winner_index = best_index;
      }
      choice.workspace_request = max_ws;
      choice.candidates_timed = timed;
      if (timed > 0) tune_cache::store(disk_key, tune_cache::Entry{choice.algo, choice.workspace, max_ws});
    }
    std::lock_guard<std::mutex> lock(lt_mutex());
    // First insertion wins when two threads tuned the same configuration.
    choice = algo_cache().emplace(key, choice).first->second;
    last_info() = GemmTuneInfo{choice.candidates_timed, choice.winner_index, choice.workspace};
  } else {
    std::lock_guard<std::mutex> lock(lt_mutex());
    last_info() = GemmTuneInfo{choice.candidates_timed, choice.winner_index, choice.workspace};
  }

  if (!workspace && choice.workspace_request > 0) {
    workspace = scratch(choice.workspace_request);
    FUSE_CHECK(workspace, "cuBLASLt GEMM: no workspace");
  }
  const float alpha = d.alpha, beta = d.beta;
  LT_CHECK(cublasLtMatmul(h, ds.op, &alpha, B, ds.a, A, ds.b, &beta, C, ds.c, D, ds.c, &choice.algo, workspace,
                          choice.workspace, stream));
}

}  // namespace fuseopt::cuda_fused
