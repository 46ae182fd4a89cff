#!/usr/bin/env bash
# The real services the web service's tests run against (tests/test_service_infra.py, tests of convbench.service):
#   start  a throwaway PostgreSQL cluster (never the system one: its own folder, a free port on 127.0.0.1 only, a
#          database convbench_test owned by a role convbench with a random password) and a check that headless
#          Chromium and chromedriver run; one `services:` line per thing. Exits 1 when something could not be had
#          (.ci/run fails on that in CI; elsewhere those tests skip).
#   env    the exports for the tests (CONVBENCH_TEST_POSTGRES, CONVBENCH_TEST_CHROMIUM, CONVBENCH_TEST_CHROMEDRIVER):
#          eval "$(bash scripts/services.sh env)"
#   stop   stops the cluster and removes its folder; safe to run twice, and after a start that failed.
# The state lives in /tmp/convbench-ci-services/<one folder per checkout>, so that clones on one machine do not meet.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=/tmp/convbench-ci-services
STATE=$BASE/$(basename "$PWD")-$(printf %s "$PWD" | cksum | cut -d' ' -f1)
PGDATA_DIR=$STATE/pg   # data, its Unix socket and its log; owned by the user the server runs as
ENV_FILE=$STATE/services.env

# PostgreSQL refuses to run as root: as root the cluster belongs to the postgres user (and one that another user
# started is stopped as that user). From /, which any user can enter (initdb and psql complain about a working
# directory they cannot read).
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        (cd / && runuser -u "$(stat -c %U "$PGDATA_DIR")" -- "$@")
    else
        (cd / && "$@")
    fi
}

# The newest server of the Debian packages (postgresql-NN), else one on PATH.
pg_bin() {
    local dir
    dir=$(compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1)
    if [ -n "$dir" ]; then
        dirname "$dir"
    elif command -v initdb >/dev/null; then
        dirname "$(command -v initdb)"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_postgres() {
    local bin port password log
    bin=$(pg_bin)
    if [ -z "$bin" ]; then
        echo "services: PostgreSQL is not installed (apt-get install postgresql); the PostgreSQL tests will skip"
        return 1
    fi
    if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
        echo "services: no postgres user to run PostgreSQL as (root may not); the PostgreSQL tests will skip"
        return 1
    fi
    mkdir -m 700 "$PGDATA_DIR"
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$PGDATA_DIR"
    fi
    log=$PGDATA_DIR/server.log
    # trust on the socket (only its owner can reach it: the folder is 0700) for the set-up below; a password over TCP,
    # as the tests connect. --no-sync and fsync off: a throwaway cluster need not survive a crash.
    if ! as_owner "$bin/initdb" -D "$PGDATA_DIR" -U postgres -E UTF8 --locale=C --no-sync \
        --auth-local=trust --auth-host=scram-sha-256 >"$STATE/initdb.log" 2>&1; then
        echo "services: initdb failed; the PostgreSQL tests will skip:" && tail -n 5 "$STATE/initdb.log" | sed 's/^/services:   /'
        return 1
    fi
    cat >>"$PGDATA_DIR/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PGDATA_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
    # The port is free when asked, but another process may take it before the server binds it: then another port.
    for _ in 1 2 3; do
        port=$(free_port)
        if as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -l "$log" -o "-p $port" -w -t 30 start >/dev/null 2>&1; then
            break
        fi
        port=
    done
    if [ -z "$port" ]; then
        echo "services: PostgreSQL did not start; the PostgreSQL tests will skip:" && tail -n 5 "$log" | sed 's/^/services:   /'
        return 1
    fi
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    # (set -e does not hold in a function called with ||: each step says when it fails)
    if ! as_owner "$bin/psql" -h "$PGDATA_DIR" -p "$port" -U postgres -d postgres -X -q -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE convbench LOGIN PASSWORD '$password'" \
        -c "CREATE DATABASE convbench_test OWNER convbench" >/dev/null; then
        echo "services: could not create the role and database in PostgreSQL; the PostgreSQL tests will skip"
        return 1
    fi
    # The URL as the tests will use it: TCP and the password
    if ! PGPASSWORD=$password "$bin/psql" -h 127.0.0.1 -p "$port" -U convbench -d convbench_test -X -q -t \
        -c 'SELECT 1' >/dev/null; then
        echo "services: PostgreSQL refused convbench over 127.0.0.1:$port; the PostgreSQL tests will skip"
        return 1
    fi
    echo "export CONVBENCH_TEST_POSTGRES=postgresql+psycopg://convbench:$password@127.0.0.1:$port/convbench_test" >>"$ENV_FILE"
    echo "services: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, database convbench_test" \
        "(a throwaway cluster in $PGDATA_DIR)"
}

check_chromium() {
    local chromium=/usr/bin/chromium driver=/usr/bin/chromedriver version driver_version
    # --version of each: they are there and run (timeout: a browser that hangs is no browser)
    if version=$(timeout 30 "$chromium" --headless --version 2>/dev/null) \
        && driver_version=$(timeout 30 "$driver" --version 2>/dev/null); then
        echo "export CONVBENCH_TEST_CHROMIUM=$chromium" >>"$ENV_FILE"
        echo "export CONVBENCH_TEST_CHROMEDRIVER=$driver" >>"$ENV_FILE"
        echo "services: $(awk '{print $1, $2}' <<<"$version") with ChromeDriver $(awk '{print $2}' <<<"$driver_version") (headless)"
    else
        echo "services: no working $chromium and $driver (apt-get install chromium chromium-driver); the browser tests will skip"
        return 1
    fi
}

stop() {
    local bin
    if [ -f "$PGDATA_DIR/postmaster.pid" ]; then
        bin=$(pg_bin)
        # fast: roll back what is open and go; immediate when even that fails, before the folder goes
        as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 30 stop >/dev/null 2>&1 \
            || as_owner "$bin/pg_ctl" -D "$PGDATA_DIR" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
        echo "services: stopped PostgreSQL"
    fi
    rm -rf "$STATE"
}

case "${1:-}" in
start)
    stop >/dev/null   # what a run that never stopped left behind
    # The postgres user must get through to its folder, whatever the umask; as /tmp: any user a folder of its own
    mkdir -p "$BASE"
    [ ! -O "$BASE" ] || chmod 1777 "$BASE"
    mkdir -p -m 755 "$STATE"
    (umask 077 && : >"$ENV_FILE")   # it holds the password
    ok=0
    start_postgres || ok=1
    check_chromium || ok=1
    exit "$ok"
    ;;
env)
    [ ! -f "$ENV_FILE" ] || cat "$ENV_FILE"
    ;;
stop)
    stop
    ;;
*)
    echo "usage: bash scripts/services.sh start|env|stop" >&2
    exit 2
    ;;
esac
