#!/bin/sh
# Regenerates libfixture.so from fixture.cpp and libverdef.so from verdef.c + verdef.map
# (see README.md). Run from this directory.
set -eu
g++ -shared -fPIC -Os -s -Wl,-z,noseparate-code -Wl,--build-id=none -o libfixture.so fixture.cpp
readelf --version-info libfixture.so | sed -n '/version_r/,$p'
gcc -shared -fPIC -Os -s -nostdlib -Wl,-z,noseparate-code -Wl,--build-id=none \
    -Wl,-soname,libverdef.so.1 -Wl,--version-script=verdef.map -o libverdef.so verdef.c
readelf --version-info libverdef.so | sed -n '/version_d/,/version_r/p'
