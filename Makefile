# freight: the two commands a user needs are `make demo` and `make test`.
# Every target installs what is missing first (scripts/install-deps.sh).

CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)
FREIGHT := target/release/freight
# The interpreter the interop tests run (with rosbags), set up by `make deps`.
export FREIGHT_PYTHON := $(CURDIR)/.venv/bin/python
# PyO3 is configured from one file (abi3, CPython 3.9 and later) for both
# maturin and cargo: were it configured per build, `make wheel` and `cargo
# build`/`cargo test` would rebuild PyO3 and everything above it in turn.
export PYO3_CONFIG_FILE := $(CURDIR)/crates/freight-py/pyo3-abi3.cfg

.PHONY: all deps build wheel install msgs demo test lint bench bench-python bench-ros2 lab soak fuzz clean

all: build

deps:
	@scripts/install-deps.sh

# Leaves the tool at target/release/freight, and beside it freight-bench-cpp, the
# C++ side of `freight bench latency --lang cpp`. The Python module is built by
# maturin alone (`make wheel`): it has no Rust tests, and cargo would build it
# with another profile, so that each build would undo the other's.
CRATES := --workspace --exclude freight-py
build: deps
	$(CARGO) build --release $(CRATES) --locked
	@$(MAKE) --no-print-directory target/release/freight-bench-cpp

# Written with the C++ API as a user would; it finds libfreight_c.so beside
# it, or in ../../lib where `make install` puts it (libexec/freight/).
target/release/freight-bench-cpp: crates/freight-c/bench/latency.cpp $(wildcard crates/freight-c/include/freight/*.h*) \
		$(wildcard crates/freight-c/include/freight/msgs/*.hpp) target/release/libfreight_c.so
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror -Icrates/freight-c/include -o $@ $< \
		-Ltarget/release -lfreight_c -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../../lib'

# The Python package as one abi3 wheel (CPython 3.9 and later) in target/wheels/;
# `pip install target/wheels/freight-*.whl` installs it (or `pip install .`).
wheel: deps
	rm -f target/wheels/freight-*.whl
	.venv/bin/maturin build --release --locked --out target/wheels

# The tool and the C and C++ API (libfreight_c, include/freight/, the CMake
# package `freight`, freight.pc) into PREFIX: `make install PREFIX=$$HOME/.local`.
PREFIX ?= /usr/local
install: build
	scripts/install.sh $(PREFIX)

# The Python modules and stubs of the built-in messages (python/freight/msgs/)
# and their C++ headers (crates/freight-c/include/freight/msgs/), regenerated from interfaces/ after a `.msg` file changed; the Rust types and
# the Python classes are generated at build time. `make test` fails while they
# are out of date.
msgs: deps
	FREIGHT_MSG_GEN_WRITE=1 $(CARGO) test --release --locked -p freight-msg-gen --test python_modules --test cpp_headers

# The main job: one 4K BGRA frame between two processes, loan vs copy vs raw
# iceoryx2; then the robot-arm renderer -> display demo, GPU frames between two
# processes over cuda vs cuda-host vs cpu (on a machine with an NVIDIA driver;
# torch is installed into .venv for it), or its CPU version (numpy, shm vs cpu),
# end to end and transport only. The robot arm comes last because its last line
# is the headline, with the numbers of that run.
demo: build wheel
	.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/freight-*.whl
	@if ldconfig -p | grep -q 'libcuda\.so\.1' && ! .venv/bin/python -c 'import torch' 2>/dev/null; then \
		echo "an NVIDIA driver is present: installing torch into .venv for the GPU demo"; \
		.venv/bin/pip install -q --disable-pip-version-check torch; \
	fi
	$(FREIGHT) demo
	$(FREIGHT) demo robot-arm --python .venv/bin/python

# Every test, in release mode (large payloads; shares the build above), with the
# wheel installed in .venv first (`bench ros2` runs freight's Python stack): the Rust
# tests, then the Python tests against the wheel, then a bounded fuzz run of
# every parser of untrusted bytes, then the check that the wheel's build reuses
# the crates of `make build` (crates/freight-workspace-hack), then the lints.
# The network plane stays on loopback in tests: freight and the stock DDS peers
# the interop tests start read this configuration.
test: export CYCLONEDDS_URI = file://$(CURDIR)/crates/freight-dds/loopback.xml
# A Rust test may skip only for a missing GPU: any other reason (no root, no
# namespaces, a missing interpreter) fails it (crates/freight-testkit).
test: export FREIGHT_TEST_STRICT = 1
test: build wheel
	.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/freight-*.whl
	$(CARGO) test --release $(CRATES) --locked
	.venv/bin/python -m pytest -q -rs --durations=15 python/tests
	$(FREIGHT) bench soak --duration 60s
	scripts/fuzz-smoke.sh
	scripts/check-build-sharing.py
	$(MAKE) --no-print-directory lint

# Longer fuzzing: `make fuzz FUZZ_SECONDS=600`.
fuzz: deps
	scripts/fuzz-smoke.sh

lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets --locked -- -D warnings

# The full latency table recorded in BENCHMARKS.md.
bench: build
	$(FREIGHT) bench latency --json bench-latency.json --plot bench-latency.png

# The Python API against the iceoryx2 Python binding (table in BENCHMARKS.md).
bench-python: build wheel
	.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/freight-*.whl
	$(FREIGHT) bench latency --lang python --python .venv/bin/python --json bench-latency-python.json

# freight against stock rclpy of Jazzy and Kilted (root; about a minute; table in
# BENCHMARKS.md).
bench-ros2: build wheel
	.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/freight-*.whl
	$(FREIGHT) bench ros2 --python .venv/bin/python --json bench-ros2.json

# The lossy-link matrix recorded in BENCHMARKS.md (root; about 25 minutes).
lab: build
	$(FREIGHT) lab wireless --seconds 10 --python .venv/bin/python --json lab-wireless.json --plot lab-wireless.png

# The chaos soak for an hour (root; processes killed and stopped while every message is
# checked; the 60 s version runs in `make test`).
soak: build
	$(FREIGHT) bench soak --duration 1h --json soak.json

clean:
	$(CARGO) clean
