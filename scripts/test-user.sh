#!/usr/bin/env bash
# Creates the unprivileged account the security tests (tests/security.rs)
# attack jtrace as: `jtrace-test`, no home, no login, with the supplementary
# group `jtrace-test-extra` (which `jtrace run` must keep). Idempotent;
# needs root.
set -euo pipefail
user=jtrace-test
extra=jtrace-test-extra
getent group "$extra" >/dev/null || groupadd --system "$extra" || getent group "$extra" >/dev/null
if ! id "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        --user-group --groups "$extra" "$user" || id "$user" >/dev/null
fi
id -nG "$user" | tr ' ' '\n' | grep -qx "$extra" || usermod --append --groups "$extra" "$user"
# Subordinate ids for rootless containers of that account (tests/containers_attach.rs):
# its container's uid 0 is host uid 100000.
grep -q "^$user:" /etc/subuid 2>/dev/null || usermod --add-subuids 100000-165535 "$user"
grep -q "^$user:" /etc/subgid 2>/dev/null || usermod --add-subgids 100000-165535 "$user"
