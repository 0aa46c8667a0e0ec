// An OpenID Connect provider for the tests of `billing mcp --http`'s OAuth sign-in (panva's oidc-provider).
// node provider.js PORT CLIENTS_JSON: listens on 127.0.0.1:PORT as issuer http://127.0.0.1:PORT; CLIENTS_JSON is a
// list of {"client_id", "client_secret", "uid", "ttl"}. Each client gets JWT access tokens by the client credentials
// grant for the resource it names (RFC 8707), signed by a key made at start, with the client's "uid" as the claim
// of that name (absent when null) and lasting "ttl" seconds.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';

const [port, clientsJson] = process.argv.slice(2);
const clients = JSON.parse(clientsJson);
const byId = Object.fromEntries(clients.map((client) => [client.client_id, client]));
const signing = { ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: 'test-key', use: 'sig', alg: 'RS256' };

const provider = new Provider(`http://127.0.0.1:${port}`, {
  cookies: { keys: [randomBytes(32).toString('hex')] },
  clients: clients.map(({ client_id, client_secret }) => ({
    client_id, client_secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [],
  })),
  jwks: { keys: [signing] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => ({
        audience: resource, scope: 'billing', accessTokenFormat: 'jwt', accessTokenTTL: byId[client.clientId].ttl,
      }),
    },
  },
  scopes: ['billing'],
  extraTokenClaims: (ctx, token) => {
    const { uid } = byId[token.clientId];
    return uid === null ? {} : { uid };
  },
});
provider.listen(Number(port), '127.0.0.1', () => console.log(`oidc-provider listening on ${provider.issuer}`));
