#!/bin/sh
# run.sh NAME [SECONDS] — fuzz one harness for SECONDS (default 300), in one process.
# Run from the repository root after `make -C tests/fuzz all seeds`.
# Corpus (grows): build/fuzz/corpus/NAME; crashes: build/fuzz/artifacts/NAME/.
set -eu
name=$1; secs=${2:-300}
bin=build/fuzz/fuzz_$name
[ -x "$bin" ] || { echo "run.sh: $bin missing: make -C tests/fuzz" >&2; exit 2; }
corpus=build/fuzz/corpus/$name; art=build/fuzz/artifacts/$name
mkdir -p "$corpus" "$art"
dict=; [ -f tests/fuzz/$name.dict ] && dict=-dict=tests/fuzz/$name.dict
regress=; [ -d tests/fuzz/regress/$name ] && regress=tests/fuzz/regress/$name
maxlen=4096
case $name in  # inputs past max_len are cut: keep the seeds whole
    safetensors) maxlen=16384 ;;  # the mini seeds are ~10 KB (bigger fixtures get cut)
    gguf) maxlen=65536 ;;         # the mini seeds are 10-100 KB (a Q4_K one needs rows of 256)
    vocab) maxlen=16384 ;;        # the tiny vocab.json is ~7 KB
    tokjson) maxlen=32768 ;;      # the tiny tokenizer.json seeds are ~15 KB
    zip) maxlen=40960 ;;          # the mini checkpoints are up to 35 KB
    llmc) maxlen=16384 ;;         # the mini llm.c model is 10 KB
    jinja) maxlen=16384 ;;        # the longest chat templates are 5-6 KB
esac
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
    -max_len=$maxlen -print_final_stats=1 -artifact_prefix="$art/" $dict \
    "$corpus" build/fuzz/seeds/$name $regress
