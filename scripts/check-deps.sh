#!/usr/bin/env bash
# Proves scripts/install-deps.sh complete. Every file the build takes from a Debian package —
# what CMake's find_package and find_library resolved (CMakeCache.txt), every system header
# the compiler read (the ninja deps log), every shared library the binaries load — must
# belong to a package on the list, to one of their hard dependencies, or to the base system
# (Essential, or Priority required/important). Anything else is on this machine by accident
# (a Recommends, or a hand install) and would be missing on a fresh one: the OpenCL packages
# that Debian's dnnl-config.cmake needs were such a case.
# usage: scripts/check-deps.sh BUILD_DIR   (a configured and built Ninja build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: check-deps.sh BUILD_DIR}

mapfile -t listed < <(scripts/install-deps.sh --list)
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
            --no-replaces --no-enhances "${listed[@]}" 2>/dev/null | grep -v '^ ' | sed 's/:.*//' | sort -u)
base=$(dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' | awk '$2 == "yes" || $3 == "required" || $3 == "important" {print $1}')
allowed=$(printf '%s\n%s\n' "$closure" "$base" | sort -u)

# Files under /usr (not /usr/local, where no Debian package installs) the build used.
files=$(
  {
    # FILEPATH entries (libraries, programs) and the folders of CMake package configs.
    sed -n 's/^[A-Za-z0-9_]*:FILEPATH=\(\/usr\/.*\)$/\1/p' "$BUILD/CMakeCache.txt"
    for dir in $(sed -n 's/^[A-Za-z0-9_]*_DIR:PATH=\(\/usr\/.*\)$/\1/p' "$BUILD/CMakeCache.txt"); do
      find "$dir" -maxdepth 1 -name '*onfig.cmake' -print -quit
    done
    ninja -C "$BUILD" -t deps 2>/dev/null | sed -n 's/^ *\(\/usr\/[^ ]*\)$/\1/p'
    for f in "$BUILD"/bin/* "$BUILD"/lib*/tessera/*.so; do
      ldd "$f" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'
    done
  } | grep -v '^/usr/local/' | grep -v NOTFOUND | sort -u
)
[ -n "$files" ] || { echo "check-deps: no files found in $BUILD (configure and build it first)"; exit 1; }

# Each file as named (a -dev package's libfoo.so symlink is what the linker reads) and as
# resolved, and under /lib too for merged-/usr. dpkg -S prints "pkg[:arch][, pkg...]: /path".
owned=$(for f in $files; do
          for g in "$f" "$(realpath -e "$f" 2>/dev/null)"; do
            [ -n "$g" ] || continue
            echo "$g"
            if [[ $g == /usr/lib/* ]]; then echo "${g#/usr}"; fi
          done
        done | sort -u | { xargs dpkg -S 2>/dev/null || true; } | grep -v '^diversion' || true)
owners=$(echo "$owned" | sed 's/: \/.*//' | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u)
missing=$(comm -23 <(echo "$owners") <(echo "$allowed"))
n_files=$(echo "$files" | wc -l)
if [ -n "$missing" ]; then
  echo "check-deps: FAIL: the build uses these packages, which scripts/install-deps.sh neither lists nor pulls in as a hard dependency:"
  for p in $missing; do
    example=$(echo "$owned" | grep -E "(^|, )$p(:[a-z0-9]+)?[,:]" | head -1 | sed 's/.*: //' || true)
    echo "  $p (e.g. $example)"
  done
  exit 1
fi
echo "check-deps: OK: $n_files files from $(echo "$owners" | wc -l) packages, all from the ${#listed[@]} listed packages, their hard dependencies or the base system"
