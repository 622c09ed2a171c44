#!/usr/bin/env bash
# t_neon.sh — the NEON (aarch64 dotprod) kernels on any host: cross-builds
# tests/test_kernels_neon.c with the kernel sources (make neon-test, static) and runs
# it under qemu-aarch64 -cpu max (dotprod present: every NEON kernel against the
# reference), then once more on a CPU model without dotprod (cortex-a53), where the
# run-time detection must fall back to the generic level. On an aarch64 host the
# binary runs natively. Prints the binary's ok/FAIL/SKIP lines.
set -u
cd "$(dirname "$0")/.."
CROSS=${AARCH64_CC:-aarch64-linux-gnu-gcc}
BIN=build/aarch64/tests/test_kernels_neon
native=0
[ "$(uname -m)" = aarch64 ] && native=1
if [ $native -eq 0 ]; then
    command -v "$CROSS" >/dev/null 2>&1 || { echo "SKIP neon (no $CROSS: apt-get install gcc-aarch64-linux-gnu)"; exit 0; }
    command -v qemu-aarch64 >/dev/null 2>&1 || { echo "SKIP neon (no qemu-aarch64: apt-get install qemu-user)"; exit 0; }
fi
if [ $native -eq 1 ]; then
    make --no-print-directory AARCH64_CC="${AARCH64_CC:-cc}" neon-test >/tmp/t_neon.$$.log 2>&1
else
    make --no-print-directory neon-test >/tmp/t_neon.$$.log 2>&1
fi
if [ $? -ne 0 ]; then
    tail -30 /tmp/t_neon.$$.log; rm -f /tmp/t_neon.$$.log
    echo "FAIL neon_build (make neon-test)"; exit 1
fi
rm -f /tmp/t_neon.$$.log
if [ $native -eq 1 ]; then
    "$BIN"
else
    qemu-aarch64 -cpu max "$BIN" || exit 1
    TH_EXPECT_LEVEL=generic qemu-aarch64 -cpu cortex-a53 "$BIN" level |
        sed -e 's/^\(ok\|FAIL\|SKIP\) \(.*\)/\1 \2 [cortex-a53: no dotprod]/'
    exit "${PIPESTATUS[0]}"
fi
