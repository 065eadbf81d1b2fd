// The GEMM autotuner's winners persisted on disk, so that later processes on
// the same device and cuBLASLt version pay no tuning pause (issue 10).
//
// One text line per configuration: "<key> <workspace> <workspace_request>
// <algo as 16 hex words>". The key names the device (name, compute capability),
// the cuBLASLt version and every field of the in-memory cache key, so a line
// never applies to another card or library. Lines are appended (one write per
// line, O_APPEND) and the last line of a key wins on load; a stored algorithm
// is re-validated with cublasLtMatmulAlgoCheck before it is used.
//
// Location: $FUSEOPT_GEMM_CACHE (a file path; "off" disables it), else
// $XDG_CACHE_HOME/fuseopt/gemm_algos.txt, else ~/.cache/fuseopt/gemm_algos.txt.
// An unwritable location disables persistence with one warning.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <string>

namespace fuseopt::cuda_fused::tune_cache {

struct Entry {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  size_t workspace_request = 0;
};

// The file in use, or "" when persistence is off.
std::string path();

// The persisted winner of `key` (the caller's configuration string).
bool lookup(const std::string& key, Entry* out);

// Records a tuned winner (in memory and appended to the file).
void store(const std::string& key, const Entry& e);

// Points the cache at `file` ("" = off) and reloads it (tests; the default
// location is read from the environment on first use).
void use_file(const std::string& file);

// The device/library part of every key: "<name>|sm<major><minor>|lt<version>".
std::string device_prefix(int device);

}  // namespace fuseopt::cuda_fused::tune_cache
