#!/bin/sh
# Makes sure cmocka can be compiled against: from CMOCKA_DIR, from the system,
# or installed from Debian's packages (libcmocka-dev) when we are root.
set -e
if [ -n "$CMOCKA_DIR" ]; then
    [ -f "$CMOCKA_DIR/include/cmocka.h" ] && exit 0
    echo "error: CMOCKA_DIR=$CMOCKA_DIR has no include/cmocka.h" >&2
    exit 1
fi
probe() { printf '#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <setjmp.h>\n#include <cmocka.h>\nint main(void){return 0;}\n' | ${CC:-cc} -x c - -o /dev/null -lcmocka 2>/dev/null; }
probe && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "cmocka is missing: installing Debian's libcmocka-dev ..."
    (apt-get install -y -q libcmocka-dev >/dev/null 2>&1 ||
     { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libcmocka-dev >/dev/null 2>&1; }) || true
    probe && exit 0
fi
echo "error: the tests need cmocka. Install it with 'apt-get install libcmocka-dev'," >&2
echo "       or point CMOCKA_DIR at a prefix that holds include/cmocka.h and lib/." >&2
exit 1
