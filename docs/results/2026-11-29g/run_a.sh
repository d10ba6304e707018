#!/usr/bin/env bash
# 2026-11-29g calls 1-3: last session's run_next.sh, run as written (calls 1, 2, 3 = its modes 1, 2, 3; its probes
# live in 2026-11-29f). The calls ran a copy of it; this wrapper runs the same.
exec bash "$(dirname "$0")/../2026-11-29f/run_next.sh" "$@"
