#!/bin/sh
# make demo: the tutorial walk-through (examples/tutorial.c), then the
# environment report of the tilec tool.
B=${1:-build}
set -e
"$B/examples/tutorial"
echo
echo "==== tilec info ===="
bin/tilec info
