#!/usr/bin/env bash
# Prepare a fresh machine: system packages the suite uses, then .venv with the
# project installed editable. Idempotent; cheap when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)   # PySpark
command -v promtool >/dev/null 2>&1 || need+=(prometheus)            # integration tests
command -v tmux >/dev/null 2>&1 || need+=(tmux)                      # demo test
command -v losetup >/dev/null 2>&1 || need+=(mount)                  # loop-device tests
command -v nft >/dev/null 2>&1 || need+=(nftables)                 # network faults (fault net, drill chaos)
command -v ip >/dev/null 2>&1 || need+=(iproute2)                  # network namespaces
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)             # HA: controller, failover tests
command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 || need+=(chromium-headless-shell)  # HTML report tests
if [ "${1:-}" = "--bench" ]; then  # servers bench/broker_vs_peers.py measures against
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "setup: apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.floodgate-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # a first run takes a minute or two: say so, and keep pip's build chatter in a log
  # that is shown only when it fails
  echo "setup: installing floodgate and its Python packages into .venv (log: .venv/setup.log) ..."
  if ! { .venv/bin/pip install -q --disable-pip-version-check --upgrade pip &&
         .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'; } >.venv/setup.log 2>&1; then
    tail -n 30 .venv/setup.log >&2
    echo "setup: pip failed (whole log: .venv/setup.log)" >&2
    exit 1
  fi
  touch "$stamp"
  echo "setup: done"
fi
if [ "${1:-}" = "--bench" ]; then
  .venv/bin/pip install -q -e '.[dev,bench]'
fi
