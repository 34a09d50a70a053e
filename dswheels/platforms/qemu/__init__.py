"""qemu-user as the ``linux_aarch64`` platform's host on an x86_64 Linux machine.

An arm64 Debian root (:mod:`.root`, made by debootstrap under the cache or given with ``--qemu-root``)
runs under qemu-user (:mod:`.emulator`): a cell's whole build is ``dswheels build`` itself, run
natively in that root (:mod:`.machine`), the same command an arm64 runner runs; verify's run-time part
runs the root's Python the same way. Chosen by :mod:`dswheels.platforms.linux_aarch64` only; no stage
imports it.
"""
