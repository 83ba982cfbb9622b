#!/usr/bin/env bash
# bench/sluice/profile.sh: perf record of sluice-bench-job on one workload of bench/run, on a
# fresh input topic, from start until its last output record is readable; then a summary.
# `overflow` records the sluice-overflow-buffer job's direct path instead (JSON values, every
# customer far under its rate, as bench/run --workloads overflow runs it).
#
#   bench/sluice/profile.sh passthrough|count|overflow at_least_once|exactly_once RECORDS OUT [perf record args...]
#
# The input has 100-byte values over ${KEYS:-10000} keys.
# Needs SLUICE_BOOTSTRAP (a broker), perf, and the programs built in ${BUILD_DIR:-build-bench}
# (bench/run builds them). Writes OUT.data (open it with perf report -i OUT.data) and prints
# the inclusive (children) percentages of the main entries. Default perf arguments:
# -F 999 --call-graph dwarf,16384 (RelWithDebInfo has no frame pointers).
set -euo pipefail
if [[ $# -lt 4 ]]; then
  sed -n 2,10p "$0"
  exit 2
fi
workload=$1 guarantee=$2 records=$3 out=$4
shift 4
perf_args=("$@")
[[ ${#perf_args[@]} -gt 0 ]] || perf_args=(-F 999 --call-graph dwarf,16384)
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$repo/build-bench}
bin=$build/bench
bootstrap=${SLUICE_BOOTSTRAP:?set SLUICE_BOOTSTRAP to a broker}
keys=${KEYS:-10000}
id=profile-$workload-$(date +%s)-$$
create=$id-out
value_format=()
job=("$bin/sluice-bench-job" --workload "$workload")
if [[ $workload == overflow ]]; then
  value_format=(--value-format json)
  create+=,$id-expired,$id-rates
  job=("$build/topologies/overflow_buffer/sluice-overflow-buffer"
    --config "$repo/topologies/overflow_buffer/overflow_buffer.properties"
    --set "expired.topic=$id-expired" --set "rates.topic=$id-rates"
    --set overflow.default.rate.per.second=1000000)
fi
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT

"$bin/sluice-bench-tool" load --bootstrap "$bootstrap" --topic "$id-in" --partitions 4 --records "$records" \
  --keys "$keys" --value-bytes 100 --also-create "$create" ${value_format[@]+"${value_format[@]}"} >/dev/null
check=()
[[ $workload == count ]] && check=(--keys "$keys" --records "$records")
[[ $workload == overflow ]] && check=(--values any)
"$bin/sluice-bench-tool" verify --bootstrap "$bootstrap" --topic "$id-out" --expect "$records" --linger-s 1 \
  "${check[@]}" >"$out.verify" &
verifier=$!
sleep 0.5  # subscribed before the job writes
if [[ $workload == overflow ]]; then
  job+=(--set "input.topic=$id-in" --set "output.topic=$id-out")
else
  job+=(--input "$id-in" --output "$id-out")
fi
perf record "${perf_args[@]}" -o "$out.data" -- "${job[@]}" --set "bootstrap.servers=$bootstrap" --set "application.id=$id" \
  --set "processing.guarantee=$guarantee" --set "state.dir=$state" 2>"$out.log" &
recorder=$!
wait "$verifier" || true
kill -TERM "$(pgrep -P "$recorder" -f "${job[0]##*/}")"
wait "$recorder" || true
cat "$out.verify"

perf report -i "$out.data" --stdio -g none --sort comm 2>/dev/null | grep -E '^# (Samples|Event count)|^ +[0-9]'
perf report -i "$out.data" --children --stdio -g none --percent-limit 1 2>/dev/null |
  grep -v -E '_Hashtable|unordered_map' | grep -E 'stream_thread::loop_once|poll_batch|producer::produce|changelog_logger::log|aggregate_node|store_cache::|rocksdb_store::|key_value_store.*::(get|put)|commit_all|clock_gettime \(inlined\)|copy_message|WriteBatchWithIndex::(Put|GetFromBatchAndDB)$|DBImpl::Write$' |
  sed -E 's/std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >/string/g' | cut -c1-160
