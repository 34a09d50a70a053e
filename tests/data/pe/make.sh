#!/bin/sh
# Regenerates fixture.pyd (see README.md). Run from this directory. Needs nvcc (CUDA 13.0 at
# /usr/local/cuda-13.0) and Debian's gcc-mingw-w64-x86-64 (x86_64-w64-mingw32-gcc, dlltool).
set -eu
NVCC=${NVCC:-/usr/local/cuda-13.0/bin/nvcc}
"$NVCC" -fatbin -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code='[sm_80,compute_80]' \
    -o kernel.fatbin kernel.cu
tmp=$(mktemp -d)
for lib in c10 mystery; do
    printf 'LIBRARY %s.dll\nEXPORTS\n%s_answer\n' "$lib" "$lib" > "$tmp/$lib.def"
done
x86_64-w64-mingw32-dlltool -d "$tmp/c10.def" -l "$tmp/libc10.a"
x86_64-w64-mingw32-dlltool -d "$tmp/mystery.def" -l "$tmp/libmystery.a"
x86_64-w64-mingw32-gcc -shared -Os -s -o fixture.pyd fixture.c -L"$tmp" -lc10 -lmystery
rm -rf "$tmp"
objdump -h fixture.pyd | grep -A1 nv_fatb
objdump -p fixture.pyd | grep -E 'DLL Name'
