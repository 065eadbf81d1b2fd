#!/usr/bin/env bash
# Byte-for-byte regression check of the optimizer over every model in models/.
#
#   tools/compare_fuseopt_outputs.sh record  DIR [FUSEOPT]   # before a refactor
#   tools/compare_fuseopt_outputs.sh compare DIR [FUSEOPT]   # after it: exit 1 on any difference
#   tools/compare_fuseopt_outputs.sh check   DIR [FUSERUN]   # fuserun --check on the CPU backend
#
# For every models/**/model.onnx, runs `FUSEOPT -q model.onnx DIR/<path>.onnx` (default
# FUSEOPT: build/bin/fuseopt) and keeps its exit status and stderr. `compare` writes into
# DIR.new/ and cmp's each output (and its .onnx.data side file, if any) and exit status with
# the recorded one. Run from the repository root. A behaviour-preserving change must report
# "identical" for every model. `check` runs `FUSERUN --backend cpu --check test_data_set_0`
# (default FUSERUN: build/bin/fuserun) on every original model and on its optimized output in
# DIR (recorded or compared), and lists the ones that fail.
set -u
mode=${1:-}; dir=${2:-}; fuseopt=${3:-build/bin/fuseopt}
if [[ ( $mode != record && $mode != compare && $mode != check ) || -z $dir ]]; then
  sed -n '2,15p' "$0" >&2; exit 2
fi
if [[ $mode == check ]]; then
  fuserun=${3:-build/bin/fuserun}; n=0; bad=0
  [[ -d $dir.new ]] && dir=$dir.new
  while IFS= read -r m; do
    for f in "$m" "$dir/$m"; do
      n=$((n + 1))
      if ! "$fuserun" --backend cpu --check "$(dirname "$m")/test_data_set_0" "$f" >"${TMPDIR:-/tmp}/compare_fuseopt_check.log" 2>&1; then
        echo "FAILS: $fuserun --backend cpu --check $(dirname "$m")/test_data_set_0 $f"; bad=$((bad + 1))
        tail -3 "${TMPDIR:-/tmp}/compare_fuseopt_check.log"
      fi
    done
  done < <(find models -name model.onnx | sort)
  echo "fuserun --check on the CPU: $((n - bad)) of $n runs pass ($((n / 2)) models, original and optimized)"
  (( bad == 0 )); exit
fi
[[ -x $fuseopt ]] || { echo "no fuseopt binary at $fuseopt" >&2; exit 2; }
out=$dir; [[ $mode == compare ]] && out=$dir.new
[[ $mode == compare && ! -d $dir ]] && { echo "no recorded baseline in $dir" >&2; exit 2; }
rm -rf "$out"; mkdir -p "$out"

run_one() {  # model -> writes $out/<model>.onnx, .rc, .err
  local m=$1 o=$out/$1
  mkdir -p "$(dirname "$o")"
  "$fuseopt" -q "$m" "$o" 2>"$o.err"; echo $? >"$o.rc"
}

n=0; bad=0
while IFS= read -r m; do
  run_one "$m"; n=$((n + 1))
  [[ $mode == record ]] && continue
  for f in "$m" "$m.data" "$m.rc"; do
    a=$dir/$f; b=$out/$f
    if [[ -e $a || -e $b ]] && ! cmp -s "$a" "$b"; then
      echo "DIFFERS: $f"; bad=$((bad + 1))
    fi
  done
done < <(find models -name model.onnx | sort)

if [[ $mode == record ]]; then
  echo "recorded $n models in $dir ($(grep -lv '^0$' $(find "$dir" -name '*.rc') | wc -l) with a nonzero exit)"
elif (( bad )); then
  echo "$bad difference(s) over $n models"; exit 1
else
  echo "identical: $n models"
fi
