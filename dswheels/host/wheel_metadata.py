"""A wheel's METADATA read over HTTP range requests: a few dozen kilobytes instead of the wheel.

torch wheels are 100-550 MB; what ``dswheels facts check`` needs from one is its
``Requires-Dist`` (the CUDA toolkit it pins). A wheel is a zip whose ``.dist-info`` files are
written last, so the end of the file holds the central directory entry of METADATA: one
suffix request reads it, a second one the compressed METADATA itself. PyPI's CDN and
download.pytorch.org honour ``Range``; a server that does not fails with a clear error.
"""

from __future__ import annotations

import re
import struct
import zlib

import requests

from dswheels.host.http import TIMEOUTS
from dswheels.kernel.errors import SourceError
from dswheels.kernel.numbers import is_ascii_digits

__all__ = ["read_wheel_metadata"]

TAIL = 64 * 1024  # the end of the zip: end-of-central-directory and the dist-info entries
_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_METADATA_RE = re.compile(r"^[^/]+\.dist-info/METADATA$")


class _Ranges:
    def __init__(self, session: requests.Session, url: str) -> None:
        self.session = session
        self.url = url
        self.size = 0

    def _get(self, spec: str) -> requests.Response:
        try:
            response = self.session.get(self.url, headers={"Range": f"bytes={spec}"}, timeout=TIMEOUTS.for_request)
        except requests.RequestException as exc:
            raise SourceError(
                f"cannot read {self.url}: {exc}", hint="check the network, or --skip the source"
            ) from None
        if response.status_code != 206:
            raise SourceError(
                f"{self.url} answered HTTP {response.status_code} to a range request (206 expected)",
                hint="the server must honour Range requests to read a wheel's METADATA without the wheel",
            )
        return response

    def tail(self, length: int) -> tuple[int, bytes]:
        """``(offset, bytes)`` of the last ``length`` bytes; learns the file's size."""
        response = self._get(f"-{length}")
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        if not is_ascii_digits(total) or len(total) > 15:
            raise SourceError(f"{self.url}: no file size in the Content-Range of a range answer")
        self.size = int(total)
        return self.size - len(response.content), response.content

    def span(self, start: int, length: int) -> bytes:
        return self._get(f"{start}-{min(start + length, self.size) - 1}").content


def _zip64_values(extra: bytes, wanted: list[bool]) -> list[int]:
    """The zip64 extra field's 8-byte values for the header fields that were 0xFFFFFFFF."""
    values: list[int] = []
    i = 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, i)
        if tag == 1:
            body = extra[i + 4 : i + 4 + size]
            count = sum(wanted)
            return list(struct.unpack_from(f"<{count}Q", body)) if len(body) >= 8 * count else []
        i += 4 + size
    return values


def _find_metadata(blob: bytes) -> tuple[int, int, int] | None:
    """``(method, compressed size, local header offset)`` of METADATA's central directory entry in ``blob``."""
    position = blob.rfind(_CENTRAL)
    while position >= 0:
        if position + 46 <= len(blob):
            (method, csize, _usize, name_len, extra_len, offset) = (
                struct.unpack_from("<H", blob, position + 10)[0],
                *struct.unpack_from("<II", blob, position + 20),
                *struct.unpack_from("<HH", blob, position + 28),
                struct.unpack_from("<I", blob, position + 42)[0],
            )
            name = blob[position + 46 : position + 46 + name_len].decode("utf-8", "replace")
            if _METADATA_RE.match(name):
                if 0xFFFFFFFF in (csize, offset):
                    start = position + 46 + name_len
                    big = _zip64_values(
                        blob[start : start + extra_len],
                        [_usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, offset == 0xFFFFFFFF],
                    )
                    fields = iter(big)
                    if _usize == 0xFFFFFFFF:
                        next(fields, None)
                    csize = next(fields, csize) if csize == 0xFFFFFFFF else csize
                    offset = next(fields, offset) if offset == 0xFFFFFFFF else offset
                return method, csize, offset
        position = blob.rfind(_CENTRAL, 0, position)
    return None


def _central_directory(ranges: _Ranges, tail_start: int, tail: bytes) -> tuple[int, int]:
    """``(offset, size)`` of the central directory, from the end-of-central-directory records."""
    eocd = tail.rfind(_EOCD)
    if eocd < 0 or eocd + 22 > len(tail):
        raise SourceError(f"{ranges.url} does not end like a zip file (no end-of-central-directory record)")
    size, offset = struct.unpack_from("<II", tail, eocd + 12)
    locator = eocd - 20
    if offset == 0xFFFFFFFF and locator >= 0 and tail[locator : locator + 4] == _ZIP64_LOCATOR:
        record_at = struct.unpack_from("<Q", tail, locator + 8)[0]
        record = tail[record_at - tail_start :] if record_at >= tail_start else ranges.span(record_at, 56)
        size, offset = struct.unpack_from("<QQ", record, 40)
    return offset, size


def read_wheel_metadata(session: requests.Session, url: str) -> str:
    """The text of the wheel's ``*.dist-info/METADATA`` at ``url``."""
    ranges = _Ranges(session, url)
    tail_start, tail = ranges.tail(TAIL)
    cd_offset, cd_size = _central_directory(ranges, tail_start, tail)
    window = tail[max(0, cd_offset - tail_start) :]
    found = _find_metadata(window)
    if found is None:  # not among the last entries: read the whole central directory
        found = _find_metadata(ranges.span(cd_offset, cd_size))
    if found is None:
        raise SourceError(f"{url} has no .dist-info/METADATA: not a wheel")
    method, csize, offset = found
    local = ranges.span(offset, 30 + 1024 + csize)
    if local[:4] != b"PK\x03\x04":
        raise SourceError(f"{url}: METADATA's local header is not where the central directory says")
    name_len, extra_len = struct.unpack_from("<HH", local, 26)
    start = 30 + name_len + extra_len
    if start + csize > len(local):
        local += ranges.span(offset + len(local), start + csize - len(local))
    data = local[start : start + csize]
    if method == 8:
        data = zlib.decompressobj(-15).decompress(data)
    elif method != 0:
        raise SourceError(f"{url}: METADATA is compressed with method {method}, which dswheels does not read")
    return data.decode("utf-8")
