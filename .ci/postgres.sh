#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the concurrency tests and print its SQLAlchemy URL.
# Installs Debian's server first where it is missing (and apt works); fails quietly otherwise.
set -euo pipefail
port=${AUTOTUNE_TEST_PG_PORT:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null 2>&1 || true
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
fi
[ -n "$bin" ] || { echo "no PostgreSQL server available" >&2; exit 1; }
dir=$(mktemp -d /tmp/autotune-pg.XXXXXX)
as_owner=()
if [ "$(id -u)" = 0 ]; then  # initdb refuses to run as root
  chown postgres "$dir"
  as_owner=(runuser -u postgres --)
fi
"${as_owner[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
"${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
"${as_owner[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres autotune_test
echo "postgresql://postgres@127.0.0.1:$port/autotune_test"
