"""Development tools, not part of the product (not installed): ``launcher`` (``make run``'s process
supervisor: embedded PostgreSQL and Redis, web, worker and beat, restarted when they exit), ``install`` (the
Makefile's install step, which reports its progress) and
``scratchdb`` (throwaway databases for ``make bench`` and ``make simulate``)."""
