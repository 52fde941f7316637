#!/usr/bin/python3
# writer.py DIR -- the client of scripts/patroni_test.sh: writes numbered
# rows to the Patroni cluster's leader over TLS (sslmode=verify-ca), one
# committed transaction per row, and records each one the server
# acknowledged.  It finds the leader through the REST API (GET /cluster on
# any node that answers) and, after an error, reconnects to whichever node
# is leader then, and goes on with the next number.
#
# DIR holds: rest_ports (the REST ports, one line), ca.crt, app_password;
# the writer writes there
#   sent      the last number it sent (rewritten before each commit)
#   acked     "ID PORT" for each row whose COMMIT returned without error or
#             warning (a COMMIT whose wait for the synchronous standby was
#             cancelled returns with a WARNING: not acknowledged), flushed
#             at once
#   events    connections and errors, one line each
# and stops, closing its connection, when DIR/stop appears.
import os
import sys
import time

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import members  # noqa: E402

directory = sys.argv[1]
rest_ports = open(os.path.join(directory, 'rest_ports')).read().split()
password = open(os.path.join(directory, 'app_password')).read().strip()
ca = os.path.join(directory, 'ca.crt')
stop_file = os.path.join(directory, 'stop')
# WAL per row, so that walsender keys rotate as rows are written
payload = 'x' * 400

acked = open(os.path.join(directory, 'acked'), 'a', buffering=1)
events = open(os.path.join(directory, 'events'), 'a', buffering=1)


def event(what):
    events.write('%.3f %s\n' % (time.time(), what))


def leader_port():
    """The PostgreSQL port of the running leader, as a node's REST API says."""
    for m in members(rest_ports) or []:
        if m.get('role') == 'leader' and m.get('state') == 'running':
            return m['port']
    return None


def connect():
    while not os.path.exists(stop_file):
        port = leader_port()
        if port is not None:
            try:
                conn = psycopg2.connect(
                    host='127.0.0.1', port=port, dbname='postgres', user='app',
                    password=password, sslmode='verify-ca', sslrootcert=ca,
                    connect_timeout=2, target_session_attrs='read-write',
                    application_name='sslr_writer')
                conn.autocommit = True
                event('connected %s' % port)
                return conn, port
            except psycopg2.Error as e:
                event('connect %s failed: %s' % (port, str(e).strip().replace('\n', ' ')))
        time.sleep(0.2)
    return None, None


conn, port = connect()
n = 0
while conn is not None and not os.path.exists(stop_file):
    n += 1
    with open(os.path.join(directory, 'sent.tmp'), 'w') as f:
        f.write('%d\n' % n)
    os.replace(os.path.join(directory, 'sent.tmp'), os.path.join(directory, 'sent'))
    try:
        del conn.notices[:]
        with conn.cursor() as cur:
            cur.execute('INSERT INTO load (id, payload) VALUES (%s, %s)', (n, payload))
        if any('synchronous' in notice for notice in conn.notices):
            event('row %d: %s' % (n, ' '.join(conn.notices).strip()))
        else:
            acked.write('%d %s\n' % (n, port))
    except psycopg2.Error as e:
        event('row %d on %s: %s' % (n, port, str(e).strip().replace('\n', ' ')))
        try:
            conn.close()
        except psycopg2.Error:
            pass
        conn, port = connect()
if conn is not None:
    conn.close()
event('stopped after row %d' % n)
