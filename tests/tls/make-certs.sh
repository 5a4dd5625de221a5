#!/bin/sh
# Test certificates for TLS tests, made with the openssl CLI into DIR (shared by the Rust,
# Python and Node test kits):
#   ca.crt/ca.key          the test CA
#   server.crt/server.key  a server certificate for 127.0.0.1 and localhost, signed by ca
#   client.crt/client.key  a client certificate (mutual TLS), signed by ca
#   expired.crt/expired.key a server certificate for 127.0.0.1/localhost that expired in 2020
#   other-ca.crt           another CA, which signed none of these (a wrong CA)
# Usage: make-certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
ca() {
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 3650 -subj "/CN=polylock test $1" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
ca ca
ca other-ca
printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
    'keyUsage=critical,digitalSignature' 'extendedKeyUsage=serverAuth' >server.ext
printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature' \
    'extendedKeyUsage=clientAuth' >client.ext
leaf() { # name subject extensions
    key "$1.key"
    openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
}
leaf server localhost
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile server.ext -out server.crt 2>/dev/null
leaf client polylock-test-client
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile client.ext -out client.crt 2>/dev/null
# `openssl x509 -req` (3.0) cannot backdate; `openssl ca` takes explicit dates.
leaf expired localhost
: >index.txt
echo 1000 >serial
printf '%s\n' '[ca]' 'default_ca = test' '[test]' 'database = index.txt' 'new_certs_dir = .' \
    'serial = serial' 'default_md = sha256' 'policy = any' '[any]' 'commonName = supplied' >ca.cnf
openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt \
    -startdate 20200101000000Z -enddate 20200102000000Z -extfile server.ext -notext 2>/dev/null
# Readable by redis-server and the tests.
chmod 644 ./*.key
