#!/usr/bin/env bash
# test.sh: one major (the clients' side does not depend on the major; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Client libraries (docs/CLIENTS.md): the runnable examples of clients/examples and the
# seen-bloom Python package's tests, against the cluster on PORT, in a database of their own
# (seen_bloom_clients, dropped at the end). Installs what it needs, skipping what is there:
#   - a private Python venv (target/clients-venv; Debian's python3-venv when missing) with
#     psycopg[binary], asyncpg, sqlalchemy[asyncio], pytest and ./clients/python (reinstalled
#     when its files change);
#   - node and npm (Debian's nodejs and npm when missing), and a private node_modules with pg
#     and pg-copy-streams (target/clients-node, from clients/examples/package.json);
#   - the Rust example, built by cargo (CARGO_TARGET_DIR target/clients-rust; the first build
#     compiles tokio-postgres and its dependencies: one to two minutes on 2 cores).
# Checks, each exiting non-zero on a wrong answer:
#   - python_psycopg.py, python_asyncpg.py, python_sqlalchemy.py, node_pg.mjs and the Rust
#     example: tracking, multi-row INSERT and COPY, the feed call's answers for bigint, and
#     text users with uuid items, reading a bloom value, SQLSTATEs 42804, 55000 and 22023;
#   - pytest clients/python/tests: the bloom type's loaders and dumpers (psycopg, asyncpg),
#     Int8Array answering as a list does, the SQLAlchemy Bloom type in an ORM model,
#     reflection, the typed unseen/has_seen/filter_of expressions;
#   - the latency benchmark of a 1,000-candidate call runs (200 calls per variant; the
#     figures of docs/CLIENTS.md come from its default 1,000);
#   - the examples and tests leave no table behind.
# Usage: clients.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port

db=seen_bloom_clients
dsn="postgresql://postgres@127.0.0.1:${PORT}/${db}"
examples="$ROOT/clients/examples"
venv="$ROOT/target/clients-venv"
node_dir="$ROOT/target/clients-node"
rust_target="$ROOT/target/clients-rust"

# --- Debian packages ---------------------------------------------------------------------------
apt_updated=0
apt_install() { # PACKAGE...
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
        fail "missing: $* (install them: apt-get install $*)"
    fi
    step "Installing Debian packages: $*"
    if [ "$apt_updated" = 0 ]; then
        as_root apt-get update -q
        apt_updated=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

# --- Python: a private venv --------------------------------------------------------------------
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3 || true)"
if [ -z "$python" ]; then
    apt_install python3 python3-venv
    python=/usr/bin/python3
fi
if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
        apt_install python3-venv
    fi
    step "Creating the Python venv $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
if "$venv/bin/python" -c 'import psycopg, psycopg_binary, asyncpg, sqlalchemy, greenlet, pytest' 2>/dev/null; then
    note "Python venv: psycopg, asyncpg, sqlalchemy, pytest present ($("$venv/bin/python" --version))"
else
    step "Installing psycopg[binary], asyncpg, sqlalchemy[asyncio], pytest into $venv"
    "${pip[@]}" install --progress-bar off 'psycopg[binary]>=3.1' 'asyncpg>=0.27' 'sqlalchemy[asyncio]>=2.0' \
        'pytest>=7' | sed '/^Requirement already satisfied/d' || fail "pip install failed"
fi
# The package from this checkout; reinstalled when one of its files changed.
package_stamp="$(cd "$ROOT/clients/python" && find pyproject.toml README.md src -name '*.egg-info' -prune -o -type f \
    ! -name '*.pyc' -print | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
if [ "$(cat "$venv/.seen-bloom-stamp" 2>/dev/null || true)" = "$package_stamp" ] &&
    "$venv/bin/python" -c 'import seen_bloom.psycopg' 2>/dev/null; then
    note "seen-bloom (./clients/python) installed and unchanged"
else
    step "Installing ./clients/python (seen-bloom) into $venv"
    # From a copy: pip builds in the source directory, and the checkout stays as it is.
    make_work_dir
    cp -r "$ROOT/clients/python" "$WORK/python"
    "${pip[@]}" install --quiet --no-deps --force-reinstall "$WORK/python" || fail "pip install ./clients/python failed"
    echo "$package_stamp" >"$venv/.seen-bloom-stamp"
fi

# --- node and a private node_modules -----------------------------------------------------------
if ! command -v node >/dev/null; then
    apt_install nodejs npm
elif ! command -v npm >/dev/null; then
    apt_install npm
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 18 ] || fail "node $(node --version) is too old: node_pg.mjs needs 18 or later"
mkdir -p "$node_dir"
if [ -f "$node_dir/node_modules/pg/package.json" ] && [ -f "$node_dir/node_modules/pg-copy-streams/package.json" ] &&
    cmp -s "$examples/package.json" "$node_dir/package.json"; then
    note "node $(node --version): pg and pg-copy-streams present in $node_dir"
else
    step "Installing pg and pg-copy-streams into $node_dir (npm, node $(node --version))"
    cp "$examples/package.json" "$node_dir/package.json"
    (cd "$node_dir" && npm install --no-audit --no-fund --loglevel=error) || fail "npm install failed"
fi
# node resolves an ES module's imports from its own directory: run a copy beside node_modules.
cp "$examples/node_pg.mjs" "$node_dir/node_pg.mjs"

# --- the Rust example --------------------------------------------------------------------------
rust_bin="$rust_target/debug/seen-bloom-tokio-example"
if [ -x "$rust_bin" ]; then
    step "Building the Rust example (cargo, incremental)"
else
    step "Building the Rust example: tokio-postgres and its dependencies (one to two minutes on 2 cores)"
fi
t0=$SECONDS
CARGO_TARGET_DIR="$rust_target" cargo build --locked --manifest-path "$examples/rust_tokio/Cargo.toml" 2>&1 |
    sed '/^ *Download/d' || fail "the Rust example did not build"
note "built in $((SECONDS - t0))s"

# --- the database ------------------------------------------------------------------------------
step "Database $db on 127.0.0.1:$PORT"
recreate_database "$PORT" "$db"
on_exit psql_at "$PORT" postgres -c "DROP DATABASE IF EXISTS $db"
psql_at "$PORT" "$db" -c "CREATE EXTENSION seen_bloom"
export SEEN_BLOOM_DSN="$dsn"

run_example() { # NAME COMMAND...
    local name="$1" log="$ROOT/target/clients-$1.log"
    shift
    step "Example: $name"
    if "$@" >"$log" 2>&1; then
        note "$(grep -c '^ok: ' "$log") checks passed ($(tail -1 "$log"))"
    else
        sed 's/^/    /' "$log"
        fail "example $name failed (log: $log)"
    fi
}
run_example python_psycopg "$venv/bin/python" "$examples/python_psycopg.py"
run_example python_asyncpg "$venv/bin/python" "$examples/python_asyncpg.py"
run_example python_sqlalchemy "$venv/bin/python" "$examples/python_sqlalchemy.py"
run_example node_pg node "$node_dir/node_pg.mjs"
run_example rust_tokio "$rust_bin"

step "pytest clients/python/tests"
(cd "$ROOT/clients/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests) ||
    fail "the seen-bloom package's tests failed"

step "Latency benchmark (quick: 200 calls per variant)"
"$venv/bin/python" "$ROOT/clients/python/benchmarks/unseen_latency.py" --calls 200 | sed 's/^/    /' ||
    fail "the latency benchmark failed"

step "Nothing left behind"
left="$(psql_at "$PORT" "$db" -At -c "SELECT (SELECT count(*) FROM pg_tables WHERE schemaname = 'public') + (SELECT count(*) FROM seen_bloom.tracked)")"
[ "$left" = 0 ] || fail "the examples and tests left $left tables or tracked tables in $db"
note "no table and no tracked table left in $db"

step "Clients: all examples and tests passed"
