#!/bin/sh
# Debian's headless Chromium for the browser test of `psp serve`'s page (tests/serve/test_serve_browser.py), unpacked
# into ROOT without installing anything system-wide. Usage: scripts/fetch_chromium.sh ROOT PACKAGE...
# Of the packages given (chromium, chromium-common and the libraries it needs), those the machine has installed are
# left out; the rest are downloaded with apt-get download and unpacked with dpkg -x. ldd then checks that nothing
# is missing and names what is.
set -eu
root=${1:?usage: fetch_chromium.sh ROOT PACKAGE...}
shift
debs="$root/../debs"
mkdir -p "$root" "$debs"
wanted=""
for package in "$@"; do
	case $package in chromium | chromium-common) wanted="$wanted $package"; continue ;; esac
	dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q 'install ok installed' || wanted="$wanted $package"
done
echo "fetch_chromium.sh: downloading$wanted"
# A stale package list names versions the mirror no longer has: refresh it once and try again.
(cd "$debs" && apt-get download $wanted) || { apt-get update -qq && (cd "$debs" && apt-get download $wanted); }
for package in $wanted; do
	for deb in "$debs/${package}"_*.deb; do dpkg -x "$deb" "$root"; done
done
library_path=$(find "$root" -name '*.so*' -type f -printf '%h\n' | sort -u | tr '\n' ':')
missing=$(LD_LIBRARY_PATH=$library_path ldd "$root/usr/lib/chromium/chromium" $(find "$root" -name '*.so*' -type f) \
	2>/dev/null | sed -n 's/^[[:space:]]*\([^ ]*\) => not found$/\1/p' | sort -u | tr '\n' ' ')
if [ -n "$missing" ]; then
	echo "fetch_chromium.sh: libraries still missing (add their packages to CHROMIUM_DEBS): $missing" >&2
	exit 1
fi
LD_LIBRARY_PATH=$library_path "$root/usr/lib/chromium/chromium" --headless --no-sandbox --version
