"""Publishing wheels: to a directory, to a GitHub Release, or to a PEP 503 upload server.

All three keep one rule (:mod:`~dswheels.effects.publish.outgoing`): a published file is
immutable. Publishing a name that is already there with the same bytes does nothing (so a
re-run of a tag is a no-op); the same name with other bytes is an error, reported for every
such file before anything is written. Each destination is its own module:
:mod:`~dswheels.effects.publish.directory`, :mod:`~dswheels.effects.publish.github_release`,
:mod:`~dswheels.effects.publish.upload_server`; their entry points are re-exported here.
"""

from __future__ import annotations

from dswheels.effects.publish.directory import publish_dir
from dswheels.effects.publish.github_release import check_github_limits, github_index_files, publish_github
from dswheels.effects.publish.outgoing import Outgoing, PublishResult, collect_wheels, outgoing_files
from dswheels.effects.publish.upload_server import publish_upload, upload_credentials

__all__ = [
    "Outgoing",
    "PublishResult",
    "check_github_limits",
    "collect_wheels",
    "github_index_files",
    "outgoing_files",
    "publish_dir",
    "publish_github",
    "publish_upload",
    "upload_credentials",
]
