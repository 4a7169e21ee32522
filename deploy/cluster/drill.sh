#!/bin/sh
# The failover drill (deploy/cluster/drill.py): `deploy/cluster/drill.sh` for the full one (the PostgreSQL primary's
# machine, then the Redis master), `deploy/cluster/drill.sh --short` for CI (one kill). Brings `make cluster` up
# first when it is not; leaves it running (`make cluster-down` stops it).
set -eu
cd "$(dirname "$0")/../.."
exec .venv/bin/python deploy/cluster/drill.py "$@"
