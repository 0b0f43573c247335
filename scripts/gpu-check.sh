#!/usr/bin/env bash
# The GPU checklist: every CUDA test under compute-sanitizer, and the
# robot-arm demo's cuda / cuda-host / cpu table (BENCHMARKS.md), on a machine
# with an NVIDIA GPU.
#
#   scripts/gpu-check.sh prepare      # where Rust is: builds into target/gpu-check
#   scripts/gpu-check.sh run [DIR]    # on the GPU machine: logs and the table into DIR
#
# The halves are apart because a GPU machine may have no Rust toolchain:
# `prepare` leaves in target/gpu-check everything `run` needs (the freight
# tool, the abi3 wheel, the freight-backend test binaries, stripped), so that
# directory alone travels with the source tree. `run` needs a python3 with
# torch (and cupy, if its tests should run rather than skip), pytest and
# compute-sanitizer on PATH; it installs the wheel into a temporary directory
# and leaves the interpreter's packages alone. Each step is stopped after
# GPU_CHECK_STEP_TIMEOUT seconds (default 900); GPU_CHECK_DEMO=0 leaves the
# demo out, and GPU_CHECK_DEMO_ARGS replaces the arguments of its `compare`
# (default `--seconds 3`; `--resolutions 3840x2160` keeps to the 4K rows, about
# 125 s instead of 375 s). `freight bench pipeline --gpu cuda` runs the seed-002
# rows with GPU workers on the device; GPU_CHECK_PIPELINE_ARGS replaces its
# arguments (default `--nodes 3,5 --runs 10`: the topologies with GPU workers).
# It ends with a summary and exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PACK=target/gpu-check

prepare() {
    set -e
    make build wheel
    rm -rf "$PACK" && mkdir -p "$PACK/tests"
    cp target/release/freight "$PACK/"
    cp target/wheels/freight-*.whl "$PACK/"
    cargo test --release --locked -p freight-backend --no-run --message-format=json \
        | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' \
        | while read -r exe; do cp "$exe" "$PACK/tests/"; done
    # The C++ API's device-memory program (crates/freight-c/tests/cpp/devices.cpp),
    # next to the library it finds through its RPATH.
    cp target/release/libfreight_c.so "$PACK/"
    c++ -std=c++17 -O2 -Icrates/freight-c/include crates/freight-c/tests/cpp/devices.cpp -o "$PACK/cpp-devices" \
        -L"$PACK" -lfreight_c -Wl,-rpath,'$ORIGIN'
    strip "$PACK/freight" "$PACK"/tests/* "$PACK/cpp-devices"
    # Unstripped, the library alone is over the 64 MiB a device call may carry.
    strip --strip-unneeded "$PACK/libfreight_c.so"
    # The simulated-driver test compiles its C source from the path it was built at.
    pwd >"$PACK/built-in"
    du -sh "$PACK"
}

# The C++ device program: a subscriber and a publisher process moving three
# 1 MiB messages in CUDA memory through device pointers.
cpp_devices() {
    local exe=$1 topic=/gpu_check_cpp_$$ out
    out=$(mktemp)
    trap 'rm -f "$out"; trap - RETURN' RETURN
    "$exe" sub "$topic" 3 1048576 >"$out" &
    local sub=$!
    sleep 1
    # The publisher stays until its stdin closes: time for the subscriber to take all.
    { sleep 3; } | "$exe" pub "$topic" 3 1048576 || return 1
    wait "$sub" || return 1
    cat "$out"
    [ "$(grep -c ' cuda ok$' "$out")" = 3 ]
}

run() {
    local out=${1:-gpu-check-out}
    mkdir -p "$out"
    local py=${PYTHON:-python3} failed=()
    step() { # step NAME COMMAND...: runs it, its output into $out/NAME.log
        local name=$1; shift
        echo "== $name: $*"
        if timeout "${GPU_CHECK_STEP_TIMEOUT:-900}" "$@" >"$out/$name.log" 2>&1; then echo "   ok"; else
            echo "   FAILED ($?); the log's failures and end:"
            # Only a few files come back from a device call: the verdict's
            # reasons must be in the summary itself.
            grep -E '^(FAILED|ERROR) |panicked at|Error:' "$out/$name.log" | head -20 | sed 's/^/   | /'
            tail -n 15 "$out/$name.log" | sed 's/^/   | /'
            failed+=("$name")
        fi
    }
    nvidia-smi -L | tee "$out/gpu.txt"
    local site
    site=$(mktemp -d)
    "$py" -m pip install -q --no-index --no-deps --target "$site" "$PACK"/freight-*.whl || exit 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" FREIGHT_BIN="$PWD/$PACK/freight"
    local built
    built=$(cat "$PACK/built-in")
    [ -e "$built" ] || { mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"; }

    [ "${GPU_CHECK_DEMO:-1}" = 0 ] || step demo "$PACK/freight" demo robot-arm --python "$py" -- compare ${GPU_CHECK_DEMO_ARGS:---seconds 3}
    # Plain first: a verdict even if the sanitized run below outlasts its time.
    step test_cuda "$py" -m pytest -v -rs -p no:cacheprovider python/tests/test_cuda.py
    step pipeline "$PACK/freight" bench pipeline --gpu cuda ${GPU_CHECK_PIPELINE_ARGS:---nodes 3,5 --runs 10}
    local bin
    # memcheck of every process (peers too). Driver calls that return an
    # error are freight's to handle, and its tests check that it does; some
    # are expected (cuMemHostUnregister of a mapping the driver let go of when
    # it was replaced), so the sanitizer reports memory errors only.
    # Test binaries that never load the driver (the unit tests) pass too.
    local sanitize=(compute-sanitizer --error-exitcode 9 --target-processes all --report-api-errors no
        --require-cuda-init no)
    for bin in "$PACK"/tests/*; do
        # The simulated driver is a test double: sanitizing it checks nothing.
        step "sanitize-$(basename "$bin")" "${sanitize[@]}" \
            "$bin" --test-threads 1 --skip gpu_tests_run_on_the_simulated_cuda_driver
        if "$bin" --list | grep -q '^gpu_tests_run_on_the_simulated_cuda_driver:'; then
            step "sim-$(basename "$bin")" "$bin" --exact gpu_tests_run_on_the_simulated_cuda_driver
        fi
    done
    step sanitize-test_cuda "${sanitize[@]}" "$py" -m pytest -q -rs -p no:cacheprovider python/tests/test_cuda.py
    export -f cpp_devices
    step cpp-devices bash -c 'cpp_devices "$0"' "$PACK/cpp-devices"

    if [ -f "$out/demo.log" ]; then
        echo "== demo table"
        sed -n '/^Resolution/,$p' "$out/demo.log"
    fi
    if [ -f "$out/pipeline.log" ]; then
        echo "== pipeline table"
        grep 'kernel is within' "$out/pipeline.log"
        sed -n '/^freight bench pipeline/,$p' "$out/pipeline.log"
    fi
    echo "== skips and sanitizer findings"
    grep -h 'SKIPPED\|ERROR SUMMARY\|^FAILED\|passed\|failed' "$out"/*.log
    if [ ${#failed[@]} -gt 0 ]; then echo "FAILED: ${failed[*]}"; exit 1; fi
    echo "every step passed"
}

case ${1:-} in
prepare) prepare ;;
run) shift; run "$@" ;;
*) echo "usage: $0 prepare | run [DIR]" >&2; exit 2 ;;
esac
