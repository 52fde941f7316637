#!/usr/bin/python3
# cluster.py REST_PORT... -- the Patroni cluster as the first node that
# answers GET /cluster says: one line per member, "NAME ROLE STATE PORT"
# (ROLE leader, sync_standby or replica).  Nothing, and exit status 1, when
# no node answers.  Used by scripts/patroni_test.sh, and by writer.py
# (members()).
import json
import sys
import urllib.request


def members(rest_ports):
    """The members as the first node that answers lists them, or None."""
    for rest in rest_ports:
        try:
            with urllib.request.urlopen('http://127.0.0.1:%s/cluster' % rest, timeout=1) as r:
                return json.load(r).get('members', [])
        except (OSError, ValueError):
            continue
    return None


if __name__ == '__main__':
    found = members(sys.argv[1:])
    for m in found or []:
        print(m.get('name'), m.get('role'), m.get('state'), m.get('port'))
    sys.exit(0 if found is not None else 1)
