#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
  // Tests never read or write the user's persisted GEMM tuning cache
  // (kernels/cuda/gemm_tune_cache.h): a winner stored by another process would
  // change which path a test exercises. A test may still point it at a file.
  setenv("FUSEOPT_GEMM_CACHE", "off", 0);
  return Catch::Session().run(argc, argv);
}
