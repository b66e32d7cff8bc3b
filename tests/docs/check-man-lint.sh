#!/usr/bin/env bash
# check-man-lint.sh PAGE|DIR...: every man page (a DIR: its *.3) must render without one warning,
# as man(1) renders it in an 80-column terminal (groff -man -t -ww, UTF-8),
# and with man(1) itself; with mandoc installed, also `mandoc -Tlint`. A page
# holding only `.so man3/X.3` must name a page that exists beside it. Exits 1
# naming every page and warning.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PAGE|DIR..."; exit 2; }
pages=()
for arg in "$@"; do
    if [ -d "$arg" ]; then pages+=("$arg"/*.3); else pages+=("$arg"); fi
done
failed=0
checked=0
for page in "${pages[@]}"; do
    if [ "$(head -c 4 "$page")" = ".so " ]; then
        target=$(sed -n '1s/^\.so //p' "$page")
        if [ "$(wc -l <"$page")" -ne 1 ] || [ ! -f "$(dirname "$page")/../$target" ]; then
            echo "$page: a link to a page that does not exist: $(head -1 "$page")"
            failed=1
        fi
        continue
    fi
    checked=$((checked + 1))
    out=$(groff -man -t -ww -z -Tutf8 -rLL=78n "$page" 2>&1)
    out+=$(MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null | sed '1s/^/\n/')
    if command -v mandoc >/dev/null; then
        out+=$(mandoc -Tlint -Wwarning "$page" 2>&1 | sed '1s/^/\n/')
    fi
    if [ -n "$out" ]; then
        printf '%s: warnings:\n%s\n' "$page" "$out"
        failed=1
    fi
done
if [ $failed -ne 0 ]; then
    echo "check-man-lint: FAILED"
    exit 1
fi
echo "check-man-lint: $checked pages render without warnings"
