#!/usr/bin/env bash
# The console's cost on Redis with many locks (docs/console.md, "Cost on Redis"):
#   bench/console/cost.sh POLYLOCK_BINARY [LOCKS] [SECONDS] [CONSOLE FLAGS...]
# Starts its own redis-server on a free port, holds LOCKS locks in Redisson's layout (owners
# of three clients with a record each; nothing renews them, so every command counted is the
# console's), runs `POLYLOCK_BINARY console` with an event stream open (so it refreshes), lets
# it warm up for 10 s, then prints per refresh (one `snapshot` event each) and per second the
# SCAN, HMGET and EVALSHA/EVAL calls and Redis's CPU time (INFO cpu, user + sys), and the size
# of one snapshot.
set -euo pipefail
binary=$1 locks=${2:-10000} seconds=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() { kill "${stream:-}" "${console:-}" 2>/dev/null || true; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
redis-server --port "$port" --save '' --appendonly no --dir "$work" --daemonize yes --logfile "$work/redis.log"
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
python3 - "$port" "$locks" <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
port, locks = sys.argv[1], int(sys.argv[2])
def command(*args):
    out = [f"*{len(args)}\r\n"]
    for arg in map(str, args):
        out.append(f"${len(arg.encode())}\r\n{arg}\r\n")
    sys.stdout.write("".join(out))
ids = [f"6e3814a1-e847-452b-a982-45baf93a1d{n:02}" for n in range(3)]
for n, id in enumerate(ids):
    command("HSET", f"polylock:client:{id}", "name", f"worker-{n}", "host", "host-a", "pid", 4000 + n)
for n in range(locks):
    command("HSET", f"orders:{n}", f"{ids[n % 3]}:1", 1)
    command("PEXPIRE", f"orders:{n}", 3600000)
PY
"$binary" console --redis "redis://127.0.0.1:$port" --bind 127.0.0.1:0 "$@" >"$work/console.out" 2>"$work/console.err" &
console=$!
until grep -q '^polylock console: ' "$work/console.out" 2>/dev/null; do sleep 0.1; done
base=$(sed -n 's/^polylock console: \(.*\)\/$/\1/p' "$work/console.out" | head -1)
curl -sN "$base/api/events" >"$work/events" &
stream=$!
sleep 10
sample() {
  redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[:=,]' '
    /^cmdstat_(scan|hmget|evalsha|eval):/ { sub("cmdstat_", "", $1); printf "%s %s %s\n", $1, $3, $5 }'
  redis-cli -p "$port" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { cpu += $2 } END { printf "cpu %.6f 0\n", cpu }'
  printf 'events %s 0\n' "$(grep -c '^event: snapshot' "$work/events")"
}
sample >"$work/before"
sleep "$seconds"
sample >"$work/after"
echo "binary: $binary; locks: $locks; over ${seconds} s; flags: $*"
awk -v seconds="$seconds" '
  NR == FNR { calls[$1] = $2; usec[$1] = $3; next }
  { dcalls[$1] = $2 - calls[$1]; dusec[$1] = $3 - usec[$1] }
  END {
    refreshes = dcalls["events"]
    printf "refreshes: %d (%.2f a second)\n", refreshes, refreshes / seconds
    split("scan hmget evalsha eval", names, " ")
    for (i = 1; i <= 4; i++) {
      name = names[i]
      printf "%-8s %8d calls, %7.1f per refresh, %6.1f ms of Redis time a second\n", name, dcalls[name], dcalls[name] / refreshes, dusec[name] / 1000 / seconds
    }
    printf "Redis CPU (user + sys): %.1f ms a second\n", dcalls["cpu"] * 1000 / seconds
  }' "$work/before" "$work/after"
printf 'one snapshot: %s bytes\n' "$(curl -s "$base/api/snapshot" | wc -c)"
