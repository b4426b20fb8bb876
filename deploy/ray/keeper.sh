#!/usr/bin/env bash
# The run's keeper on the head node of a deploy/ray cluster: it keeps the run's Redis and
# the run's driver running for days, restarting each when it dies, at a bounded rate, and
# says what it did in one log.
#
#   keeper.sh train ARGS...   keep `tengen train ARGS --resume-if-exists` running (ARGS
#                             name --run-dir); the keeper starts it within seconds
#   keeper.sh stop            stop the driver cleanly (SIGTERM: the final checkpoint, the
#                             best model; SIGKILL after TENGEN_STOP_S) and stop keeping it
#   keeper.sh status          what runs and the log's last lines
#   keeper.sh start           (head_start_ray_commands) the keeper, in the background,
#                             instead of one that runs; it starts a kept driver again
#   keeper.sh halt            (head_start_ray_commands, before `ray stop`) the keeper
#                             stopped and the driver stopped cleanly, still kept: `start`
#                             brings it back with --resume-if-exists
#
# What it restarts, every TENGEN_KEEPER_POLL_S (5 s):
#   - the run's Redis (its pidfile names no live process): `redis-server redis.conf`
#     again, the configuration the head's Redis command wrote, on the same AOF;
#   - the driver, when it exits with anything but 0 (an error, a crash loop it stopped
#     on, Redis away past redis.outage_s, a kill): `tengen train ARGS --resume-if-exists`
#     again, which continues the run from its directory and Redis. Exit 0 is a run that
#     finished (its stop section) or that someone stopped cleanly: not restarted.
# Each part is restarted at most TENGEN_KEEPER_RESTARTS times (5) in TENGEN_KEEPER_WINDOW_S
# (3600 s), the first at once and each next one after a pause that doubles from
# TENGEN_KEEPER_PAUSE_S (10 s); one more failure in the window and the keeper gives that
# part up and says so (a driver given up on: `keeper.sh train` again keeps it anew).
#
# Its files, in TENGEN_REDIS_DIR (~/tengen-redis, on the host's disk, where the Redis
# keeps its AOF): keeper.log (what it did, UTC), keeper.pid, keeper.polls (how many
# polls it has made, and when the last one was), train.args (the kept run's
# arguments), driver.log (the driver's output; the run directory has its own log),
# driver.pid. Nothing here holds a secret: the driver finds the Redis password and Ray's
# token in the environment the head's shells get (head_setup_commands).
set -u

dir="${TENGEN_REDIS_DIR:-$HOME/tengen-redis}"
poll_s="${TENGEN_KEEPER_POLL_S:-5}"
max_restarts="${TENGEN_KEEPER_RESTARTS:-5}"
window_s="${TENGEN_KEEPER_WINDOW_S:-3600}"
pause_s="${TENGEN_KEEPER_PAUSE_S:-10}"
stop_s="${TENGEN_STOP_S:-300}"
for setting in "TENGEN_KEEPER_RESTARTS=$max_restarts" "TENGEN_KEEPER_WINDOW_S=$window_s" \
    "TENGEN_KEEPER_PAUSE_S=$pause_s" "TENGEN_STOP_S=$stop_s"; do
    case "${setting#*=}" in
        ''|*[!0-9]*) echo "keeper.sh: ${setting%%=*} must be a whole number, not '${setting#*=}'" >&2; exit 2;;
    esac
done

log() { printf '%s keeper: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >> "$dir/keeper.log"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_in() { [ -s "$1" ] && cat "$1"; }

# Waits up to $2 seconds for process $1 to end; true if it did.
wait_gone() {
    local pid="$1" deadline=$(( $(date +%s) + $2 ))
    while alive "$pid"; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.2
    done
}

# SIGTERM to the driver, SIGKILL after TENGEN_STOP_S: what `ray job stop` does with
# RAY_JOB_STOP_WAIT_TIME_S, the same 300 s (README.md, "Runs of days").
stop_driver() {
    local pid
    pid="$(pid_in "$dir/driver.pid")"
    alive "$pid" || return 0
    log "stopping the driver (pid $pid) cleanly: SIGTERM, SIGKILL after ${stop_s} s"
    kill -TERM "$pid" 2>/dev/null
    if ! wait_gone "$pid" "$stop_s"; then
        log "the driver (pid $pid) did not stop within ${stop_s} s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null
        wait_gone "$pid" 10
    fi
}

stop_loop() {
    local pid
    pid="$(pid_in "$dir/keeper.pid")"
    if alive "$pid" && [ "$pid" != "$$" ]; then
        kill -TERM "$pid" 2>/dev/null
        wait_gone "$pid" 30 || kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$dir/keeper.pid"
}

# -- the restart budget: per part, the times of its restarts in the window --------------
declare -A restarts=() not_before=() given_up=()

# Whether $1 may be restarted now: 0 yes (counted), 1 not yet (its pause), 2 given up.
may_restart() {
    local part="$1" now kept=() t
    [ -n "${given_up[$part]:-}" ] && return 2
    now="$(date +%s)"
    [ "$now" -lt "${not_before[$part]:-0}" ] && return 1
    for t in ${restarts[$part]:-}; do
        [ $(( now - t )) -lt "$window_s" ] && kept+=("$t")
    done
    if [ "${#kept[@]}" -ge "$max_restarts" ]; then
        given_up[$part]=1
        log "giving $part up: it failed again after $max_restarts restarts in ${window_s} s"
        return 2
    fi
    restarts[$part]="${kept[*]:-} $now"
    # the next restart in the window waits twice as long as the pause before this one
    not_before[$part]=$(( now + pause_s * (1 << ${#kept[@]}) ))
    return 0
}

# -- the run's Redis ------------------------------------------------------------------
redis_bin=""
redis_down=""
keep_redis() {
    local pid
    [ -s "$dir/redis.conf" ] || return 0
    pid="$(pid_in "$dir/redis.pid")"
    alive "$pid" && return 0
    if [ -z "$redis_down" ]; then
        redis_down=1
        log "redis (pid ${pid:-none}) is not running"
    fi
    may_restart redis || return 0
    if [ -z "$redis_bin" ]; then
        redis_bin="$(python -c 'from tengen.cluster.redis_server import redis_executable; print(redis_executable())')"
    fi
    rm -f "$dir/redis.pid"
    # daemonize yes: it forks, writes its pidfile and answers once its AOF is loaded
    if "$redis_bin" "$dir/redis.conf" && sleep 0.5 && alive "$(pid_in "$dir/redis.pid")"; then
        log "redis restarted on its AOF (pid $(pid_in "$dir/redis.pid"))"
        redis_down=""
    else
        log "redis did not start: see $dir/redis.log"
    fi
}

# -- the driver -----------------------------------------------------------------------
runner=""   # the subshell that waits on a driver this keeper started, while it runs
pending=""  # a failed driver waits for its restart
start_driver() {
    local args=()
    mapfile -d '' args < "$dir/train.args"
    rm -f "$dir/driver.exit"
    (
        tengen train "${args[@]}" --resume-if-exists >> "$dir/driver.log" 2>&1 < /dev/null &
        echo "$!" > "$dir/driver.pid"
        wait "$!"
        echo "$?" > "$dir/driver.exit"
    ) &
    runner="$!"
    log "driver started: tengen train ${args[*]} --resume-if-exists (output: $dir/driver.log)"
}

keep_driver() {
    local code
    alive "$runner" && return 0
    if [ -n "$runner" ]; then  # it ended
        runner=""
        code="$(cat "$dir/driver.exit" 2>/dev/null || echo unknown)"
        if [ ! -s "$dir/train.args" ]; then
            log "the driver stopped (exit $code); no run is kept"
            return 0
        elif [ "$code" = 0 ]; then
            log "the driver finished (exit 0): the run is done, not restarted"
            mv -f "$dir/train.args" "$dir/train.args.done"
            return 0
        fi
        log "the driver exited with $code; see $dir/driver.log"
        pending=1
    fi
    if [ -n "$pending" ]; then
        [ -s "$dir/train.args" ] || { pending=""; return 0; }  # stopped meanwhile
        may_restart driver
        case "$?" in
            0) pending=""; start_driver ;;
            2) pending=""; mv -f "$dir/train.args" "$dir/train.args.failed" ;;
        esac
        return 0
    fi
    [ -s "$dir/train.args" ] || return 0
    # The first start of a kept run, or its start again after `halt`: not a restart.
    # A driver that an earlier keeper left running is not started twice.
    alive "$(pid_in "$dir/driver.pid")" && return 0
    start_driver
}

loop() {
    echo "$$" > "$dir/keeper.pid"
    log "keeper started (pid $$): at most $max_restarts restarts in ${window_s} s per part"
    trap 'log "keeper stopped (pid $$)"; exit 0' TERM INT
    local polls=0
    while :; do
        keep_redis
        keep_driver
        # How far it got and when: `status` shows a keeper that is alive but stuck.
        polls=$((polls + 1))
        echo "$polls $(date +%s)" > "$dir/keeper.polls"
        sleep "$poll_s" &
        wait "$!"
    done
}

mkdir -p "$dir"
case "${1:-}" in
    start)
        stop_loop
        setsid nohup bash "$0" loop > /dev/null 2>&1 < /dev/null &
        for _ in $(seq 50); do [ -s "$dir/keeper.pid" ] && break; sleep 0.1; done
        [ -s "$dir/keeper.pid" ] || { echo "keeper.sh: the keeper did not start; see $dir/keeper.log" >&2; exit 1; }
        ;;
    loop)
        loop
        ;;
    train)
        shift
        case " $* " in *" --run-dir "*|*" --run-dir="*) ;; *)
            echo "keeper.sh train: give the run's --run-dir (it is continued there when the driver restarts)" >&2; exit 2;;
        esac
        case " $* " in *" --resume "*|*" --resume-if-exists "*)
            echo "keeper.sh train: leave --resume out: the keeper adds --resume-if-exists" >&2; exit 2;;
        esac
        if [ -s "$dir/train.args" ]; then
            echo "keeper.sh train: a run is kept already ($dir/train.args); keeper.sh stop first" >&2; exit 1
        fi
        printf '%s\0' "$@" > "$dir/train.args.new" && mv -f "$dir/train.args.new" "$dir/train.args"
        rm -f "$dir/train.args.failed"
        log "keeping: tengen train $* --resume-if-exists"
        alive "$(pid_in "$dir/keeper.pid")" || echo "keeper.sh: no keeper runs on this node: keeper.sh start" >&2
        ;;
    stop)
        if [ -s "$dir/train.args" ]; then
            mv -f "$dir/train.args" "$dir/train.args.done"
            log "no longer keeping the run (keeper.sh stop)"
        fi
        stop_driver
        ;;
    halt)
        stop_loop
        stop_driver
        ;;
    status)
        for part in keeper redis driver; do
            pid="$(pid_in "$dir/$part.pid")"
            if alive "$pid"; then echo "$part: running (pid $pid)"; else echo "$part: not running"; fi
        done
        if [ -s "$dir/keeper.polls" ]; then
            read -r polls at < "$dir/keeper.polls"
            echo "keeper's last poll: number $polls, $(( $(date +%s) - at )) s ago (it polls every ${poll_s} s)"
        fi
        if [ -s "$dir/train.args" ]; then
            printf 'kept: tengen train'; tr '\0' ' ' < "$dir/train.args"; echo '--resume-if-exists'
        else
            echo "kept: nothing"
        fi
        tail -n 5 "$dir/keeper.log" 2>/dev/null
        ;;
    *)
        sed -n '2,15p' "$0" >&2
        exit 2
        ;;
esac
