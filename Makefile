# freight: the two commands a user needs are `make demo` and `make test`.
# Every target installs what is missing first (scripts/install-deps.sh).

CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)
FREIGHT := target/release/freight
# The interpreter the interop tests run (with rosbags), set up by `make deps`.
export FREIGHT_PYTHON := $(CURDIR)/.venv/bin/python

.PHONY: all deps build demo test lint bench fuzz clean

all: build

deps:
	@scripts/install-deps.sh

# Leaves the tool at target/release/freight.
build: deps
	$(CARGO) build --release --workspace --locked

# The main job: a 4K BGRA frame between two processes, loan vs copy vs raw iceoryx2.
demo: build
	$(FREIGHT) demo

# Every test, in release mode (large payloads; shares the build above), then a
# bounded fuzz run of every parser of untrusted bytes, then the lints.
# The network plane stays on loopback in tests: freight and the stock DDS peers
# the interop tests start read this configuration.
test: export CYCLONEDDS_URI = file://$(CURDIR)/crates/freight-dds/loopback.xml
test: build
	$(CARGO) test --release --workspace --locked
	scripts/fuzz-smoke.sh
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

clean:
	$(CARGO) clean
