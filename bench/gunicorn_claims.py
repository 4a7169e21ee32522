"""gunicorn settings for the claims benchmark (``gunicorn -c bench/gunicorn_claims.py``).

Sync workers, 2 per core, as the deployment runs the web tier (docs/deployment.md): a claim is CPU
(Python and PostgreSQL) on 2 cores, so more requests in flight only queue inside the processes.
Sync workers take one request at a time from the shared listen queue, so 32 wrk connections wait
there in arrival order (p99 close to p50); gthread workers instead each keep the keep-alive
connections they accepted, and an unlucky connection waits behind a busy process (a long tail).
``BENCH_CLAIMS_WORKERS`` / ``BENCH_CLAIMS_THREADS`` override (threads > 1: gthread) for comparisons.
"""

import multiprocessing
import os

workers = int(os.environ.get("BENCH_CLAIMS_WORKERS", 2 * multiprocessing.cpu_count()))
threads = int(os.environ.get("BENCH_CLAIMS_THREADS", 1))
worker_class = "gthread" if threads > 1 else "sync"
backlog = 256
timeout = 60
loglevel = "warning"
