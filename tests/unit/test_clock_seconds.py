"""``clock.seconds`` reads a stamp of the log's form by arithmetic (issue 34:
``metrics`` must not load ``re`` through ``strptime``), giving the very float
``datetime`` gives, and refuses what ``datetime`` refuses."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from storm_queue.core.clock import seconds, stamp


def by_datetime(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)))
@example(datetime(2000, 2, 29, 23, 59, 59, 999999))
@example(datetime(1900, 3, 1))
@example(datetime(1969, 12, 31, 23, 59, 59, 1))
def test_a_stamp_reads_as_datetime_reads_it(moment: datetime) -> None:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ").rjust(27, "0")
    assert seconds(text) == by_datetime(text)


@given(st.floats(min_value=0, max_value=253402300799, allow_nan=False))
def test_seconds_undoes_stamp(t: float) -> None:
    assert abs(seconds(stamp(t)) - t) < 1e-6 * max(1.0, abs(t)) + 1e-6


@pytest.mark.parametrize("text", ["2026-02-29T00:00:00.000000Z", "2026-13-01T00:00:00.000000Z", "2026-12-01T24:00:00.000000Z",
                                  "2026-12-01T00:60:00.000000Z", "2026-12-01T00:00:60.000000Z", "0000-01-01T00:00:00.000000Z",
                                  "2026-12-01 00:00:00.000000Z", "2026-12-0１T00:00:00.000000Z", "", "now"])
def test_what_is_not_a_stamp_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        seconds(text)
