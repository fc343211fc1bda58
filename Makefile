# The two entry points of the README: `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
HANDOFF := $(BUILD_DIR)/bin/handoff
DEMO_MODEL := models/default

.PHONY: deps npm-deps configure build demo test clean

deps:
	@./scripts/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

$(DEMO_MODEL)/config.json: | build
	$(HANDOFF) make-model --family deepseek_v32 --preset demo --seed 1 --dtype bf16 --out $(DEMO_MODEL)

demo: build $(DEMO_MODEL)/config.json
	$(HANDOFF) generate --model $(DEMO_MODEL) --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 32

# The text-module tests compare against JavaScript references installed from tests/package-lock.json.
npm-deps:
	@./scripts/install_npm_deps.sh

test: build npm-deps
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD_DIR)
