#!/usr/bin/env bash
# A short, bounded run of every fuzz target in fuzz/ (cargo-fuzz, libFuzzer,
# AddressSanitizer): `make test` can call it.
#
#   scripts/fuzz-smoke.sh              # every target, FUZZ_SECONDS each
#   scripts/fuzz-smoke.sh frame        # only the targets named
#
# Environment:
#   FUZZ_SECONDS  seconds per target (default 20)
#   FUZZ_JOBS     targets run at once (default: the number of CPUs, at most 3)
#
# Needs rustup's nightly toolchain and cargo-fuzz, and installs what is missing
# (once). Anything that keeps it from fuzzing every target fails it: a green
# `make test` has fuzzed. Seeds are written at run time by the targets themselves (valid
# encodings made with freight's own code) into fuzz/corpus/<target>/, which
# keeps what each run finds (it is git-ignored). Exits 1 when a target
# crashes, with the artifact's path, its bytes in hex and how to reproduce it.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
export PATH="$HOME/.cargo/bin:$PATH"

ALL_TARGETS=(cdr_builtin cdr_generated cdr_generic frame descriptor discovery)
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}"
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL_TARGETS[@]}")

fail() {
    echo "fuzz smoke FAILED: $*"
    exit 1
}

# Logs in the project's own directory, not at predictable names in /tmp.
LOGS="fuzz/target/smoke-logs"
mkdir -p "$LOGS" || exit 1

start=$(date +%s)

[[ "$(uname -s)" == Linux ]] || fail "fuzzing freight needs Linux (found $(uname -s))"
command -v cargo >/dev/null || fail "cargo is not installed (scripts/install-deps.sh installs it)"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "installing the nightly toolchain (once; cargo-fuzz needs it)..."
    rustup toolchain install nightly --profile minimal >"$LOGS/nightly-install.log" 2>&1 ||
        fail "cannot install the nightly toolchain (see $LOGS/nightly-install.log)"
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz (once)..."
    cargo install cargo-fuzz --locked >"$LOGS/cargo-fuzz-install.log" 2>&1 ||
        fail "cannot install cargo-fuzz (see $LOGS/cargo-fuzz-install.log)"
fi

if ! cargo +nightly fetch --manifest-path fuzz/Cargo.toml >"$LOGS/fuzz-fetch.log" 2>&1; then
    fail "the fuzz crate's dependencies cannot be fetched (see $LOGS/fuzz-fetch.log)"
fi

# The targets link Cyclone DDS (freight's network plane). At start-up
# AddressSanitizer reports a one-definition-rule violation for a global table in
# Cyclone's C sources (ddsi_plist.c) and stops before fuzzing anything; the
# report is about Cyclone's build, not about the code under test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"

HOST="$(rustc +nightly -vV | sed -n 's/^host: //p')"
BIN="fuzz/target/$HOST/release"
echo "building fuzz targets (cargo +nightly fuzz build, target dir fuzz/target)..."
if ! cargo +nightly fuzz build --fuzz-dir fuzz >"$LOGS/fuzz-build.log" 2>&1; then
    tail -n 40 "$LOGS/fuzz-build.log"
    echo "fuzz smoke FAILED: the fuzz targets do not build (log: $LOGS/fuzz-build.log)"
    exit 1
fi
built=$(date +%s)

STAMP="$LOGS/.started"
touch "$STAMP"

# Seeds: each target writes valid inputs into its corpus and exits.
for t in "${TARGETS[@]}"; do
    [[ -x "$BIN/$t" ]] || { echo "fuzz smoke FAILED: no fuzz target named $t"; exit 1; }
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    if ! FREIGHT_FUZZ_SEED_DIR="fuzz/corpus/$t" "$BIN/$t" >"$LOGS/$t.seeds.log" 2>&1; then
        cat "$LOGS/$t.seeds.log"
        echo "fuzz smoke FAILED: $t could not write its seeds"
        exit 1
    fi
done

# Fuzz, FUZZ_JOBS targets at a time. An input is at most a few KiB; anything
# that allocates 256 MiB at once from one of them, or runs 10 s, is a finding.
cpus=$(nproc 2>/dev/null || echo 1)
jobs_max="${FUZZ_JOBS:-$((cpus < 3 ? cpus : 3))}"
declare -A RC=()
echo "fuzzing ${TARGETS[*]} for ${SECONDS_PER_TARGET}s each, $jobs_max at a time..."
# Every target runs for the same time, so batches of FUZZ_JOBS lose nothing.
for ((i = 0; i < ${#TARGETS[@]}; i += jobs_max)); do
    declare -A PID=()
    batch=("${TARGETS[@]:i:jobs_max}")
    for t in "${batch[@]}"; do
        max_len=4096
        # A descriptor's mode 7 carries a whole pool file (4 KiB of header and records at least).
        [[ $t == descriptor ]] && max_len=8448
        "$BIN/$t" "fuzz/corpus/$t" \
            -max_total_time="$SECONDS_PER_TARGET" -max_len="$max_len" -timeout=10 \
            -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
            -artifact_prefix="fuzz/artifacts/$t/" >"$LOGS/$t.log" 2>&1 &
        PID[$t]=$!
    done
    for t in "${batch[@]}"; do
        wait "${PID[$t]}"
        RC[$t]=$?
        # A target that crashed leaves its fake-device pool file behind: remove
        # it (a pool's name carries its creator's uid and pid).
        rm -f "/dev/shm/freight-fakedev-$(id -u)-${PID[$t]}-"*
    done
    unset PID
done

failed=0
for t in "${TARGETS[@]}"; do
    log="$LOGS/$t.log"
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+) corp: ([^ ]+).*/cov \1, features \2, corpus \3/p' <<<"$done_line")
    if ((RC[$t] == 0)); then
        printf '  %-12s ok: %s runs, %s exec/s, %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}"
        continue
    fi
    failed=1
    printf '  %-12s FAILED (exit %s)\n' "$t" "${RC[$t]}"
    grep -E 'ERROR|panicked|SUMMARY|Test unit written' "$log" | head -n 12 | sed 's/^/    /'
    found=0
    while IFS= read -r artifact; do
        found=1
        size=$(wc -c <"$artifact")
        echo "    artifact: $artifact ($size bytes$( ((size > 256)) && echo ", the first 256 in hex"))"
        od -An -tx1 -v "$artifact" | head -n 16 | tr -s ' ' | sed 's/^/      /'
        echo "    reproduce: $BIN/$t $artifact   (or: cargo +nightly fuzz run $t $artifact)"
    done < <(find "fuzz/artifacts/$t" -type f -newer "$STAMP" | sort)
    ((found)) || { echo "    no artifact; the end of the log ($log):"; tail -n 20 "$log" | sed 's/^/    /'; }
done

end=$(date +%s)
echo "fuzz smoke: build $((built - start))s, fuzzing $((end - built))s, total $((end - start))s (logs in $LOGS)"
if ((failed)); then
    echo "fuzz smoke FAILED"
    exit 1
fi
echo "fuzz smoke passed"
