// parallel_for over a small persistent pool: threads are created once (on
// first use) and woken per call, since spawning threads per MatMul costs more
// than the work for the small shapes of test models. A call made from inside
// a worker (nested parallelism) runs serially.
#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fuseopt {

namespace {

std::atomic<int> g_threads{0};
thread_local bool t_in_parallel = false;

class Pool {
 public:
  static Pool& get() {
    static Pool p;
    return p;
  }

  // Runs job(w) for w in [0, workers) with the caller as worker 0.
  void run(int workers, const std::function<void(int)>& job) {
    std::lock_guard<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    ensure_threads(workers - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      active_ = workers - 1;
      pending_ = workers - 1;
      ++generation_;
    }
    cv_.notify_all();
    t_in_parallel = true;
    job(0);
    t_in_parallel = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void ensure_threads(int n) {
    while (static_cast<int>(threads_.size()) < n) {
      int index = static_cast<int>(threads_.size()) + 1;
      threads_.emplace_back([this, index] { loop(index); });
    }
  }

  void loop(int index) {
    t_in_parallel = true;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index > active_) continue;  // not needed this time
        job = job_;
      }
      (*job)(index);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  int active_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace

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
  if (workers <= 1 || t_in_parallel) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + workers - 1) / workers;
  std::exception_ptr error;
  std::mutex error_mu;
  Pool::get().run(static_cast<int>(workers), [&](int w) {
    int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b >= e) return;
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace fuseopt
