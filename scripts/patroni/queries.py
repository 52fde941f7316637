#!/usr/bin/python3
# queries.py QUERIES_YAML DIR -- writes each query of the exporter's
# queries file (monitoring/queries.yaml) to DIR/NAMESPACE.sql, for
# scripts/patroni_test.sh to run on every node with psql.
import os
import sys

import yaml

with open(sys.argv[1]) as f:
    queries = yaml.safe_load(f)
for namespace, spec in queries.items():
    with open(os.path.join(sys.argv[2], namespace + '.sql'), 'w') as out:
        out.write(spec['query'].rstrip().rstrip(';') + ';\n')
