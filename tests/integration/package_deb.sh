#!/usr/bin/env bash
# test.sh: once
# The Debian package for PostgreSQL 15 installs with dpkg -i and works: scripts/package.sh
# --pg 15 builds it, dpkg -i installs it (its files must be the package's own, at the Debian
# paths), and on a fresh cluster (port 25502) CREATE EXTENSION gives the packaged version and a
# working bloom type and tracking; when the package carries an earlier release's install
# script (sql/archive/), CREATE EXTENSION at that version and ALTER EXTENSION UPDATE are
# checked too. Afterwards the package is removed with dpkg -r and the seen_bloom files that
# were in PostgreSQL 15's directories before the test are put back, so the machine is as it was.
# Usage: package_deb.sh [PG_BIN PORT] (ignored: it runs its own cluster). Root only (dpkg -i):
# skipped otherwise.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
cd "$ROOT" || exit 1
if [ "$(id -u)" -ne 0 ]; then
    skip "dpkg -i needs root"
fi
use_pg_major 15
port=25502
libdir=/usr/lib/postgresql/15/lib
extdir=/usr/share/postgresql/15/extension
deb_name=postgresql-15-seen-bloom

step "Building the Debian package: scripts/package.sh --pg 15"
"$ROOT/scripts/package.sh" --pg 15 | sed -n '/\.deb\|packaged/p'
version="$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
deb="$ROOT/target/packages/${deb_name}_${version}-1_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || fail "$deb was not built"
dpkg-deb --field "$deb" Package Version Depends | sed 's/^/    /'

# What was installed before (a cargo pgrx install, say), to put back afterwards.
saved="$(mktemp -d)"
was_installed=0
dpkg-query -W -f='${Status}' "$deb_name" 2>/dev/null | grep -q 'install ok installed' && was_installed=1
cp -a "$libdir"/seen_bloom.so "$extdir"/seen_bloom.control "$extdir"/seen_bloom--*.sql "$saved/" 2>/dev/null || true
restore() {
    if [ "$was_installed" -eq 0 ] && dpkg-query -W -f='${Status}' "$deb_name" 2>/dev/null | grep -q 'install ok installed'; then
        dpkg -r "$deb_name" >/dev/null
    fi
    if compgen -G "$saved/seen_bloom*" >/dev/null; then
        [ ! -f "$saved/seen_bloom.so" ] || install -m 755 "$saved/seen_bloom.so" "$libdir/"
        find "$saved" -name 'seen_bloom*' ! -name '*.so' -exec install -m 644 {} "$extdir/" \;
    fi
    rm -rf "$saved"
}
on_exit restore

step "dpkg -i $(basename "$deb")"
# Start from nothing of ours in the directories, so only the package's files can answer.
rm -f "$libdir"/seen_bloom.so "$extdir"/seen_bloom.control "$extdir"/seen_bloom--*.sql
dpkg -i "$deb" | sed 's/^/    /'
dpkg -L "$deb_name" | grep 'seen_bloom' | sed 's/^/    /'
for f in "$libdir/seen_bloom.so" "$extdir/seen_bloom.control" "$extdir/seen_bloom--${version}.sql"; do
    dpkg -S "$f" >/dev/null 2>&1 || fail "$f is not installed by $deb_name"
done

step "CREATE EXTENSION on a fresh PostgreSQL 15 cluster"
cluster_new "$(cluster_dir majors-package-deb)" "$port"
got="$(psql_at "$port" postgres -At <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom';
SELECT bloom_unseen(bloom_add(NULL::bloom, ARRAY[1, 2, 3]::bigint[]), ARRAY[9, 1, 4, NULL, 4, 7]::bigint[]);
CREATE TABLE impressions (user_id bigint, post_id bigint);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id');
INSERT INTO impressions VALUES (7, 1001), (7, 1002);
SELECT seen_bloom.unseen('impressions', 7::bigint, ARRAY[1001, 1003, 1002, 1004]::bigint[]);
SQL
)"
expected="$(printf '%s\n' "$version" '{9,4,7}' impressions_seen '{1003,1004}')"
if [ "$got" != "$expected" ]; then
    fail "$(printf 'expected\n%s\ngot\n%s' "$expected" "$got")"
fi
note "CREATE EXTENSION seen_bloom: version $version, bloom_unseen and tracking answer as documented"

# Every earlier release whose install script the package carries: create it, update to the
# packaged version.
for script in "$extdir"/seen_bloom--*.sql; do
    old="$(basename "$script" .sql)"
    old="${old#seen_bloom--}"
    case "$old" in *--* | "$version") continue ;; esac
    got="$(recreate_database "$port" upd &&
        psql_at "$port" upd -At -c "SET client_min_messages = warning" -c "CREATE EXTENSION seen_bloom VERSION '$old'" \
            -c "ALTER EXTENSION seen_bloom UPDATE" \
            -c "SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom'" \
            -c "SELECT bloom_contains(bloom_add(NULL::bloom, 42::bigint), 42::bigint)")"
    if [ "$got" != "$(printf '%s\nt' "$version")" ]; then
        fail "CREATE EXTENSION seen_bloom VERSION '$old'; ALTER EXTENSION seen_bloom UPDATE gave: $got"
    fi
    note "from the package: CREATE EXTENSION seen_bloom VERSION '$old', ALTER EXTENSION UPDATE -> $version"
done
echo "    package_deb: PASS"
