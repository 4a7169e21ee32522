"""Waitlist reads (no locks), one module per reader. Every lookup is scoped to the clinic: foreign refs are 404.

- ``api``: the entry, vacancy and offer pages and details (the API and the console's lists);
- ``dispatch``: why a vacancy has no offer (pass-over reasons, waiting state), for the API and the console;
- ``queue``: the operations Action queue (what needs a person), keyset-paged over its sources;
- ``panels``: the console's evidence per queue row, the vacancy panel and the commands each allows;
- ``operations``: the Waitlist page's snapshot, the vacancies of today and tomorrow, an entry's activity;
- ``metrics``: fill metrics, decision freshness, outbox health and readiness warnings (console and /metrics);
- ``reconcile``: the loop's reconcile findings (stuck bookings, offers without an active hold).
"""
