// A real, certified OpenID Provider (panva's `oidc-provider`, pinned in ../package.json) on
// loopback, for the web console's single sign-on tests. One confidential client, the
// authorization code flow with PKCE (S256) required, and the provider's own development login
// and consent pages (`devInteractions`): any login name signs in as the account of that name.
//
//   OIDC_CLIENT_ID=... OIDC_CLIENT_SECRET=... OIDC_REDIRECT_URI=http://127.0.0.1:<p>/callback \
//   OIDC_PORT=0 tests/peers/.peers/node_modules/.bin/node tests/peers/oidc/provider.mjs
//
// Listens on 127.0.0.1 only (OIDC_PORT, 0 or unset = a free port), the issuer is exactly
// `http://127.0.0.1:<port>` (no trailing slash), and prints one line to stdout when it accepts
// requests: `OIDC_READY http://127.0.0.1:<port>`. Everything else (the provider's development
// warnings and notices included) goes to stderr. SIGTERM or SIGINT: closes and exits 0.
//
// Accounts: the login form's `login` is the account id, i.e. the `sub`; its claims are
// `email: <login>@example.test`, `email_verified: true` and `name: <login>`. The password is
// ignored. The ID token carries email and name too (`conformIdTokenClaims: false`), not only
// the userinfo endpoint.
//
// The client is `application_type: 'web'` (OIDC_APPLICATION_TYPE, default `web`): plain http
// redirect URIs are allowed for web clients as long as they do not use the implicit flow
// (oidc-provider only forces https for web clients using `implicit`), so an http://127.0.0.1
// redirect URI is accepted, matched exactly (port included). With OIDC_APPLICATION_TYPE=native
// the redirect URI must be http on a loopback address and its port is ignored when matching
// (RFC 8252 7.3): register `http://127.0.0.1/oidc/callback` and any port is accepted, for when
// the relying party's port is not known before the provider starts (a native client is asked
// for consent on every authorization, even with a session). An http issuer is allowed too (any
// web URI); nothing here needs https.
//
// Run it with the peers' node 24 (../.peers/node_modules/.bin/node); oidc-provider 9 also runs
// on node 20.19+, with an "Unsupported runtime" warning on stderr.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// stdout carries exactly one line (OIDC_READY): oidc-provider prints its NOTICEs with
// console.info (its WARNINGs already use console.warn, i.e. stderr).
console.log = console.info = console.debug = (...args) => console.error(...args);

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.mjs: ${name} is required`);
    process.exit(2);
  }
  return value;
};
const clientId = env('OIDC_CLIENT_ID');
const clientSecret = env('OIDC_CLIENT_SECRET');
const redirectUri = env('OIDC_REDIRECT_URI');
const port = Number(process.env.OIDC_PORT || 0);
const applicationType = process.env.OIDC_APPLICATION_TYPE || 'web';

// oidc-provider lives in ../.peers/node_modules (tests/peers/install), which ESM resolution from
// this directory does not search: resolve it from there explicitly.
const here = path.dirname(fileURLToPath(import.meta.url));
const peers = process.env.OIDC_PEERS_DIR || path.join(here, '..', '.peers');
const entry = createRequire(path.join(peers, 'node_modules', 'resolve.js')).resolve('oidc-provider');
const { default: Provider } = await import(pathToFileURL(entry).href);

// A fresh RS256 signing key per run (RS256 is what openidconnect's verifier allows by default),
// instead of the provider's built-in development keys.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' };

const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    application_type: applicationType,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
    scope: 'openid email profile',
  }],
  responseTypes: ['code'],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 supports
  scopes: ['openid'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  conformIdTokenClaims: false,
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  features: {
    devInteractions: { enabled: true }, // GET/POST /interaction/:uid: the login and consent forms
    rpInitiatedLogout: { enabled: false },
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: `${id}@example.test`, email_verified: true, name: id };
      },
    };
  },
  clientBasedCORS: () => false,
  ttl: {
    AccessToken: 600,
    AuthorizationCode: 120,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
  // Errors as plain text a test can show (the default page is HTML and says "change me").
  renderError(ctx, out) {
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = Object.entries(out).map(([k, v]) => `${k}: ${v}`).join('\n') + '\n';
  },
});
provider.on('server_error', (ctx, err) => console.error('provider.mjs: server_error', err));

server.on('request', provider.callback());

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

process.stdout.write(`OIDC_READY ${issuer}\n`);
