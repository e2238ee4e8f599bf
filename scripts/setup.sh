#!/usr/bin/env bash
# Set up moldau in a virtualenv inside the repository (.venv), idempotent and quick when already done.
#
#   ./scripts/setup.sh          moldau (editable) and its runtime dependencies (+ extra "cluster": kazoo)
#   ./scripts/setup.sh --test   also the test dependencies (pip extras "test", "spark"), kcat, Java 17 and
#                               ZooKeeper (Debian packages)
#
# Environment: PYTHON=python3.11 picks the interpreter that creates .venv (default: python3).
set -euo pipefail

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }

want_test=0
for arg in "$@"; do
    case "$arg" in
        --test) want_test=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "setup.sh: unknown option: $arg" >&2; usage >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "setup.sh: creating $venv"
    "$py" -m venv "$venv"
fi

# Reinstall only when pyproject.toml changed, the mode widened, or the editable install does not point
# at this checkout (e.g. the repository was moved or cloned afresh).
extras="[cluster]"  # cluster: kazoo, for brokers started with zookeeper.connect (docs/cluster.md)
stamp="$venv/.moldau-setup"
if [ "$want_test" = 1 ]; then
    extras="[test,spark,cluster]"  # spark: moldau.spark's extra (pyspark, pyarrow), so tests/spark runs too
    stamp="$venv/.moldau-setup-test"
fi
digest="$(sha256sum pyproject.toml | cut -d' ' -f1)"
installed_from="$("$venv/bin/python" -c 'import moldau, os; print(os.path.dirname(moldau.__file__))' 2>/dev/null || true)"
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$digest" ]; }
# a current test install also satisfies the plain mode
if { stamp_ok "$stamp" || { [ "$want_test" = 0 ] && stamp_ok "$venv/.moldau-setup-test"; }; } \
        && [ "$installed_from" = "$root/src/moldau" ]; then
    :
else
    echo "setup.sh: pip install -e .${extras}"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".${extras}"
    echo "$digest" > "$stamp"
fi

if [ "$want_test" = 1 ] && ! command -v kcat >/dev/null 2>&1; then
    echo "setup.sh: installing kcat (Debian package)"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq kcat >/dev/null
fi

# --- moldau.spark (spark engineer): Java 17 for PySpark (tests/spark), Debian package when missing ---
if [ "$want_test" = 1 ] && ! { command -v java >/dev/null 2>&1 \
        && java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; }; then
    echo "setup.sh: installing Java 17 (Debian package openjdk-17-jre-headless) for PySpark"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
# --- end moldau.spark ---

# --- moldau cluster: ZooKeeper for tests/cluster and `moldau cluster up` (Debian package; Java 17 is above) ---
if [ "$want_test" = 1 ] && [ ! -f /usr/share/java/zookeeper.jar ]; then
    echo "setup.sh: installing ZooKeeper (Debian package zookeeper) for the cluster tests"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >/dev/null
fi
# --- end moldau cluster ---

# --- fault bench: `ip` (iproute2) for the network namespaces of tests/faults (docs/faults.md); without it, or
# without root, the bench falls back to process faults and says so ---
if [ "$want_test" = 1 ] && ! command -v ip >/dev/null 2>&1; then
    echo "setup.sh: installing iproute2 (the ip command) for the fault bench's network namespaces"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq iproute2 >/dev/null
fi
# --- end fault bench ---

echo "setup.sh: ready ($venv$( [ "$want_test" = 1 ] && echo ', test dependencies, kcat, ZooKeeper'))"
