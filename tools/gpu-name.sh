#!/bin/sh
# The GPU the library finds, by the name `tilec info` gives it; nothing,
# and exit status 1, when there is none. Used by make test (how many test
# programs at once), make bench (the results' file names) and make demo.
#   sh tools/gpu-name.sh [path of tilec, default bin/tilec]
name=$("${1:-bin/tilec}" info 2>/dev/null | sed -n 's/^device [0-9]*: *//p' | head -n 1)
case "$name" in "" | none*) exit 1 ;; esac
printf '%s\n' "$name"
