#!/usr/bin/env bash
# The docs name only what exists, and carry no issue numbers. Usage: scripts/check_docs.sh
# No server, no build; run by scripts/test.sh's lint step. Exits non-zero, printing
# file:line and the reference, when:
#   - a repository path (a word that starts with one of the repository's top-level
#     directories, e.g. tests/integration/fuzz.sh, or with ../) or the target of a relative
#     markdown link, in README.md, docs/, bench/*.md or clients/, does not exist (the
#     generated bench/results/*.md are left to bench/report.py, which writes them). A path is
#     taken from the repository root (./path too: a command's), a link or a ../ path from the
#     file's own directory. A link's #anchor must be a heading of its target (GitHub's
#     slugs). The part of a path before a placeholder (<...>, $..., {...}) must exist; a glob
#     (*) must match something. Paths under target/ (build output) are not checked.
#   - README.md or docs/ contain an issue number: "issue 18", "issues 2, 3 and 18", "#17"
#     (outside link targets and HTML entities), "PR 4". History belongs in CHANGELOG.md.
# False positives are excused only by ALLOWED below, one exact string each.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

# Exact strings the issue-number rule lets through, each with why.
ALLOWED=(
    'citusdata/citus#6790' # Citus' own issue tracker: the upstream bug a limit rests on
)

failures=0
bad() { # file line what
    printf '%s:%s: %s\n' "$1" "$2" "$3"
    failures=$((failures + 1))
}

# The files checked: paths and links everywhere below, issue numbers in README.md and docs/.
mapfile -t path_files < <(
    {
        printf '%s\n' README.md
        find docs clients -type f \( -name '*.md' -o -name '*.yaml' \) -not -path '*/node_modules/*'
        find bench -maxdepth 1 -type f -name '*.md'
    } | sort -u
)
mapfile -t issue_files < <({ printf '%s\n' README.md; find docs -type f -name '*.md'; } | sort -u)

# The repository's top-level directories (a path in prose starts with one of them).
roots=()
for d in * .[!.]*; do
    [ -d "$d" ] || continue
    case "$d" in .git | target) continue ;; esac
    roots+=("$d")
done
roots_re="$(IFS='|'; printf '%s' "${roots[*]//./\\.}")"

# GitHub's anchor of each heading of a markdown file, one a line (code blocks skipped).
anchors_of() {
    awk '
        /^```/ { fence = !fence; next }
        fence || !/^#+ / { next }
        {
            h = $0
            sub(/^#+ +/, "", h)
            h = tolower(h)
            gsub(/[^a-z0-9 _-]/, "", h)
            gsub(/ /, "-", h)
            n = seen[h]++
            print (n ? h "-" n : h)
        }' "$1"
}

# Whether a referenced path exists: $1 the path as written, $2 the directory it is relative to.
path_exists() {
    local ref="$1" base="$2" head
    # Up to a placeholder, the directory part must exist.
    if [[ "$ref" =~ [\<\$\{] ]]; then
        head="${ref%%[<\$\{]*}"
        head="${head%/*}"
        [ -n "$head" ] || return 0
        [ -d "$base/$head" ]
        return
    fi
    if [[ "$ref" == *'*'* ]]; then
        compgen -G "$base/$ref" >/dev/null
        return
    fi
    [ -e "$base/$ref" ]
}

# Whether a path stays inside the repository once resolved.
inside() {
    local full
    full="$(realpath -m "$1")"
    [[ "$full" == "$ROOT" || "$full" == "$ROOT"/* ]]
}

for f in "${path_files[@]}"; do
    dir="$(dirname "$f")"

    # Relative markdown links: ](target) and ](target#anchor), not URLs.
    while IFS=: read -r line target; do
        target="${target#](}"
        target="${target%)}"
        target="${target%% *}" # ](path "title")
        case "$target" in '' | http://* | https://* | mailto:*) continue ;; esac
        file="${target%%#*}"
        anchor=""
        [[ "$target" == *'#'* ]] && anchor="${target#*#}"
        if [ -z "$file" ]; then
            resolved="$f"
        else
            resolved="$dir/$file"
            if ! inside "$resolved"; then
                bad "$f" "$line" "link outside the repository: $target"
                continue
            fi
            if ! path_exists "$file" "$dir"; then
                bad "$f" "$line" "link to a missing file: $target"
                continue
            fi
        fi
        if [ -n "$anchor" ] && [[ "$resolved" == *.md ]] && [ -f "$resolved" ]; then
            anchors_of "$resolved" | grep -qxF -- "$anchor" ||
                bad "$f" "$line" "link to a missing heading: $target"
        fi
    done < <(grep -noE '\]\([^)[:space:]]+( "[^"]*")?\)' "$f")

    # Paths in prose and code: words starting with a top-level directory or with ../
    # (link targets were checked above and are left out here). ./path is a command's, run from
    # the repository root.
    while IFS=: read -r line ref; do
        ref="${ref#"${ref%%[![:space:]\`\'\"(]*}"}" # the character before the path
        ref="${ref%%[\`\'\"]*}"
        while [[ "$ref" =~ [.,:\;\)]$ ]]; do ref="${ref%?}"; done
        [ -n "$ref" ] || continue
        case "$ref" in
        ../*) base="$dir" ;;
        ./*) ref="${ref#./}" base="." ;; # a command run from the repository root
        target/*) continue ;;
        *) base="." ;;
        esac
        if ! inside "$base/$ref"; then
            bad "$f" "$line" "path outside the repository: $ref"
        elif ! path_exists "$ref" "$base"; then
            bad "$f" "$line" "missing path: $ref"
        fi
    done < <(sed -E 's/\]\([^)]*\)/]()/g' "$f" |
        grep -noE "(^|[[:space:]\`'\"(])((\.\.?/)+[A-Za-z0-9_.-]+|($roots_re))/[A-Za-z0-9_.*/<>{}\$-]*")
done

for f in "${issue_files[@]}"; do
    while IFS=: read -r line text; do
        bad "$f" "$line" "issue number (history goes in CHANGELOG.md): $text"
    done < <(
        sed -E 's/\]\([^)]*\)/]()/g; s/&#[0-9]+;//g' "$f" |
            awk -v allowed="$(printf '%s\n' "${ALLOWED[@]}")" '
                BEGIN { n = split(allowed, a, "\n") }
                {
                    line = $0
                    for (i = 1; i <= n; i++) if (a[i] != "") while ((p = index(line, a[i])) > 0)
                        line = substr(line, 1, p - 1) substr(line, p + length(a[i]))
                    while (match(line, /([Ii]ssues?|PR|[Pp]ull request) #?[0-9]+|#[0-9]+/)) {
                        print NR ":" substr(line, RSTART, RLENGTH)
                        line = substr(line, RSTART + RLENGTH)
                    }
                }'
    )
done

if [ "$failures" -gt 0 ]; then
    echo "check_docs: $failures bad reference(s)" >&2
    exit 1
fi
echo "check_docs: ${#path_files[@]} files, every path, link and heading found; no issue numbers"
