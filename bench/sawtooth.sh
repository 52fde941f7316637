#!/usr/bin/env bash
# sawtooth.sh -- what rotation looks like during one COPY: the bytes carried
# under the current key, in each direction, against time, sampled from
# ssl_renegotiate_activity while psql copies over TLS 1.3.
#
# One throw-away server (shared_preload_libraries = 'ssl_renegotiate',
# byte_limit = SSLR_SAWTOOTH_LIMIT, default 4MB), a table of SSLR_SAWTOOTH_MB
# megabytes of COPY text (default 100), then one \copy TO and one \copy FROM
# over TLS 1.3.  While each runs, a second session over the Unix socket (not
# TLS, so not counted) reads the copying backend's row every millisecond.
# Output: bench/results/sawtooth.csv (every sample) and sawtooth.png.
#
# Run as root (like the other scripts); about 30 s.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/valgrind_cluster.sh"

if [ -z "${SSLR_SAWTOOTH_INNER:-}" ]; then
    sslr_require_root sawtooth.sh
    OUT_DIR=/tmp/ssl_renegotiate-sawtooth-results
    sslr_results_dir "$OUT_DIR"
    (SSLR_WORKDIR=/tmp/ssl_renegotiate-sawtooth sslr_rerun_as_postgres bench/sawtooth.sh SSLR_SAWTOOTH_INNER \
        SSLR_SAWTOOTH_OUT="$OUT_DIR" SSLR_SAWTOOTH_MB="${SSLR_SAWTOOTH_MB:-100}" \
        SSLR_SAWTOOTH_LIMIT="${SSLR_SAWTOOTH_LIMIT:-4MB}")
    sslr_collect_results "$OUT_DIR"
    exit 0
fi

export PATH="$PG_BINDIR:$PATH"
MB=$SSLR_SAWTOOTH_MB
LIMIT=$SSLR_SAWTOOTH_LIMIT
OUT=$SSLR_SAWTOOTH_OUT
T=$(mktemp -d /tmp/sslr-sawtooth.XXXXXX)
PORT=
for p in $(seq 56600 56699); do
    [ -z "$(ss -Hltn "( sport = :$p )" 2>/dev/null)" ] && { PORT=$p; break; }
done
[ -n "$PORT" ] || { echo "sawtooth.sh: no free port in 56600-56699" >&2; exit 1; }
cleanup() {
    pg_ctl -D "$T/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

echo "=== a server with $MB MB of COPY text, byte_limit = $LIMIT ===" >&2
sslr_make_test_cluster
cat >>"$T/data/postgresql.conf" <<EOC
shared_preload_libraries = 'ssl_renegotiate'
ssl_renegotiate.byte_limit = '$LIMIT'
EOC
pg_ctl -D "$T/data" -l "$T/server.log" -w start >/dev/null
UNIX="host=$T port=$PORT dbname=postgres"
psql -X -q -d "$UNIX" <<'EOC'
CREATE EXTENSION ssl_renegotiate;
-- Samples the row of the one backend whose application_name is $1, every
-- $2 ms, from its appearance until it is gone (or 30 s without it).
CREATE FUNCTION sample_key_use(app text, step_ms int)
RETURNS TABLE (seconds float8, sent_since_rekey bigint, received_since_rekey bigint,
               rekeys_sent bigint, rekeys_received bigint)
LANGUAGE plpgsql AS $$
DECLARE
    target int;
    started timestamptz;
    waited int := 0;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();  -- else the first read is kept all along
        SELECT pid INTO target FROM pg_stat_activity WHERE application_name = app;
        EXIT WHEN target IS NOT NULL;
        waited := waited + 1;
        IF waited > 30000 THEN RAISE EXCEPTION 'no session named %', app; END IF;
        PERFORM pg_sleep(0.001);
    END LOOP;
    started := clock_timestamp();
    LOOP
        RETURN QUERY
            SELECT extract(epoch FROM clock_timestamp() - started)::float8,
                   a.sent_since_rekey, a.received_since_rekey, a.rekeys_sent, a.rekeys_received
            FROM ssl_renegotiate_activity a WHERE a.pid = target;
        EXIT WHEN NOT FOUND;
        PERFORM pg_sleep(step_ms / 1000.0);
    END LOOP;
END
$$;
EOC

TLS="host=127.0.0.1 port=$PORT dbname=postgres sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable"
echo "direction,seconds,sent_since_rekey,received_since_rekey,rekeys_sent,rekeys_received" >"$OUT/sawtooth.csv"
for dir in to from; do
    app=sawtooth_$dir
    psql -X -q -At -F, -d "$UNIX" -c "SELECT '$dir', * FROM sample_key_use('$app', 1)" >"$T/samples.$dir" &
    sampler=$!
    if [ $dir = to ]; then cmd="\\copy t to '/dev/null'"; else cmd="\\copy t2 from '$T/t.copy'"; fi
    psql -X -q -d "$TLS application_name=$app" -c "$cmd"
    wait "$sampler"
    cat "$T/samples.$dir" >>"$OUT/sawtooth.csv"
    echo "COPY $dir: $(wc -l <"$T/samples.$dir") samples, $(tail -n 1 "$T/samples.$dir" |
        awk -F, '{ print $5 " rotations sent, " $6 " received" }')" >&2
done

command -v gnuplot >/dev/null 2>&1 || { echo "gnuplot not installed; no picture" >&2; exit 0; }
limit_bytes=$(psql -X -At -d "$UNIX" -c "SELECT pg_size_bytes('$LIMIT')")
copy_mib=$(( $(stat -c %s "$T/t.copy") / 1048576 ))
gnuplot <<EOG
set terminal pngcairo size 900,460 font ",10"
set output '$OUT/sawtooth.png'
set datafile separator ','
set multiplot layout 1,2 title "bytes under the current TLS key during one COPY of $copy_mib MiB (TLS 1.3, byte\\\\_limit = $LIMIT), sampled from ssl\\\\_renegotiate\\\\_activity"
set xlabel 'seconds'
set ylabel 'MiB under the current key'
set grid ytics
set key below horizontal
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set arrow 1 from graph 0, first $limit_bytes / 1048576.0 to graph 1, first $limit_bytes / 1048576.0 nohead dt 2 lc rgb '#777777'
set title 'COPY TO: the server rotates its own key'
plot '$OUT/sawtooth.csv' using (strcol(1) eq 'to' ? \$2 : NaN):(\$3 / 1048576.0) with lines lw 1.5 lc rgb '#1f77b4' title 'sent', \
     '' using (strcol(1) eq 'to' ? \$2 : NaN):(\$4 / 1048576.0) with lines lw 1.5 lc rgb '#d62728' title 'received'
set title "COPY FROM: the client rotates when libpq next reads"
plot '$OUT/sawtooth.csv' using (strcol(1) eq 'from' ? \$2 : NaN):(\$3 / 1048576.0) with lines lw 1.5 lc rgb '#1f77b4' title 'sent', \
     '' using (strcol(1) eq 'from' ? \$2 : NaN):(\$4 / 1048576.0) with lines lw 1.5 lc rgb '#d62728' title 'received'
unset multiplot
EOG
echo "picture: $OUT/sawtooth.png" >&2
