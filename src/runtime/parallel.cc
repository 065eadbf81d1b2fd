#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fuseopt {

namespace {
std::atomic<int> g_threads{0};
}

void set_num_threads(int n) { g_threads = std::max(0, n); }

int num_threads() {
  int n = g_threads.load();
  if (n > 0) return n;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 64u));
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t workers = std::min<int64_t>(num_threads(), n / min_chunk);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](int64_t b, int64_t e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  for (int64_t w = 1; w < workers; ++w) {
    int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) threads.emplace_back(run, b, e);
  }
  run(0, std::min(n, chunk));
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace fuseopt
