#!/bin/sh
# Regenerates libfixture.so from fixture.cpp (see README.md). Run from this directory.
set -eu
g++ -shared -fPIC -Os -s -Wl,-z,noseparate-code -Wl,--build-id=none -o libfixture.so fixture.cpp
readelf --version-info libfixture.so | sed -n '/version_r/,$p'
