#!/usr/bin/env bash
# make_certs.sh -- the project's one recipe for test certificates, with the
# openssl program.  Every certificate is throw-away, RSA 2048, valid 2 days;
# every key has mode 0600 (the server and libpq require it).
#
#   scripts/make_certs.sh DIR CA_NAME
#       a CA (CN=CA_NAME) and a server certificate signed by it, CN=localhost
#       with subjectAltName DNS:localhost and IP:127.0.0.1: DIR/ca.crt,
#       DIR/ca.key, DIR/server.crt, DIR/server.key.
#   scripts/make_certs.sh --leaf DIR NAME CN [SAN]
#       DIR/NAME.crt and DIR/NAME.key, signed by DIR's CA: a server
#       certificate for subjectAltName SAN (e.g. DNS:alpha.test) if given,
#       else a client certificate of CN (libpq's sslcert, for user CN).
#
# Used by scripts/demo.sh, scripts/valgrind_cluster.sh, bench/run.sh,
# bench/replication.sh and the TAP tests (SslrTest::make_certs,
# make_client_cert, and test/t/005_sni.pl's host certificates).
set -euo pipefail

usage() { echo "usage: $0 DIR CA_NAME | --leaf DIR NAME CN [SAN]" >&2; exit 2; }

# sign DIR NAME CN [EXTFILE]: DIR/NAME.key and DIR/NAME.crt, signed by DIR's CA
sign() {
    local dir=$1 name=$2 cn=$3 ext=${4:-}
    openssl req -new -nodes -newkey rsa:2048 \
        -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$cn"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -set_serial "0x$(openssl rand -hex 8)" -days 2 \
        ${ext:+-extfile "$ext"} -out "$dir/$name.crt"
    chmod 600 "$dir/$name.key"
}

# leaf DIR NAME CN [SAN]: see --leaf above
leaf() {
    local dir=$1 name=$2 cn=$3 san=${4:-} ext=
    [ -f "$dir/ca.crt" ] && [ -f "$dir/ca.key" ] || { echo "make_certs.sh: no CA in $dir" >&2; exit 1; }
    if [ -n "$san" ]; then
        ext=$dir/$name.ext
        printf '%s\n' "basicConstraints = CA:FALSE" \
            "keyUsage = critical, digitalSignature, keyEncipherment" \
            "extendedKeyUsage = serverAuth" \
            "subjectAltName = $san" >"$ext"
    fi
    sign "$dir" "$name" "$cn" "$ext"
}

if [ "${1:-}" = --leaf ]; then
    [ $# -ge 4 ] && [ $# -le 5 ] || usage
    leaf "$2" "$3" "$4" "${5:-}"
    exit 0
fi

[ $# -eq 2 ] || usage
C=$1
CA_NAME=$2
# shellcheck disable=SC2174 # only the certificates' own directory is private
mkdir -p -m 700 "$C"
openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 \
    -keyout "$C/ca.key" -out "$C/ca.crt" -subj "/CN=$CA_NAME" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
chmod 600 "$C/ca.key"
leaf "$C" server localhost "DNS:localhost, IP:127.0.0.1"
