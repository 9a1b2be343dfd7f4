#!/usr/bin/env bash
# test.sh: once (the checkout's reach does not depend on the major under test)
# The suite from a checkout only root may enter, as a fresh clone in /root or in a Debian 12
# home directory (mode 0700) is: whatever the suite runs as the postgres user must not read or
# run anything from the checkout. The checkout's files (git's tracked and untracked ones, not
# the ignored: no target/, as a fresh clone after a commit) are copied into a mode-0700
# directory, the postgres user's lack of reach is checked, and from the copy (its own working
# directory too) these scripts run, each with its own clusters and no build:
#   - prometheus.sh: the exporter and its queries file, run by the postgres user;
#   - hot_standby.sh: initdb, pg_ctl, pg_basebackup run by the postgres user.
# The other scripts' runs as postgres are of the same kinds (initdb, pg_ctl, pg_checksums and
# pg_upgrade in a cluster directory from common.sh's cluster_dir, which falls back to /tmp; here
# to a directory of this script's own, removed at exit).
# PRIVATE_CHECKOUT_SCRIPTS (names without .sh, comma-separated) runs others instead.
# Usage: private_checkout.sh PG_BIN PORT (PORT unused: the scripts run their own clusters).
# Root only (the postgres user's reach is checked with runuser): skipped otherwise.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
if [ "$(id -u)" -ne 0 ]; then
    skip "needs root (the test runs its scripts as root from a directory the postgres user cannot enter)"
fi
IFS=, read -r -a scripts <<<"${PRIVATE_CHECKOUT_SCRIPTS:-prometheus,hot_standby}"

make_work_dir
chmod 700 "$WORK"
# The copy's clusters in a directory of their own (removed at exit), so that they meet no
# cluster of the run that started this script.
SEEN_BLOOM_CLUSTER_FALLBACK="$(mktemp -d /tmp/seen_bloom-private-checkout.XXXXXX)"
on_exit rm -rf "$SEEN_BLOOM_CLUSTER_FALLBACK"
chmod 755 "$SEEN_BLOOM_CLUSTER_FALLBACK"
export SEEN_BLOOM_CLUSTER_FALLBACK
copy="$WORK/seen_bloom"
mkdir "$copy"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # --ignore-failed-read: a tracked file deleted in the working tree is left out, as it
    # would be from the commit that deletes it.
    git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
        tar -C "$ROOT" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$copy" -xf -
else
    tar -C "$ROOT" --exclude=./target --exclude=./.git -cf - . | tar -C "$copy" -xf -
fi
note "copied the checkout ($(du -sh "$copy" | cut -f1)) into $copy (mode $(stat -c %a "$WORK"))"

# The case under test: the postgres user reaches nothing of the copy, and the clusters go
# elsewhere.
if runuser -u postgres -- test -r "$copy/tests/integration/lib.sh" 2>/dev/null; then
    fail "the postgres user can read $copy: this is not the case under test"
fi
clusters="$(bash -c 'source "$1/scripts/common.sh" && cluster_dir probe' _ "$copy")"
[ "$clusters" = "$SEEN_BLOOM_CLUSTER_FALLBACK/probe" ] ||
    fail "cluster_dir gives $clusters from the copy, not its fallback outside the checkout"
note "the postgres user cannot read the copy; its clusters go to $(dirname "$clusters")"

cd "$copy"
for name in "${scripts[@]}"; do
    step "From the mode-0700 copy: tests/integration/$name.sh"
    t0=$SECONDS
    "$copy/tests/integration/$name.sh" "$PG_BIN" "$PORT" 2>&1 | sed 's/^/    /'
    note "$name.sh passed from the copy in $((SECONDS - t0))s"
done
echo "    private_checkout: ${scripts[*]} pass from a checkout only root may enter"
