#!/usr/bin/env bash
# The TLS material of Flink's REST endpoint with client certificates (mutual TLS), made once:
#
#   FLINK_TLS_PASSWORD=... deploy/flink-tls.sh DIR SAN
#
#   DIR/ca.pem                  the CA that signs both sides (its key is deleted once they are signed)
#   DIR/rest.keystore.p12       the REST server's key and certificate (subjectAltName SAN), for Flink
#   DIR/rest.truststore.p12     the CA, for Flink to check client certificates
#   DIR/client.pem, client.key  the client certificate of the autoscaler (the Airflow connection's
#                               client_cert and client_key; extras.verify is DIR/ca.pem)
#
# SAN is an openssl subjectAltName value, e.g. "IP:127.0.0.1,DNS:localhost". The keystores' password
# comes from the environment, never from an argument (arguments show in `ps`). Needs openssl and a
# Java keytool (KEYTOOL, else keytool on PATH). Files are owner-only. Used by scripts/flink.sh --ssl
# (tests/integration/test_flink_ssl.py runs a real Flink with it) and by the compose deployment's
# ds2-volumes-init (deploy/init-volumes.sh). Does nothing when DIR already holds the material.
set -euo pipefail

die() { echo "flink-tls.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: FLINK_TLS_PASSWORD=... deploy/flink-tls.sh DIR SAN"
dir=$1 san=$2
pw=${FLINK_TLS_PASSWORD:-}
[ ${#pw} -ge 16 ] || die "FLINK_TLS_PASSWORD must be set, at least 16 characters"
[[ "$pw" =~ ^[A-Za-z0-9_-]+$ ]] || die "FLINK_TLS_PASSWORD: letters, digits, - and _ only (it goes into Flink's config)"
[[ "$san" =~ ^((IP|DNS):[A-Za-z0-9.-]+)(,(IP|DNS):[A-Za-z0-9.-]+)*$ ]] || die "SAN '$san': expected e.g. IP:127.0.0.1,DNS:localhost"
keytool=${KEYTOOL:-$(command -v keytool || true)}
[ -n "$keytool" ] && [ -x "$keytool" ] || die "no keytool (set KEYTOOL or put a JDK/JRE's bin on PATH)"
command -v openssl >/dev/null || die "openssl is missing"

if [ -s "$dir/rest.keystore.p12" ] && [ -s "$dir/rest.truststore.p12" ] && [ -s "$dir/client.pem" ] \
  && [ -s "$dir/client.key" ] && [ -s "$dir/ca.pem" ]; then
  exit 0
fi

umask 077
mkdir -p "$dir"
work=$(mktemp -d "$dir/.making-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export FLINK_TLS_PASSWORD="$pw"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=ds2 Flink REST CA" 2>/dev/null
printf 'subjectAltName=%s\n' "$san" >san.ext
openssl req -newkey rsa:2048 -nodes -keyout rest.key -out rest.csr -subj "/CN=ds2 Flink REST" 2>/dev/null
openssl x509 -req -in rest.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out rest.pem -days 825 -extfile san.ext 2>/dev/null
openssl pkcs12 -export -in rest.pem -inkey rest.key -certfile ca.pem -name rest -out rest.keystore.p12 \
  -passout env:FLINK_TLS_PASSWORD
"$keytool" -importcert -noprompt -alias ds2-ca -file ca.pem -keystore rest.truststore.p12 -storetype PKCS12 \
  -storepass:env FLINK_TLS_PASSWORD >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/CN=ds2-autoscaler" 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 825 2>/dev/null
mv ca.pem rest.keystore.p12 rest.truststore.p12 client.pem client.key "$dir/"
echo "flink-tls.sh: made the REST TLS material in $dir (server subjectAltName $san)"
