#!/usr/bin/env bash
# Test certificates: a CA and a certificate it signed for localhost and
# 127.0.0.1 (P-256, valid two days), written into DIR as ca.crt, ca.key,
# server.crt and server.key. For tests and figure scripts only.
# Usage: scripts/tls-certs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 -new "${ec[@]}" -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 2 -subj "/CN=epochdb test CA" 2>/dev/null
openssl req -new "${ec[@]}" -keyout "$dir/server.key" -out "$dir/server.csr" -subj /CN=localhost 2>/dev/null
echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$dir/san"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
  -out "$dir/server.crt" -extfile "$dir/san" 2>/dev/null
