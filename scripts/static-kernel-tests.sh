#!/usr/bin/env bash
# static-kernel-tests.sh — builds test_kernels, test_repack and test_model as static
# x86-64 binaries into OUT (default .avx512/, git-ignored via .git/info/exclude) with a
# few tiny fixtures, so the CPU kernels can be checked on another x86-64 host that has
# none of our build dependencies (e.g. an AVX-512 machine):
#   cd OUT && ./test_kernels && TH_CPU=avx512 SHARED=$PWD ./test_model
# test_model's checks of fixtures not copied (BF16, most quantized types) fail there.
set -e
cd "$(dirname "$0")/.."
OUT=${1:-.avx512}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
make --no-print-directory lib >/dev/null
mkdir -p "$OUT/fixtures/tiny/golden"
for t in test_kernels test_repack test_model; do
    cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -Itests -static -o "$OUT/$t" "tests/$t.c" \
       build/libtheseus.a -lpcre2-8 -lutf8proc -lm -pthread
done
for t in F32 F16 Q8_0 Q4_0 Q4_1 Q4_K_M; do
    cp "$SHARED/fixtures/tiny/tiny-$t.gguf" "$OUT/fixtures/tiny/"
    cp "$SHARED/fixtures/tiny/golden/tiny-$t.logits" "$OUT/fixtures/tiny/golden/"
done
echo "static kernel tests in $OUT ($(du -sh "$OUT" | cut -f1))"
