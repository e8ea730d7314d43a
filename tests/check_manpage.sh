#!/bin/sh
# check_manpage.sh: docs/gptscope.1 against --help, the chat's keys and commands (check_manpage.py).
exec "${PYTHON:-python3}" "$(dirname "$0")/check_manpage.py"
