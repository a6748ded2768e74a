"""A Web Push service stand-in for the tests: it makes a browser's key pair and auth
secret itself, decrypts every push with http_ece (an independent implementation of
RFC 8291 / RFC 8188 aes128gcm) and verifies its VAPID token (RFC 8292) with
cryptography, then logs what it found as one JSON line.

usage: push_receiver.py LOG
  prints one JSON line on stdout: {"port", "p256dh", "auth"} (base64url, unpadded)
  POST /gone/... answers 410 Gone; any other POST answers 201 Created.
"""

import base64
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

log_path = sys.argv[1]
browser_key = ec.generate_private_key(ec.SECP256R1())
auth_secret = os.urandom(16)


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_vapid(header, audience):
    """The token's claims if it verifies against the key it names, else why not."""
    if not header.startswith("vapid "):
        return None, None, "no vapid scheme"
    parts = dict(p.strip().split("=", 1) for p in header[len("vapid "):].split(","))
    token, key = parts.get("t", ""), parts.get("k", "")
    signed, _, sig = token.rpartition(".")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(key))
    raw = unb64(sig)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        public.verify(der, signed.encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return None, key, "bad signature"
    head = json.loads(unb64(signed.split(".")[0]))
    claims = json.loads(unb64(signed.split(".")[1]))
    if head.get("alg") != "ES256" or claims.get("aud") != audience or claims.get("exp", 0) < time.time():
        return claims, key, "bad claims"
    return claims, key, None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        audience = "http://%s:%d" % self.server.server_address[:2]
        claims, key, vapid_error = check_vapid(self.headers.get("authorization", ""), audience)
        entry = {"path": self.path, "encoding": self.headers.get("content-encoding"), "ttl": self.headers.get("ttl"),
                 "vapid_key": key, "vapid_error": vapid_error, "sub": (claims or {}).get("sub")}
        try:
            plain = http_ece.decrypt(body, private_key=browser_key, auth_secret=auth_secret, version="aes128gcm")
            entry["payload"] = json.loads(plain)
        except Exception as e:  # logged for the test to show
            entry["decrypt_error"] = repr(e)
        status = 410 if self.path.startswith("/gone/") else 201
        entry["status"] = status
        with open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
point = browser_key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
print(json.dumps({"port": server.server_address[1], "p256dh": b64(point), "auth": b64(auth_secret)}), flush=True)
server.serve_forever()
