#!/usr/bin/env bash
# make_certs.sh DIR CA_NAME -- a throw-away CA and a server certificate
# signed by it (CN=localhost, SAN localhost and 127.0.0.1), valid 2 days:
# DIR/ca.crt, DIR/server.crt, DIR/server.key (mode 0600).  Used by
# scripts/demo.sh and bench/run.sh.
set -euo pipefail

C=$1
CA_NAME=$2
# shellcheck disable=SC2174 # only the certificates' own directory is private
mkdir -p -m 700 "$C"
openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 \
    -keyout "$C/ca.key" -out "$C/ca.crt" -subj "/CN=$CA_NAME" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
openssl req -new -nodes -newkey rsa:2048 \
    -keyout "$C/server.key" -out "$C/server.csr" -subj "/CN=localhost"
printf '%s\n' "basicConstraints = CA:FALSE" \
    "keyUsage = critical, digitalSignature, keyEncipherment" \
    "extendedKeyUsage = serverAuth" \
    "subjectAltName = DNS:localhost, IP:127.0.0.1" >"$C/server.ext"
openssl x509 -req -in "$C/server.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 2 \
    -extfile "$C/server.ext" -out "$C/server.crt"
chmod 600 "$C"/*.key
