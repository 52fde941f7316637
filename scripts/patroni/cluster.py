#!/usr/bin/python3
# cluster.py REST_PORT... -- the Patroni cluster as the first node that
# answers GET /cluster says: one line per member, "NAME ROLE STATE PORT"
# (ROLE leader, sync_standby or replica).  Nothing, and exit status 1, when
# no node answers.  Used by scripts/patroni_test.sh.
import json
import sys
import urllib.request

for rest in sys.argv[1:]:
    try:
        with urllib.request.urlopen('http://127.0.0.1:%s/cluster' % rest, timeout=1) as r:
            cluster = json.load(r)
    except (OSError, ValueError):
        continue
    for m in cluster.get('members', []):
        print(m.get('name'), m.get('role'), m.get('state'), m.get('port'))
    sys.exit(0)
sys.exit(1)
