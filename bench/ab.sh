#!/bin/bash
# A/B of the redirect's CPU cost on a noisy machine: three live servers (bare Fastify, Svc, and Svc
# started with extra environment, e.g. an experimental switch), loaded in turn for N requests each,
# round after round. Prints each server's CPU µs per request (all threads, from /proc) and the
# ratios to bare. Paired rounds cancel most of the machine's drift; read medians, not one round.
#
#   bash bench/ab.sh                      # Svc vs Svc (noise floor), desktop agent
#   UA=android R=8 bash bench/ab.sh       # Android agent, 8 rounds
#   EXPB="MY_SWITCH=1" bash bench/ab.sh   # Svc vs Svc with MY_SWITCH=1
#   P=/__bench/bare/bench42 EXPB="MY_SWITCH=1" bash bench/ab.sh   # the platform's own cost
# Needs Linux /proc, bc, and npx autocannon; SQLite + in-process state (no DATABASE_URL/REDIS_URL).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${UA:-desktop}" in
  desktop) UA='Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36' ;;
  android) UA='Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36' ;;
esac
N=${N:-25000}
# The Svc servers' path: the redirect, or P=/__bench/bare/bench42 for the bare handler in the app.
P=${P:-/l/bench42}
R=${R:-6}
dir=$(mktemp -d)
pids=()
start() { # tag, extra env...
  local tag=$1; shift
  env LINKS_BENCH_MODE="$([ "$tag" = bare ] && echo bare || echo svc)" DATABASE_URL= REDIS_URL= "$@" \
    node --conditions=svc-source --import tsx bench/links-server.ts > "$dir/$tag" 2>&1 &
  pids+=($!)
}
start bare
start A ${EXPA:-}
start B ${EXPB:-}
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
for tag in bare A B; do until grep -q '"port"' "$dir/$tag"; do sleep 0.2; done; done
port() { grep '"port"' "$dir/$1" | node -e 'process.stdin.on("data",d=>console.log(JSON.parse(d).port))'; }
path() { [ "$1" = bare ] && echo /l/bench42 || echo "$P"; }
cpu() { awk '{print $14+$15}' /proc/"$1"/task/*/stat | paste -sd+ | bc; }
declare -A PID PORT
i=0
for tag in bare A B; do
  PID[$tag]=$(pgrep -P "${pids[$i]}" node 2>/dev/null | head -1 || true)
  [ -n "${PID[$tag]}" ] || PID[$tag]=${pids[$i]}
  PORT[$tag]=$(port "$tag")
  npx autocannon -c 50 -a 20000 -H "user-agent=$UA" "http://127.0.0.1:${PORT[$tag]}$(path "$tag")" > /dev/null 2>&1
  i=$((i + 1))
done
tick=$(getconf CLK_TCK)
for _ in $(seq 1 "$R"); do
  line=""
  for tag in bare A B; do
    a=$(cpu "${PID[$tag]}")
    npx autocannon -c 50 -a "$N" -H "user-agent=$UA" "http://127.0.0.1:${PORT[$tag]}$(path "$tag")" > /dev/null 2>&1
    b=$(cpu "${PID[$tag]}")
    line="$line $tag $(echo "($b - $a) * 1000000 / $tick / $N" | bc -l | cut -c1-5)"
  done
  echo "$line" | awk '{printf "%s   A/bare %.2f  B/bare %.2f\n", $0, $2/$4, $2/$6}'
done
