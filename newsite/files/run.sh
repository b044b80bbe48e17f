#!/usr/bin/env bash
# One entry point; each command first installs what is missing (the
# Debian packages, then the pinned Python environment .venv).
#   ./run.sh serve [server.py options]   install, then serve on :1717
#   ./run.sh test [pytest options]       install, then run the tests
#   ./run.sh setup                       only install
# STICKERS_VENV=DIR: use the virtualenv in DIR as it is, installing nothing
# into it (one that already has requirements.txt's pins).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES="{packages}"
ENGINE={engine}
VENV=${STICKERS_VENV:-.venv}

{functions}
setup() {
    install_packages $PACKAGES
    [ -n "${STICKERS_VENV:-}" ] || make_venv "$VENV" "$(main_python)" requirements.txt
}

command=${1:-help}
[ $# -gt 0 ] && shift
case "$command" in
    setup) setup ;;
    serve)
        setup
        exec "$VENV/bin/python" server.py -e "$ENGINE" "$@" ;;
    test)
        setup
        exec "$VENV/bin/python" -m pytest "$@" ;;
    *)
        sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
        [ "$command" = help ] || exit 2 ;;
esac
