#!/usr/bin/env bash
# Coverage-guided fuzzing of roce-xdp on stable Rust (cargo-afl), bounded
# in time: the CI run and the longer run of fuzz/README.md.
#
#   fuzz/run.sh                 # every target, 60 s each (CI)
#   fuzz/run.sh 3600 pair       # one hour of the endpoint-pair target
#
# Installs what it needs (cargo-afl from crates.io, which builds AFL++),
# replays the committed corpora and regressions (cargo test), builds the
# instrumented targets, fuzzes each target from its corpus for the given
# seconds, and prints one line per target: executions, corpus size,
# crashes, hangs. Exits non-zero if a target crashed; the crashing inputs
# are kept in fuzz/out/TARGET/default/crashes/ (turn each into a test:
# copy it to fuzz/regressions/TARGET/ and add the case to
# engine/proto/tests/security/regressions.rs).
set -euo pipefail

cd "$(dirname "$0")"
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(frame pair datagram cm pingpong pcap perftest_exchange)
CARGO_AFL_VERSION=0.18.2

if ! cargo afl --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-afl $CARGO_AFL_VERSION (builds AFL++)"
    cargo install cargo-afl --locked --version "$CARGO_AFL_VERSION"
fi
# Builds AFL++'s runtime for this toolchain once; says so when it is there.
cargo afl config --build >/dev/null 2>&1 || true

echo "fuzz: formatting, lints, replaying corpora and regressions"
cargo fmt -- --check
cargo clippy --all-targets --release --quiet -- -D warnings
cargo test --release --quiet

echo "fuzz: building the instrumented targets"
# Their own target directory: AFL's flags would rebuild the test build.
AFL_TARGET=target/afl
CARGO_TARGET_DIR=$AFL_TARGET cargo afl build --release --features afl --quiet

# No core-dump helper or CPU governor to satisfy on a CI machine; one
# core each, no UI.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
    AFL_NO_AFFINITY=1 AFL_QUIET=1

mkdir -p out
failed=0
for t in "${TARGETS[@]}"; do
    rm -rf "out/$t"
    # -t: a generous per-input time limit, so that a loaded machine does
    # not report slow inputs as hangs.
    cargo afl fuzz -i "corpus/$t" -o "out/$t" -V "$SECONDS_PER_TARGET" -t 500 \
        "$AFL_TARGET/release/$t" >"out/$t.log" 2>&1 || {
        echo "fuzz: afl-fuzz failed on $t:"
        tail -20 "out/$t.log"
        exit 1
    }
    stat() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "out/$t/default/fuzzer_stats"; }
    crashes=$(stat saved_crashes)
    echo "fuzz: $t: $(stat execs_done) executions in $(stat run_time) s," \
        "corpus $(stat corpus_count), crashes $crashes, hangs $(stat saved_hangs)"
    if [ "$crashes" != 0 ]; then
        echo "fuzz: $t crashed; inputs in fuzz/out/$t/default/crashes/"
        failed=1
    fi
done
exit $failed
