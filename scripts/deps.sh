#!/bin/sh
# deps.sh — installs the Debian/Ubuntu packages gptscope needs: to build and
# chat (always), and to run the tests (--test). As root it runs apt-get
# itself; as another user, through sudo.
#   sh scripts/deps.sh          build + chat + PNG pictures
#   sh scripts/deps.sh --test   and what the test suite needs
set -eu
PKGS="make gcc libc6-dev pkg-config libopenblas-dev libpcre2-dev libcjson-dev libncurses-dev libreadline-dev libcairo2-dev"
TEST_PKGS="libcmocka-dev python3 python3-numpy python3-regex python3-torch tmux groff-base man-db ca-certificates"
case "${1:-}" in
--test) PKGS="$PKGS $TEST_PKGS"; command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm" ;;
"") ;;
*) echo "usage: sh scripts/deps.sh [--test]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -n "$missing" ] || { echo "deps: every package is installed"; exit 0; }
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1; then as_root="sudo"
else echo "deps: not root and no sudo: install as root:$missing" >&2; exit 1
fi
echo "deps: installing$missing"
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
