#!/usr/bin/env bash
# spec_identity.sh — the slow greedy-identity run of speculative decoding (not part
# of tests/run.sh): 20 prompts x 128 tokens on SmolLM2 and Gemma 3 270M (when
# present), each drafter against plain batch-invariant decoding (tests/test_spec.c's
# test_greedy_identity_*). Usage: BUILD=build tests/spec_identity.sh
set -u
BUILD=${BUILD:-build}
TH_SPEC_PROMPTS=${TH_SPEC_PROMPTS:-20} TH_SPEC_TOKENS=${TH_SPEC_TOKENS:-128} \
# TH_SPEC_DRAFT_SMOL / TH_SPEC_DRAFT_GEMMA: a draft file other than the target (e.g. its Q4_0)
TH_TEST=test_greedy_identity_smollm,test_greedy_identity_gemma "$BUILD/tests/test_spec"
