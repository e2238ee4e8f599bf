#!/usr/bin/env bash
# Set up moldau in a virtualenv inside the repository (.venv), idempotent and quick when already done.
#
#   ./scripts/setup.sh          moldau (editable) and its runtime dependencies (+ extra "cluster": kazoo)
#   ./scripts/setup.sh --test   also the test dependencies (pip extras "test", "spark"), the Debian packages
#                               the tests drive (kcat, Java 17, ZooKeeper, chromium + chromium-driver,
#                               nodejs + npm, iproute2, Maven and a JDK), the npm packages of tests/kafka07 and
#                               the JVM modules of tests/jvm (Kafka's clients, tools and broker from Maven Central,
#                               cached outside the repository: tests/harness/jvm.py) and the Go programs of tests/go
#                               (franz-go from the Go module proxy, built outside the repository: tests/harness/gobuild.py;
#                               needs a Go toolchain 1.21 or newer on PATH, from https://go.dev/dl/)
#
# Environment: PYTHON=python3.11 picks the interpreter that creates .venv (default: python3).
set -euo pipefail

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

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
extras="[cluster,registry]"  # cluster: kazoo, for brokers started with zookeeper.connect (docs/cluster.md);
                              # registry: fastavro, jsonschema, protobuf for the schema registry
stamp="$venv/.moldau-setup"
if [ "$want_test" = 1 ]; then
    extras="[test,spark,cluster,registry]"  # spark: moldau.spark's extra (pyspark, pyarrow), so tests/spark runs too
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

if [ "$want_test" = 1 ]; then
    # Debian packages the tests drive, each only when missing; one apt-get run for all of them.
    #   kcat                        tests/integration (a third-party client)
    #   openjdk-17-jre-headless     PySpark (tests/spark) and ZooKeeper
    #   zookeeper                   tests/cluster, tests/faults, tests/kafka07 (its 0.7 registration)
    #   chromium, chromium-driver   tests/console (selenium drives Debian's browser; nothing downloads one)
    #   nodejs, npm                 tests/kafka07 (the 0.7-era Node.js client franz-kafka)
    #   iproute2                    tests/faults (`ip`: network namespaces; without it, process faults only)
    #   libfuse2                    tests/powerloss (fusepy's libfuse.so.2: the lazy file system)
    #   maven, openjdk-17-jdk-headless  tests/jvm (resolves Kafka's jars from Maven Central; javac compiles the
    #                               small Java test programs)
    missing=()
    command -v kcat >/dev/null 2>&1 || missing+=(kcat)
    { command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; } \
        || missing+=(openjdk-17-jre-headless)
    [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } || missing+=(nodejs npm)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    { [ -e /usr/lib/x86_64-linux-gnu/libfuse.so.2 ] || ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2'; } \
        || missing+=(libfuse2)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    { command -v javac >/dev/null 2>&1 && javac -version 2>&1 | grep -Eq 'javac (1[7-9]|[2-9][0-9])'; } \
        || missing+=(openjdk-17-jdk-headless)
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "setup.sh: installing Debian packages: ${missing[*]}"
        sudo=""
        if [ "$(id -u)" != 0 ]; then
            sudo="sudo"
        fi
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi

    # tests/kafka07's npm packages, pinned by its package-lock.json (reinstalled when the lock file changes)
    node_dir="$root/tests/kafka07/node"
    node_stamp="$node_dir/node_modules/.moldau-lock-digest"
    node_digest="$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)"
    if [ ! -f "$node_stamp" ] || [ "$(cat "$node_stamp")" != "$node_digest" ]; then
        echo "setup.sh: installing tests/kafka07/node (npm ci)"
        (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
        echo "$node_digest" > "$node_stamp"
    fi

    # tests/jvm: resolve every module's Maven dependencies and compile its Java programs now, so that no
    # test downloads mid-run (cached by digest of the poms and sources; quick when nothing changed)
    echo "setup.sh: warming the JVM modules of tests/jvm"
    "$venv/bin/python" tests/harness/jvm.py warm

    # tests/go: build franz-go's programs now (cached by digest of go.mod, go.sum and sources). Debian's
    # golang-go is too old for franz-go (go 1.26 in its go.mod); Go 1.21+ fetches the toolchain go.mod names.
    if ! command -v go >/dev/null 2>&1 \
        || ! go version | grep -Eq 'go1\.(2[1-9]|[3-9][0-9])'; then
        echo "setup.sh: tests/go needs a Go toolchain 1.21 or newer on PATH (https://go.dev/dl/);" \
             "found: $(go version 2>/dev/null || echo none)" >&2
        exit 1
    fi
    echo "setup.sh: building the Go programs of tests/go"
    "$venv/bin/python" tests/harness/gobuild.py warm
fi

echo "setup.sh: ready ($venv$( [ "$want_test" = 1 ] && echo ', test dependencies and tools'))"
