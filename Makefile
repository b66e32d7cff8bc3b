# Thin wrapper around CMake. `make test` and `make demo` work on a fresh
# Debian 12 machine as root: they install what they need first.
# BASE=3.5 builds the fork on OpenSSL 3.5 (Debian 13's) in build-3.5/, with
# its own libcrypto.so.3; the default base is 3.0 (Debian 12's) in build/.
BASE ?= 3.0
ifeq ($(BASE),3.0)
BUILD ?= build
else
BUILD ?= build-$(BASE)
endif
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)
# A test that fails is run once more before the run fails, and both runs are
# printed: two timing tests over the testbed (ern.net_seal_tap, net.testbed_selftest)
# fail about one run in ten on a loaded 2-core machine (README, Known flaky
# tests). A test that really fails, fails twice. CTEST_RETRY= turns it off.
CTEST_RETRY ?= --repeat until-pass:2

.PHONY: all deps configure build test demo bench fuzz asan clean distclean

all: build

deps:
	@bash tools/install-deps.sh

# CMake is configured once; afterwards ninja re-runs it when a CMake file,
# the patch series or our sources change.
configure: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DUTLS_BASE=$(BASE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# check-base.sh fails in one line when the distribution's libssl3 is newer
# than the Debian version the fork matches (a security update to rebase to).
# (The 3.5 base has no system library to match on Debian 12: not checked.)
test: build
	@[ "$(BASE)" != 3.0 ] || bash tools/check-base.sh
	cd $(BUILD) && ctest --output-on-failure --no-tests=error -j $(JOBS) $(CTEST_RETRY) $(CTEST_FLAGS)

demo: build
	@bash tools/demo.sh $(BUILD)

bench: build
	cmake --build $(BUILD) --target bench_all
	@echo "benchmark results: $(BUILD)/bench/*.json"
	python3 bench/report.py --bench-dir $(BUILD)/bench

fuzz:
	@bash tests/fuzz/run-fuzzers.sh $(FUZZ_SECONDS)

# The sanitizer build: the fork, the engine and their in-process tests under
# ASan+UBSan in a build tree of their own. Tests that preload the fork into
# uninstrumented programs (interop, examples) cannot load an ASan library and
# are left to the normal build.
asan:
	$(MAKE) build BUILD=build-asan CMAKE_FLAGS="-DUTLS_SANITIZE=ON -DUTLS_UPSTREAM_TESTS=OFF"
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L 'unit|fuzz|unordered' -LE 'example|interop'

clean:
	-cmake --build $(BUILD) --target clean

distclean:
	rm -rf $(BUILD) build-asan build-fuzz build-3.5
