# theseus — build, test, run.
#   make            library (static + shared) and the theseus CLI
#   make test       dependencies, default model, all tests; ends with "N passed, N failed"
#   make run        default model, then chat with it on stdin
#   make asan       everything with ASan+UBSan into build/asan, then the tests
#   make fuzz       libFuzzer targets (clang) into build/fuzz
#   make install PREFIX=/usr/local
#   make CUDA=1     also the CUDA backend

CC      ?= cc
ifeq ($(CUDA),1)
BUILD   ?= build/cuda
endif
BUILD   ?= build
SHARED  ?= $(abspath ../shared)
PREFIX  ?= /usr/local
OPT     ?= -O2
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -pthread \
               -Iinclude -Isrc $(OPT) -g
CFLAGS  += $(CFLAGS_BASE) $(EXTRA_CFLAGS)
PKGS    := libpcre2-8 libcjson libutf8proc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lpcre2-8 -lcjson -lutf8proc)
LDLIBS  += $(PKG_LIBS) -lm -pthread
CFLAGS  += $(PKG_CFLAGS)

ARCH := $(shell uname -m)

# Library sources: everything under src/ except the CUDA backend (but its
# plain-C split layouts, src/cuda/split.c, which tests/test_split.c checks
# without a GPU) and the CPU kernel levels (src/cpu/<level>/) this host cannot build.
X86_LEVELS   := src/cpu/avx2/% src/cpu/avx512/%
ARM64_LEVELS := src/cpu/neon/%
LIB_SRC := $(filter-out src/cuda/%, $(wildcard src/*.c src/*/*.c src/cpu/*/*.c)) src/cuda/split.c
ifneq ($(ARCH),x86_64)
LIB_SRC := $(filter-out $(X86_LEVELS), $(LIB_SRC))
endif
ifneq ($(ARCH),aarch64)
LIB_SRC := $(filter-out $(ARM64_LEVELS), $(LIB_SRC))
endif
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)

TOOL_SRC := $(wildcard tools/*.c tools/serve/*.c)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)

TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

ifeq ($(CUDA),1)
NVCC     ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell which $(NVCC))))
NVFLAGS  ?= -O3 -std=c++17 -Iinclude -Isrc -Xcompiler -fPIC,-Wall -lineinfo \
            -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
CU_SRC   := $(wildcard src/cuda/*.cu)
CU_CSRC  := $(filter-out src/cuda/split.c, $(wildcard src/cuda/*.c))
LIB_OBJ  += $(CU_SRC:%.cu=$(BUILD)/%.o) $(CU_CSRC:%.c=$(BUILD)/%.o)
CFLAGS   += -DTH_CUDA=1 -I$(CUDA_HOME)/include
LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
endif

.PHONY: all lib tools tests bench test run asan fuzz fuzz-bins install clean deps model check-tests neon-test
all: lib $(BUILD)/theseus

lib: $(BUILD)/libtheseus.a $(BUILD)/libtheseus.so

$(BUILD)/libtheseus.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libtheseus.so: $(LIB_OBJ)
	$(CC) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/theseus: $(TOOL_OBJ) $(BUILD)/libtheseus.a
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libtheseus.a $(LDLIBS) -lmicrohttpd
	ln -sf $(BUILD)/theseus theseus 2>/dev/null || true

# Per-level flags chosen by directory: src/cpu/avx2/, src/cpu/avx512/, src/cpu/neon/.
ISA_FLAGS_avx2   := -mavx2 -mfma -mf16c -mbmi2
ISA_FLAGS_avx512 := -mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
ISA_FLAGS_neon   := -march=armv8.2-a+dotprod+fp16
isa_flags = $(if $(filter src/cpu/avx512/%,$1),$(ISA_FLAGS_avx512),$(if $(filter src/cpu/avx2/%,$1),$(ISA_FLAGS_avx2),$(if $(filter src/cpu/neon/%,$1),$(ISA_FLAGS_neon))))

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call isa_flags,$<) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/%.c tests/check.h tests/logits.h tests/kernel_inputs.h $(BUILD)/libtheseus.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libtheseus.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libtheseus.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtheseus.a $(LDLIBS)

# the hybrid tests' shared speculative-decoding check
$(BUILD)/tests/test_hybrid $(BUILD)/tests/test_cuda_hybrid: tests/hyb_spec.h

# test_harden also compiles the server's pure parts (request-head checks, key digest)
$(BUILD)/tests/test_harden: tools/serve/serve_frame.c tools/serve/serve_frame.h tools/serve/serve_auth.c tools/serve/serve.h

tests: $(TEST_BIN)
bench: $(BENCH_BIN)

deps:
	@scripts/setup-deps.sh

model:
	@scripts/fetch-model.sh

# The README's test command. Dependencies first (a fresh machine has none).
# (builds with one job per core: `make test` is run without -j)
NPROC := $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all tests bench
	@scripts/fetch-model.sh
	@scripts/fetch-gemma3.sh || echo "warning: Gemma 3 270M could not be fetched; its checks will be skipped"
	@BUILD=$(BUILD) SHARED=$(SHARED) tests/run.sh

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/fetch-model.sh
	@$(BUILD)/theseus chat -m models/SmolLM2-135M-Instruct.Q4_1.gguf --system "You are a helpful assistant."

asan: deps
	@$(MAKE) --no-print-directory BUILD=build/asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDLIBS_EXTRA= all tests bench
	@scripts/fetch-model.sh
	@BUILD=build/asan SHARED=$(SHARED) ASAN=1 tests/run.sh

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
# Targets over server code link the tool sources they test (no libmicrohttpd).
FUZZ_EXTRA_fuzz_request := tools/serve/serve_req.c tools/serve/serve_resp.c tools/serve/serve_tools.c
FUZZ_EXTRA_fuzz_http    := tools/serve/serve_frame.c
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itools -Itools/serve $(PKG_CFLAGS) -O1 -g \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/bin/%)
# the library with the sanitizers (static only), then every target, one job per core
fuzz: deps
	@$(MAKE) --no-print-directory -j$(NPROC) CC=clang BUILD=build/fuzz \
	  OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  build/fuzz/libtheseus.a
	@$(MAKE) --no-print-directory -j$(NPROC) fuzz-bins
fuzz-bins: $(FUZZ_BIN)
.SECONDEXPANSION:
FUZZ_HDRS := $(wildcard include/*.h src/*.h src/*/*.h tools/*.h tools/serve/*.h)
build/fuzz/bin/%: tests/fuzz/%.c $$(FUZZ_EXTRA_$$*) build/fuzz/libtheseus.a $(FUZZ_HDRS)
	@mkdir -p $(@D)
	@echo "  fuzz target $*"
	@clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_EXTRA_$*) build/fuzz/libtheseus.a $(LDLIBS)

# NEON kernels on an x86 host: cross-build what the kernel tests need (core, quant,
# cpu with its neon level, gguf for the fixture weights; no PCRE2/cJSON/utf8proc) with the aarch64 cross compiler,
# statically linked so that qemu-aarch64 runs it without a sysroot (tests/t_neon.sh).
AARCH64_CC  ?= aarch64-linux-gnu-gcc
NEON_BUILD  := build/aarch64
# (the kernels only: not the CPU backend's forward pass, which needs the whole library)
CPU_FORWARD := $(addprefix src/cpu/,backend.c matmul.c attention.c moe.c mla.c repack_model.c deltanet.c)
NEON_SRC    := $(filter-out $(CPU_FORWARD), $(wildcard src/core/*.c src/quant/*.c src/cpu/*.c src/cpu/neon/*.c src/gguf/*.c)) \
               src/precision/assign.c src/precision/config.c src/eval/imatrix_file.c   # the quantizer's per-tensor plan
NEON_OBJ    := $(NEON_SRC:%.c=$(NEON_BUILD)/%.o)
NEON_CFLAGS := $(filter-out -fPIC,$(CFLAGS_BASE))

neon-test: $(NEON_BUILD)/tests/test_kernels_neon

$(NEON_BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(AARCH64_CC) $(NEON_CFLAGS) $(call isa_flags,$<) -MMD -MP -c $< -o $@

$(NEON_BUILD)/tests/test_kernels_neon: tests/test_kernels_neon.c tests/check.h tests/kernel_inputs.h $(NEON_OBJ)
	@mkdir -p $(@D)
	$(AARCH64_CC) $(NEON_CFLAGS) -Itests -static -o $@ $< $(NEON_OBJ) -lm -pthread

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/theseus.h include/theseus_eval.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libtheseus.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libtheseus.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/theseus $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' -e 's|@PKGS@|$(PKGS)|' theseus.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/theseus.pc

clean:
	rm -rf build theseus

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(wildcard $(NEON_OBJ:.o=.d))
