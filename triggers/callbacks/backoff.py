"""When a failed delivery is tried again: exponential backoff, for up to a day.

The n-th retry of a series waits FIRST_RETRY_S * 2^(n-1) seconds, at most MAX_DELAY_S: 30 s,
1, 2, 4, 8 and 16 minutes, then every 30 minutes. The cap stays below the broker's visibility
timeout (an hour, config/settings.py): a countdown message held longer would be handed to a
second worker. No retry is scheduled past a day after the series' first attempt.
"""

from __future__ import annotations

from datetime import datetime, timedelta

FIRST_RETRY_S = 30.0
MAX_DELAY_S = 30 * 60.0
RETRY_FOR = timedelta(days=1)


def retry_delay(retry: int) -> float:
    """Return the seconds to wait before retry number `retry` (from 1) of a series."""
    return min(FIRST_RETRY_S * 2 ** (retry - 1), MAX_DELAY_S)


def next_attempt(*, series_started_at: datetime, retry: int, now: datetime) -> datetime | None:
    """Return when retry number `retry` of a series started at `series_started_at` is due,
    or None when that would be more than a day after the series began (give up)."""
    at = now + timedelta(seconds=retry_delay(retry))
    return at if at - series_started_at <= RETRY_FOR else None
