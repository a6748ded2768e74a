"""A webhook receiver for the tests: verifies every delivery with the Standard Webhooks
reference library (an independent implementation of the signature scheme) and logs it.

usage: webhook_receiver.py PORT LOG SECRETS_FILE FAIL_FIRST [MODE]
  PORT          port to listen on (0: any; the port is printed on stdout)
  LOG           file to append one JSON line per request to
  SECRETS_FILE  whsec_ secrets, one per line, re-read on every request
  FAIL_FIRST    answer the first N requests with an error (the 2nd with 503 and
                Retry-After: 1, the others with 500)
  MODE          "gone": answer every request 410 Gone; "redirect": answer 302 to /elsewhere
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks.webhooks import Webhook

port, log_path, secrets_path, fail_first = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
mode = sys.argv[5] if len(sys.argv) > 5 else ""
seen = 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global seen
        seen += 1
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with open(secrets_path) as f:
            secrets = [s.strip() for s in f if s.strip()]
        verified_by = []
        for i, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified_by.append(i)
            except Exception:
                pass
        if mode == "gone":
            status = 410
        elif mode == "redirect" and self.path != "/elsewhere":
            status = 302
        elif seen <= fail_first:
            status = 503 if seen == 2 else 500
        else:
            status = 204
        entry = {
            "n": seen,
            "id": headers.get("webhook-id"),
            "type": json.loads(body).get("type"),
            "verified_by": verified_by,
            "status": status,
        }
        with open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "1")
        if status == 302:
            self.send_header("Location", "/elsewhere")
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):
        # A redirected POST that became a GET: logged, and answered 200 (a receiver that
        # would make it look delivered).
        with open(log_path, "a") as f:
            f.write(json.dumps({"n": 0, "id": None, "type": None, "verified_by": [], "status": "GET " + self.path}) + "\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", port), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
