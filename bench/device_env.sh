# Sourced by the device-call scripts in bench/ (ROOT set to the repository): the pack carried in
# .gpu (`tools/gpu.sh pack`) unpacked once, its binaries on PATH and its libraries (with CUDA's)
# on LD_LIBRARY_PATH. Sets G to the .gpu folder.
G="$ROOT/.gpu"
[ -x "$G/bin/fuserun" ] || tar -C "$G" -xf "$G/pack.tar.xz"
export PATH="$G/bin:$PATH" LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
