"""The read-only web view of one storm (``storm-queue serve``, issue 34):
``server`` (the HTTP edge: threads, limits, the token), ``routes`` (which
path answers what), ``seen`` (the storm as last read, shared by every
request), ``pages`` (the HTML, made from what ``list``, ``why`` and ``log``
show). It reads only: no lock, nothing written."""
