#!/bin/sh
# check_docs.sh: the README and docs/ name only what exists; the layout map matches the tree (check_docs.py).
exec "${PYTHON:-python3}" "$(dirname "$0")/check_docs.py"
