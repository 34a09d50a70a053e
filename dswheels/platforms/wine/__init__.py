"""The Windows toolchain's second host: Wine on a Linux machine (docs/build.md#windows-under-wine).

A win_amd64 cell is built by the same ``dswheels build`` as on a windows-2022 runner (the native
host): the same source, op plan, checks after the compile and manifest. What differs is where the
Windows tools come from and how they are run:

* MSVC (cl, link, lib) from a root the user points at (``--msvc-root``: made by msvc-wine's
  ``vsdownload.py``, which asks the user to accept Microsoft's license, or copied from a Visual
  Studio install); :mod:`~dswheels.platforms.wine.msvc_root`;
* the CUDA toolkit from the components of compat.yml's one list, taken from NVIDIA's win_amd64
  wheels on PyPI (the runners take the same list from NVIDIA's archives); :mod:`~.cuda`;
* torch's win_amd64 wheel (headers and import libraries), CPython's Windows headers and import
  library; :mod:`~.windows_torch`, :mod:`~.python`;
* each tool run by ``wine`` through a script that translates paths (:mod:`dswheels.probes.wine_tool`),
  and DeepSpeed's setup.py run with the answers Windows gives (:mod:`dswheels.probes.win32_python`).

:mod:`~.host` ties them together into what the build needs: an environment and a command.
"""
