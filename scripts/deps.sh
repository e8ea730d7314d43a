#!/bin/sh
# deps.sh — the Debian/Ubuntu packages gptscope needs: to build and chat
# (always), and to run the tests (--test). As root it runs apt-get itself;
# as another user, through sudo. --missing only prints the packages not yet
# installed (.ci/run installs those).
#   sh scripts/deps.sh [--test] [--missing]
set -eu
PKGS="make gcc libc6-dev pkg-config libopenblas-dev libpcre2-dev libcjson-dev libutf8proc-dev libncurses-dev libreadline-dev libcairo2-dev"
TEST_PKGS="libcmocka-dev python3 python3-numpy python3-regex python3-torch python3-jinja2 tmux groff-base man-db ca-certificates"
only_list=0
for a in "$@"; do
    case $a in
    --test) PKGS="$PKGS $TEST_PKGS"; command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm" ;;
    --missing) only_list=1 ;;
    *) echo "usage: sh scripts/deps.sh [--test] [--missing]" >&2; exit 2 ;;
    esac
done
missing=""
for p in $PKGS; do # installed, not merely known to dpkg (a removed package keeps its config files)
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ $only_list = 1 ]; then echo $missing; exit 0; fi
[ -n "$missing" ] || { echo "deps: every package is installed"; exit 0; }
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1; then as_root="sudo"
else echo "deps: not root and no sudo: install as root:$missing" >&2; exit 1
fi
echo "deps: installing$missing"
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
