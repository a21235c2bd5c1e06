#!/usr/bin/env bash
# make demo: an offline, end-to-end walk-through for someone who just cloned the repository.
# Starts the project's loopback test issuer (Tests/TestIssuer), signs in with the device flow
# (approved automatically), then shows status, get, usage, exec, a forced refresh and erase, all in a
# throwaway HOME with the encrypted file store. Nothing is left behind; nothing leaves loopback.
set -euo pipefail
BIN=${1:?usage: scripts/demo.sh PATH-TO-chatgpt-credential}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/ccred-demo.XXXXXX")
issuer_pid=""
cleanup() {
    [ -n "$issuer_pid" ] && kill "$issuer_pid" 2>/dev/null && wait "$issuer_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

export HOME="$work/home" XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" XDG_RUNTIME_DIR="$work/run"
mkdir -m 700 "$HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$XDG_RUNTIME_DIR"
export CHATGPT_CREDENTIAL_STORE=file
unset DBUS_SESSION_BUS_ADDRESS DISPLAY WAYLAND_DISPLAY BROWSER

# The test issuer prints PORT=<n> first and stops when its stdin closes.
mkfifo "$work/issuer-in"
python3 "$ROOT/Tests/TestIssuer/test_issuer.py" < "$work/issuer-in" > "$work/issuer-out" 2>"$work/issuer-log" &
issuer_pid=$!
exec 9> "$work/issuer-in"
for _ in $(seq 100); do grep -q '^PORT=' "$work/issuer-out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/^PORT=//p' "$work/issuer-out" | head -n1)
[ -n "$port" ] || { echo "demo: the test issuer did not start" >&2; cat "$work/issuer-log" >&2; exit 1; }
export CHATGPT_CREDENTIAL_ISSUER="http://127.0.0.1:$port"
# The test issuer also plays the ChatGPT backend (GET /backend-api/wham/usage).
export CHATGPT_CREDENTIAL_BACKEND="$CHATGPT_CREDENTIAL_ISSUER/backend-api"

admin() { # admin METHOD PATH [JSON] — the test issuer's admin API
    python3 - "$CHATGPT_CREDENTIAL_ISSUER$2" "$1" "${3:-}" <<'PY'
import sys, urllib.request
url, method, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, data=body.encode() if body else None, method=method,
                             headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=10).read().decode())
PY
}
counter() { admin GET /__admin/stats | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
if [ -t 1 ]; then bold=$(printf '\033[1m'); plain=$(printf '\033[0m'); else bold=; plain=; fi
step() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }
short() { sed -E 's/([A-Za-z0-9_-]{24})[A-Za-z0-9_.-]+/\1…/g'; } # tokens are long; show their start

echo "chatgpt-credential demo — a local test issuer on $CHATGPT_CREDENTIAL_ISSUER, throwaway HOME $HOME"
admin POST /__admin/config '{"approve_after": 1, "interval": 1, "email": "demo@example.com", "plan": "plus"}' >/dev/null

step chatgpt-credential login --device
"$BIN" login --device --non-interactive

step chatgpt-credential status
"$BIN" status

step 'chatgpt-credential get                # the bearer token for $(…) in scripts'
"$BIN" get | short

step chatgpt-credential get --account-id
"$BIN" get --account-id

step 'chatgpt-credential usage            # plan and rate-limit windows, from the same fresh token'
"$BIN" usage

step "chatgpt-credential usage --json | python3 -c '…primary window…'"
"$BIN" usage --json | python3 -c 'import json,sys; w=json.load(sys.stdin)["windows"][0]; print(w["name"], w["window_seconds"], "s:", w["used_percent"], "% used, resets", w["resets_at"])'

step "chatgpt-credential exec -- sh -c 'echo \$CHATGPT_ACCOUNT_ID has a \${#CHATGPT_ACCESS_TOKEN}-character token'"
"$BIN" exec -- sh -c 'echo "$CHATGPT_ACCOUNT_ID has a ${#CHATGPT_ACCESS_TOKEN}-character token"'

before=$(counter refresh_requests)
step chatgpt-credential get --force-refresh
"$BIN" get --force-refresh | short
echo "(the issuer counted $(( $(counter refresh_requests) - before )) refresh; the rotated refresh token was saved before printing)"

step "ls -l \$XDG_DATA_HOME/chatgpt-credential    # an age file that 'age -d -i identity' can read"
ls -l "$XDG_DATA_HOME/chatgpt-credential" | sed 1d

step chatgpt-credential erase
"$BIN" erase
echo "(revocations at the issuer: $(counter revocations))"

step chatgpt-credential status
set +e
"$BIN" status
code=$?
set -e
echo "(exit status $code: 3 means sign-in required)"
[ "$code" -eq 3 ] || { echo "demo: expected exit 3 after erase" >&2; exit 1; }
echo
echo "demo finished; the throwaway HOME and the test issuer are removed."
