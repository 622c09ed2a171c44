#!/usr/bin/env bash
# make.sh BINARY — writes NAME.out (stdout of each case in cases.txt) with BINARY,
# under TH_CPU=generic (the reference kernels, the same on every x86-64 machine).
# The committed .out files were made by the theseus binary of commit 7d59251
# (before run/chat moved onto the runtime) so that t_cli.sh checks the outputs
# did not change.
set -eu
B=${1:?usage: make.sh THESEUS_BINARY}
M=${THESEUS_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
D=$(dirname "$0")
grep -v '^#' "$D/cases.txt" | while IFS='|' read -r name cmd args; do
    [ -n "$name" ] || continue
    in=/dev/null; [ -f "$D/$name.stdin" ] && in="$D/$name.stdin"
    eval "set -- $args"
    # printf %b turns the \n of the case line into newlines inside a -p argument
    a=(); for x in "$@"; do a+=("$(printf '%b' "$x")"); done
    TH_CPU=generic "$B" "$cmd" -m "$M" -t 2 "${a[@]}" <"$in" >"$D/$name.out" 2>/dev/null
    echo "$name: $(wc -c <"$D/$name.out") bytes"
done
