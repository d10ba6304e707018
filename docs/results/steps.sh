# Sourced by the dated run scripts of docs/results/: each step logs to $OUT/<name>.log under a time limit, and its
# process wall, exit code and log tail are printed.  Usage: step NAME LIMIT_S COMMAND...  (TAILN: lines of tail)
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
