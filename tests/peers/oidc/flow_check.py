#!/usr/bin/env python3
"""Proves provider.mjs end to end without loadout: the authorization code flow with PKCE, the way
a plain HTTP client (a cookie jar, following the provider's forms, following no redirect by itself)
must drive it, then the code exchange and the ID token's signature (RS256, checked by hand) and
claims, the userinfo endpoint, and that the provider exits 0 on SIGTERM with one line on stdout.

    python3 tests/peers/oidc/flow_check.py [--node PATH] [--login alice] [--native] [--flat-cookies]

Stdlib only; talks to 127.0.0.1 only. Prints every request it makes and what came back (status,
Location, Set-Cookie), the discovery fields that matter and the ID token's claims; exits 1 on
anything unexpected. Needs tests/peers/install (node 24 and oidc-provider under ../.peers).

The requests, in order. Every redirect is a 303 the client follows by hand with a GET; the ones
into /interaction/ are relative (resolve them against the issuer), the ones back to /auth/ and
to the redirect URI are absolute:

  1. GET  {issuer}/.well-known/openid-configuration                          -> 200 JSON
  2. GET  {authorization_endpoint}?response_type=code&client_id&redirect_uri&scope=openid email profile
          &state&nonce&code_challenge&code_challenge_method=S256             -> 303 /interaction/<uid1>
          (sets _interaction + _interaction.sig, path /interaction/<uid1>,
           and _interaction_resume + _interaction_resume.sig, path /auth/<uid1>)
  3. GET  /interaction/<uid1>                                                -> 200 HTML login form
          (<form method=post action=/interaction/<uid1>>: hidden prompt=login, login, password)
  4. POST /interaction/<uid1>  prompt=login&login=<name>&password=<any>      -> 303 {issuer}/auth/<uid1>
  5. GET  {issuer}/auth/<uid1>                                               -> 303 /interaction/<uid2>
          (sets _session + _session.sig, path /; the interaction cookies for uid2)
  6. GET  /interaction/<uid2>                                                -> 200 HTML consent form
          (<form method=post action=/interaction/<uid2>>: hidden prompt=consent)
  7. POST /interaction/<uid2>  prompt=consent                                -> 303 {issuer}/auth/<uid2>
  8. GET  {issuer}/auth/<uid2>                                -> 303 {redirect_uri}?code=..&state=..&iss=..
  9. POST {token_endpoint}  Authorization: Basic base64(urlenc(id):urlenc(secret))
          grant_type=authorization_code&code&redirect_uri&code_verifier      -> 200 JSON: access_token,
                                                                   id_token, expires_in, scope, token_type
 10. GET  {userinfo_endpoint}  Authorization: Bearer <access_token>          -> 200 JSON

Also checked: without code_challenge step 2 redirects to the redirect URI with
error=invalid_request (PKCE is required); a wrong code_verifier is 400 invalid_grant and leaves the
code usable; with the same cookie jar step 2 again goes straight to the redirect URI (web client)
or straight to consent (native client); reusing a code is 400 invalid_grant and revokes the
access token it issued.
"""

import argparse
import base64
import hashlib
import html.parser
import http.cookiejar
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, "..", ".peers")
CLIENT_ID = "loadout-console"
CLIENT_SECRET = "flow-check-secret"
REDIRECT_URI = "http://127.0.0.1:9/oidc/callback"  # never contacted: the last redirect is read, not followed


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # every 3xx comes back as an HTTPError we read by hand


class Forms(html.parser.HTMLParser):
    """Every <form>'s method, action and <input name=... value=...>."""

    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"method": (a.get("method") or "get").upper(), "action": a.get("action"), "fields": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value") or ""


class FlatJar:
    """The least a client can keep: one value per cookie name, the newest, sent on every request
    whatever its path; a cookie set with an expiry in the past (how the provider deletes one)
    is dropped. Enough for this flow, which is linear: what the next step needs is always the
    newest cookie of each name. (Set-Cookie headers are applied in order: the provider deletes
    an old `_interaction_resume` and sets the new one in the same response.)"""

    def __init__(self):
        self.cookies = {}

    def header(self):
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    def update(self, set_cookies):
        for line in set_cookies:
            name, _, rest = line.partition("=")
            value, *attrs = rest.split(";")
            attrs = [a.strip().lower() for a in attrs]
            if any(a.startswith("expires=thu, 01 jan 1970") or a == "max-age=0" for a in attrs):
                self.cookies.pop(name.strip(), None)
            else:
                self.cookies[name.strip()] = value.strip()


class Client:
    def __init__(self, base, flat_cookies=False):
        self.base = base
        self.flat = flat_cookies
        if flat_cookies:
            self.jar = FlatJar()
            self.opener = urllib.request.build_opener(NoRedirect())
        else:
            self.jar = http.cookiejar.CookieJar()
            self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect())

    def request(self, method, url, form=None, headers=None):
        url = urllib.parse.urljoin(self.base, url)
        if not url.startswith("http://127.0.0.1:"):
            fail(f"refusing to leave loopback: {url}")
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header("Content-Type", "application/x-www-form-urlencoded")
        if self.flat and self.jar.cookies:
            req.add_header("Cookie", self.jar.header())
        try:
            resp = self.opener.open(req, timeout=10)
        except urllib.error.HTTPError as e:
            resp = e
        if self.flat:
            self.jar.update(resp.headers.get_all("Set-Cookie") or [])
        body = resp.read().decode("utf-8", "replace")
        shown = url.replace(self.base, "")
        print(f"{method:4} {shown[:110]}{'...' if len(shown) > 110 else ''}"
              f"{'  ' + urllib.parse.urlencode(form) if form else ''}")
        cookies = [c.split(";")[0].split("=")[0] + "(" + ";".join(p.strip() for p in c.split(";")[1:]) + ")"
                   for c in resp.headers.get_all("Set-Cookie") or []]
        print(f"  -> {resp.status} {resp.headers.get('Location', '')}"
              f"{'  set-cookie: ' + ', '.join(cookies) if cookies else ''}")
        return resp.status, resp.headers, body


def expect_redirect(status, headers, body, prefix, what):
    location = headers.get("Location", "")
    if status != 303 or not location.startswith(prefix):
        fail(f"{what}: expected 303 to {prefix}..., got {status} {location!r}: {body[:500]}")
    return location


def only_form(body, prompt):
    parser = Forms()
    parser.feed(body)
    forms = [f for f in parser.forms if f["fields"].get("prompt") == prompt]
    if len(forms) != 1:
        fail(f"expected one form with prompt={prompt}, got {parser.forms}: {body[:500]}")
    return forms[0]


def rs256_verify(jwt, jwks):
    """RSASSA-PKCS1-v1_5 with SHA-256, by hand (stdlib has no RSA)."""
    head_b64, payload_b64, sig_b64 = jwt.split(".")
    header = json.loads(b64url_decode(head_b64))
    if header.get("alg") != "RS256":
        fail(f"id_token alg {header.get('alg')}, expected RS256")
    key = next((k for k in jwks["keys"] if k.get("kid") == header.get("kid")), None)
    if key is None or key.get("kty") != "RSA":
        fail(f"no RSA key {header.get('kid')} in the JWKS")
    n = int.from_bytes(b64url_decode(key["n"]), "big")
    e = int.from_bytes(b64url_decode(key["e"]), "big")
    k = (n.bit_length() + 7) // 8
    em = pow(int.from_bytes(b64url_decode(sig_b64), "big"), e, n).to_bytes(k, "big")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(
        f"{head_b64}.{payload_b64}".encode()).digest()
    expected = b"\x00\x01" + b"\xff" * (k - len(digest_info) - 3) + b"\x00" + digest_info
    if em != expected:
        fail("id_token signature does not verify")
    return header, json.loads(b64url_decode(payload_b64))


def start_provider(node, native):
    env = dict(os.environ, OIDC_PORT="0", OIDC_CLIENT_ID=CLIENT_ID, OIDC_CLIENT_SECRET=CLIENT_SECRET,
               OIDC_REDIRECT_URI=REDIRECT_URI)
    if native:
        # registered without a port: a native client's loopback redirect URI matches any port
        env.update(OIDC_APPLICATION_TYPE="native", OIDC_REDIRECT_URI="http://127.0.0.1/oidc/callback")
    started = time.monotonic()
    proc = subprocess.Popen([node, os.path.join(HERE, "provider.mjs")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines = []
    threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True).start()
    timer = threading.Timer(20, proc.kill)
    timer.start()
    line = proc.stdout.readline()
    timer.cancel()
    if not line.startswith("OIDC_READY http://127.0.0.1:"):
        proc.kill()
        fail(f"provider did not get ready: {line!r} {''.join(stderr_lines)}")
    print(f"provider ready in {time.monotonic() - started:.2f} s: {line.strip()}")
    return proc, line.split()[1], stderr_lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--node", default=os.path.join(PEERS, "node_modules", ".bin", "node"))
    ap.add_argument("--login", default="alice")
    ap.add_argument("--flat-cookies", action="store_true",
                    help="a name -> value cookie map sent on every request instead of a real cookie jar")
    ap.add_argument("--native", action="store_true",
                    help="OIDC_APPLICATION_TYPE=native, registered redirect URI without a port")
    args = ap.parse_args()

    proc, issuer, stderr_lines = start_provider(args.node, args.native)
    try:
        run_flow(issuer, args.login, args.native, args.flat_cookies)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("provider did not exit within 5 s of SIGTERM")
        rest = proc.stdout.read()
        print(f"provider exited {rc} on SIGTERM; its stderr:\n  " + "  ".join(stderr_lines))
        if rc != 0:
            fail(f"provider exited {rc} on SIGTERM")
        if rest.strip():
            fail(f"provider printed more than its ready line on stdout: {rest!r}")
    print("OK")


def run_flow(issuer, login, native, flat_cookies):
    c = Client(issuer, flat_cookies)

    status, _, body = c.request("GET", "/.well-known/openid-configuration")
    meta = json.loads(body)
    if status != 200 or meta["issuer"] != issuer:
        fail(f"discovery: {status} issuer {meta.get('issuer')!r} != {issuer!r}")
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint",
                "code_challenge_methods_supported", "token_endpoint_auth_methods_supported",
                "id_token_signing_alg_values_supported", "scopes_supported"):
        print(f"  {key}: {meta.get(key)}")
    _, _, body = c.request("GET", meta["jwks_uri"])
    jwks = json.loads(body)

    # PKCE is required: an authorization request without it comes back to the client as an error.
    status, headers, body = c.request("GET", meta["authorization_endpoint"] + "?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI,
        "scope": "openid", "state": "s0", "nonce": "n0"}))
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(expect_redirect(status, headers, body, REDIRECT_URI, "no PKCE")).query)
    if q.get("error") != ["invalid_request"] or q.get("state") != ["s0"]:
        fail(f"without PKCE: {q}")

    verifier = b64url(secrets.token_bytes(32))
    challenge = b64url(hashlib.sha256(verifier.encode()).digest())
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    auth_url = meta["authorization_endpoint"] + "?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI,
        "scope": "openid email profile", "state": state, "nonce": nonce,
        "code_challenge": challenge, "code_challenge_method": "S256"})

    location = expect_redirect(*c.request("GET", auth_url), "/interaction/", "authorization request")
    status, _, body = c.request("GET", location)
    form = only_form(body, "login")
    if status != 200 or form["method"] != "POST" or set(form["fields"]) != {"prompt", "login", "password"}:
        fail(f"login form: {status} {form}")
    location = expect_redirect(*c.request("POST", form["action"], {**form["fields"], "login": login, "password": "any"}),
                               "http://127.0.0.1:", "login")  # absolute: {issuer}/auth/<uid>
    location = expect_redirect(*c.request("GET", location), "/interaction/", "resume after login")
    status, _, body = c.request("GET", location)
    form = only_form(body, "consent")
    if status != 200 or form["method"] != "POST" or set(form["fields"]) != {"prompt"}:
        fail(f"consent form: {status} {form}")
    location = expect_redirect(*c.request("POST", form["action"], form["fields"]), "http://127.0.0.1:", "consent")
    location = expect_redirect(*c.request("GET", location), REDIRECT_URI + "?", "resume after consent")

    q = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    if q.get("state") != [state] or "code" not in q:
        fail(f"callback: {q}")
    print(f"  callback parameters: {sorted(q)}")

    # RFC 6749 2.3.1: each part form-urlencoded, then base64 (what the oauth2 crate sends too)
    quote = lambda s: urllib.parse.quote_plus(s, safe="")
    basic = base64.b64encode(f"{quote(CLIENT_ID)}:{quote(CLIENT_SECRET)}".encode()).decode()
    token_form = {"grant_type": "authorization_code", "code": q["code"][0], "redirect_uri": REDIRECT_URI}
    # A wrong verifier is refused (before the code is consumed), the right one works.
    status, _, body = c.request("POST", meta["token_endpoint"], {**token_form, "code_verifier": b64url(secrets.token_bytes(32))},
                                {"Authorization": f"Basic {basic}"})
    if status != 400 or json.loads(body).get("error") != "invalid_grant":
        fail(f"a wrong code_verifier: {status} {body}")
    status, _, body = c.request("POST", meta["token_endpoint"], {**token_form, "code_verifier": verifier},
                                {"Authorization": f"Basic {basic}"})
    if status != 200:
        fail(f"token: {status} {body}")
    tokens = json.loads(body)
    print(f"  token response fields: {sorted(tokens)}")

    header, claims = rs256_verify(tokens["id_token"], jwks)
    print(f"  id_token header: {header}")
    print(f"  id_token claims: {json.dumps(claims, sort_keys=True)}")
    want = {"iss": issuer, "aud": CLIENT_ID, "sub": login, "nonce": nonce,
            "email": f"{login}@example.test", "name": login}
    wrong = {k: (claims.get(k), v) for k, v in want.items() if claims.get(k) != v}
    if wrong:
        fail(f"id_token claims (got, want): {wrong}")
    if not claims["iat"] <= time.time() + 5 < claims["exp"]:
        fail("id_token iat/exp")

    status, _, body = c.request("GET", meta["userinfo_endpoint"], headers={"Authorization": f"Bearer {tokens['access_token']}"})
    info = json.loads(body)
    print(f"  userinfo: {info}")
    if status != 200 or info.get("sub") != login or info.get("email") != f"{login}@example.test":
        fail(f"userinfo: {status} {body}")
    if flat_cookies:
        print(f"  cookies kept: {sorted(c.jar.cookies)}")
    else:
        print(f"  cookies in the jar (name, path): {sorted((ck.name, ck.path) for ck in c.jar)}")

    # The same cookie jar again: the _session cookie and the saved grant mean no login and no
    # consent, the authorization request redirects straight back with a code (use a fresh jar,
    # or prompt=login, to see the forms again). A native client is asked for consent every time
    # (oidc-provider's `native_client_prompt` check), though not to log in again.
    if native:
        expect_redirect(*c.request("GET", auth_url), "/interaction/", "native client: consent again")
    else:
        expect_redirect(*c.request("GET", auth_url), REDIRECT_URI + "?", "silent re-authorization")

    # Reusing a code is invalid_grant, and oidc-provider then revokes what that code issued
    # (RFC 6749 4.1.2): the access token stops working.
    status, _, again = c.request("POST", meta["token_endpoint"], {**token_form, "code_verifier": verifier},
                                 {"Authorization": f"Basic {basic}"})
    if status != 400 or json.loads(again).get("error") != "invalid_grant":
        fail(f"a used code: {status} {again}")
    status, _, body = c.request("GET", meta["userinfo_endpoint"], headers={"Authorization": f"Bearer {tokens['access_token']}"})
    if status != 401:
        fail(f"userinfo after the code was reused: {status} {body}")


if __name__ == "__main__":
    main()
