#!/usr/bin/env bash
# Installable packages of seen_bloom, one command:
#   scripts/package.sh [--pg MAJORS]     MAJORS: 13,15,18 / all; default: every major set up
#                                        (scripts/pg_majors.sh), PostgreSQL 15 at least
# For each major, `cargo pgrx package` (a release build against that major's pg_config) and
#   target/packages/seen_bloom-<version>-pg<NN>-<arch>.tar.gz
#       seen_bloom-<version>-pg<NN>-<arch>/lib/seen_bloom.so
#                                         /extension/seen_bloom.control, seen_bloom--*.sql
#                                         /install.sh [PG_CONFIG]  (copies both into
#                                          `pg_config --pkglibdir` and `--sharedir`/extension)
# and for PostgreSQL 15 also a Debian package for Debian's PostgreSQL 15:
#   target/packages/postgresql-15-seen-bloom_<version>-1_<debarch>.deb
#       Depends: postgresql-15; /usr/lib/postgresql/15/lib/seen_bloom.so and
#       /usr/share/postgresql/15/extension/seen_bloom{.control,--*.sql}
# The extension files are the current version's install script (written by pgrx), the update
# scripts sql/seen_bloom--A--B.sql (copied by pgrx) and the archived install scripts of earlier
# releases sql/archive/seen_bloom--A.sql (copied here, as install_extension in common.sh does),
# so CREATE EXTENSION, CREATE EXTENSION ... VERSION 'A' and ALTER EXTENSION ... UPDATE all work.
# tests/integration/package_deb.sh installs the .deb with dpkg -i and creates the extension.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit 1

pg_spec=""
while [ "$#" -gt 0 ]; do
    case "$1" in
    --pg) pg_spec="${2:?--pg needs a list of majors}"; shift 2 ;;
    --pg=*) pg_spec="${1#--pg=}"; shift ;;
    -h | --help) sed -n '/^source/q;2,$p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (usage: scripts/package.sh [--pg 13,15,18|all])" >&2; exit 2 ;;
    esac
done

setup
if [ -n "$pg_spec" ]; then
    mapfile -t majors < <(parse_majors "$pg_spec")
    for m in "${majors[@]}"; do ensure_pg_major "$m"; done
    pgrx_init_majors
else
    majors=()
    for m in "${PG_ALL_MAJORS[@]}"; do pg_major_ready "$m" && majors+=("$m"); done
fi

version="$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)"
arch="$(uname -m)"
debarch="$(dpkg --print-architecture)"
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
out="$ROOT/target/packages"
mkdir -p "$out"

# The extension's files for one major, from cargo pgrx package's tree, into lib/ and extension/.
collect() { # PKGDIR LIBDIR EXTDIR
    local pkg="$1" pkglibdir sharedir
    pkglibdir="$("$PG_CONFIG" --pkglibdir)"
    sharedir="$("$PG_CONFIG" --sharedir)"
    mkdir -p "$2" "$3"
    install -m 755 "$pkg$pkglibdir/seen_bloom.so" "$2/"
    install -m 644 "$pkg$sharedir"/extension/seen_bloom.control "$pkg$sharedir"/extension/seen_bloom--*.sql "$3/"
    local script
    for script in "$ROOT"/sql/archive/seen_bloom--*.sql; do
        [ -e "$script" ] && install -m 644 "$script" "$3/"
    done
    [ -f "$3/seen_bloom--${version}.sql" ] || { echo "package for PostgreSQL $PG_MAJOR lacks seen_bloom--${version}.sql" >&2; exit 1; }
}

built=()
for major in "${majors[@]}"; do
    use_pg_major "$major"
    step "PostgreSQL ${major}: cargo pgrx package ($("$PG_CONFIG" --version))"
    t0=$SECONDS
    pkg="$target_dir/release/seen_bloom-pg${major}"
    rm -rf "$pkg"
    cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$pkg" | sed -n '/Finished\|Copying\|Writing/p'

    name="seen_bloom-${version}-pg${major}-${arch}"
    stage="$out/stage/$name"
    rm -rf "$stage"
    collect "$pkg" "$stage/lib" "$stage/extension"
    cat >"$stage/install.sh" <<EOF
#!/bin/sh
# Installs seen_bloom ${version} into the PostgreSQL ${major} that pg_config (first argument,
# default: pg_config on PATH) describes; run it as the owner of that installation (root).
set -eu
pg_config="\${1:-pg_config}"
case "\$("\$pg_config" --version)" in
"PostgreSQL ${major}."*) ;;
*) echo "this package is for PostgreSQL ${major}; \$pg_config is \$("\$pg_config" --version)" >&2; exit 1 ;;
esac
here="\$(cd "\$(dirname "\$0")" && pwd)"
install -m 755 "\$here"/lib/seen_bloom.so "\$("\$pg_config" --pkglibdir)/"
install -m 644 "\$here"/extension/* "\$("\$pg_config" --sharedir)/extension/"
echo "seen_bloom ${version} installed into \$("\$pg_config" --version); next: CREATE EXTENSION seen_bloom;"
EOF
    chmod 755 "$stage/install.sh"
    tar -czf "$out/$name.tar.gz" -C "$out/stage" "$name"
    built+=("$out/$name.tar.gz")

    if [ "$major" = 15 ] && [ "$PG_BIN" = /usr/lib/postgresql/15/bin ]; then
        deb_name="postgresql-15-seen-bloom"
        deb_root="$out/stage/${deb_name}_${version}-1_${debarch}"
        rm -rf "$deb_root"
        collect "$pkg" "$deb_root/usr/lib/postgresql/15/lib" "$deb_root/usr/share/postgresql/15/extension"
        mkdir -p "$deb_root/DEBIAN" "$deb_root/usr/share/doc/$deb_name"
        install -m 644 "$ROOT/README.md" "$deb_root/usr/share/doc/$deb_name/README.md"
        [ ! -f "$ROOT/LICENSE" ] || install -m 644 "$ROOT/LICENSE" "$deb_root/usr/share/doc/$deb_name/copyright"
        # Depends: postgresql-15 and the packages of the libraries the .so links (libc6 at
        # least the version built against).
        owners="$(for lib in $(ldd "$deb_root/usr/lib/postgresql/15/lib/seen_bloom.so" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
            { dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null; } | head -1 | cut -d: -f1
        done | sort -u)"
        depends="postgresql-15, libc6 (>= $(dpkg-query -W -f='${Version}' libc6 | sed 's/-.*//'))"
        for owner in $owners; do [ "$owner" = libc6 ] || depends="$depends, $owner"; done
        cat >"$deb_root/DEBIAN/control" <<EOF
Package: ${deb_name}
Version: ${version}-1
Architecture: ${debarch}
Maintainer: seen_bloom developers <root@localhost>
Installed-Size: $(du -sk "$deb_root/usr" | cut -f1)
Depends: ${depends}
Section: database
Priority: optional
Description: seen_bloom: per-user seen-item Bloom filters for PostgreSQL 15
 A bloom column type (add, contains, array filtering, unions, aggregates) and
 trigger-maintained impression tracking with a rolling window, for feeds that
 must not show people what they already saw. After installing:
 CREATE EXTENSION seen_bloom;
EOF
        dpkg-deb --root-owner-group -Zxz --build "$deb_root" "$out/${deb_name}_${version}-1_${debarch}.deb" >/dev/null
        built+=("$out/${deb_name}_${version}-1_${debarch}.deb")
    fi
    note "PostgreSQL ${major} packaged in $((SECONDS - t0)) s"
done
rm -rf "$out/stage"

step "Packages"
for f in "${built[@]}"; do note "$(du -h "$f" | cut -f1)  ${f#"$ROOT"/}"; done
