#!/bin/sh
# Regenerates the AArch64 fixtures of tests/data/a64/README.md in an arm64 root under qemu (as root):
#   ./make.sh ROOT     (ROOT: an arm64 Debian 12 root, e.g. the one `dswheels build --qemu` makes)
set -eu
root=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$root/tmp/dswheels-a64-fixtures
mkdir -p "$work"
cp "$here/adam_step.c" "$work/"
cc() { chroot "$root" gcc -O3 -shared -fPIC -nostdlib -Wl,--build-id=none -Wl,-z,max-page-size=4096 -s "$@"; }
# dswheels' flags: the armv8.2-a baseline, DeepSpeed's NEON define
cc -march=armv8.2-a -D__NEON__ -o /tmp/dswheels-a64-fixtures/libadam-armv8.2-a.so /tmp/dswheels-a64-fixtures/adam_step.c
# DeepSpeed's own flags on GitHub's arm64 runner: -march=native and -D__SVE__, with that machine's /proc/cpuinfo
# (a Neoverse N2) in place of this machine's (qemu-user 7.2 passes the x86_64 host's through)
cp "$here/cpuinfo-neoverse-n2" "$root/proc/cpuinfo"
cc -march=native -D__SVE__ -o /tmp/dswheels-a64-fixtures/libadam-native-n2.so /tmp/dswheels-a64-fixtures/adam_step.c
rm "$root/proc/cpuinfo"
cp "$work"/libadam-*.so "$here/"
rm -r "$work"
# each instruction of baseline.s and features.s assembled by the root's GNU as (binutils 2.40), one word per line
for name in baseline features; do
  cp "$here/$name.s" "$root/tmp/dswheels-a64-$name.s"
  chroot "$root" as -march=armv9.2-a+sve2+sme+fp16+fp16fml+bf16+i8mm+rcpc+dotprod+flagm \
    -o "/tmp/dswheels-a64-$name.o" "/tmp/dswheels-a64-$name.s"
  chroot "$root" objcopy -O binary -j .text "/tmp/dswheels-a64-$name.o" "/tmp/dswheels-a64-$name.bin"
  cp "$root/tmp/dswheels-a64-$name.bin" "$here/$name.bin"
  rm "$root/tmp/dswheels-a64-$name".*
done
