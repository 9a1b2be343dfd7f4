#!/usr/bin/env bash
# test.sh: once (does not depend on the PostgreSQL major under test)
# Fuzzes the engine's parsers of untrusted bytes with cargo-fuzz (libFuzzer + AddressSanitizer):
#   view             stored/received bytes -> BloomView::parse(_validated), then contains, info,
#                    owned copy, union, add (outputs must parse again)
#   text             the \x text form -> from_text, then the byte parser
#   generation_rows  tracking filter-table rows -> WindowView (read path) and GenerationRows
#                    (the trigger's fold), then adds and probes
# Each target starts from its committed seed corpus (fuzz/corpus/<target>, copied to a scratch
# dir so the repository stays as committed) and runs FUZZ_SECONDS (30 s; 600 s with
# SEEN_BLOOM_LONG=1). Any crash, panic, leak, out-of-bounds access, or allocation over
# 512 MB fails the run; the failing input is left in fuzz/artifacts/<target>/.
# Usage: tests/integration/fuzz.sh [PG_BIN PORT]   (the server arguments are not used)
#
# Only stable Rust is installed: cargo-fuzz passes -Zsanitizer=address, which stable rustc
# accepts with RUSTC_BOOTSTRAP=1 (the ASan runtime ships with the stable toolchain).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
cd "$ROOT/fuzz" || exit 1
unset CARGO_TARGET_DIR
export RUSTC_BOOTSTRAP=1

if [ "${SEEN_BLOOM_LONG:-0}" = "1" ]; then seconds="${FUZZ_SECONDS:-600}"; else seconds="${FUZZ_SECONDS:-30}"; fi
targets=(view text generation_rows)

if cargo fuzz --version >/dev/null 2>&1; then
    note "cargo-fuzz present: $(cargo fuzz --version)"
else
    step "Installing cargo-fuzz (cargo install cargo-fuzz --locked, a minute or two)"
    cargo install cargo-fuzz --locked
fi

step "Building the fuzz targets (release, AddressSanitizer, into fuzz/target)"
scratch="$ROOT/fuzz/target/corpus-run"
mkdir -p "$scratch"
if ! cargo fuzz build -O >"$scratch/build.log" 2>&1; then
    grep -v '^ *[0-9]*: \|^ *at ' "$scratch/build.log" | tail -40
    exit 1
fi
note "$(grep Finished "$scratch/build.log" | tail -1)"
failed=0
summary=()
for t in "${targets[@]}"; do
    step "Fuzzing ${t} for ${seconds} s (seeds: $(find "corpus/$t" -maxdepth 1 -type f | wc -l) files in fuzz/corpus/$t)"
    rm -rf "${scratch:?}/$t"
    mkdir -p "$scratch/$t"
    cp "corpus/$t"/* "$scratch/$t/"
    log="$scratch/$t.log"
    status=0
    timeout $((seconds + 300)) cargo fuzz run -O "$t" "$scratch/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    runs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)"
    secs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -1)"
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1)"
    corpus="$(find "$scratch/$t" -maxdepth 1 -type f | wc -l)"
    if [ "$status" -ne 0 ]; then
        failed=1
        echo "FAILED: ${t} exited with ${status}; the end of its log:"
        grep -v '^ *#[0-9]* 0x\|NEW\|REDUCE\|pulse' "$log" | tail -40
        find "$ROOT/fuzz/artifacts/$t" -maxdepth 1 -type f -printf '    artifact: %f\n' 2>/dev/null || true
        summary+=("${t}: CRASH after ${runs:-?} runs")
    else
        rate=$(( ${runs:-0} / (${secs:-1} > 0 ? ${secs:-1} : 1) ))
        note "${t}: ${runs} runs in ${secs} s (${rate}/s), ${cov}, corpus ${corpus} inputs, 0 crashes"
        summary+=("${t}: ${runs} runs in ${secs} s (${rate}/s), ${cov}, 0 crashes")
    fi
done

step "Fuzzing summary"
for line in "${summary[@]}"; do note "$line"; done
exit "$failed"
