"""Durations as people read them, for the terminal, logs and job summaries."""

from __future__ import annotations

__all__ = ["format_duration"]


def format_duration(seconds: float) -> str:
    """``3m12s`` / ``4.2s`` / ``1h05m``.

    >>> format_duration(192.4)
    '3m12s'
    >>> format_duration(4.21)
    '4.2s'
    >>> format_duration(3900)
    '1h05m'
    """
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
