/**
 * OAuth 1.0a request signing (RFC 5849 section 3), HMAC-SHA1, written against the RFC with node:crypto.
 * Used for every request of an OAuth 1 connection and for the temporary-credential and token requests
 * of the OAuth 1 connect flow.
 */
import { createHmac, randomBytes } from 'node:crypto';

/** RFC 5849 section 3.6: unreserved characters stay, everything else is %XX with upper-case hex. */
export function percentEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

export interface OAuth1SignInput {
  method: string;
  /** Absolute URL, query included: its query parameters are signed. */
  url: string;
  consumerKey: string;
  consumerSecret: string;
  /** Absent for the temporary-credential request. */
  token?: string | undefined;
  tokenSecret?: string | undefined;
  /** Parameters of an `application/x-www-form-urlencoded` body, which are signed too. */
  formParams?: Record<string, string> | undefined;
  /** Extra protocol parameters (oauth_callback, oauth_verifier). */
  extraOAuthParams?: Record<string, string> | undefined;
  realm?: string | undefined;
  /** Send `oauth_version="1.0"` (optional in RFC 5849 section 3.1; most APIs expect it). @default true */
  includeVersion?: boolean | undefined;
  /** Fixed values for reproducible signatures (tests against published vectors); random/now otherwise. */
  nonce?: string | undefined;
  timestamp?: string | undefined;
}

/** RFC 5849 section 3.4.1.2: scheme and host lower-case, default port dropped, no query or fragment. */
function baseStringUri(url: URL): string {
  const scheme = url.protocol.toLowerCase();
  const defaultPort = (scheme === 'http:' && url.port === '80') || (scheme === 'https:' && url.port === '443');
  const port = url.port && !defaultPort ? `:${url.port}` : '';
  return `${scheme}//${url.hostname.toLowerCase()}${port}${url.pathname}`;
}

/** RFC 5849 section 3.4.1.3.2: encode each name and value, sort by name then value, join. */
function normalizeParameters(pairs: [string, string][]): string {
  return pairs
    .map(([name, value]): [string, string] => [percentEncode(name), percentEncode(value)])
    .sort(([an, av], [bn, bv]) => (an < bn ? -1 : an > bn ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

export interface OAuth1Signature {
  /** The signature base string (RFC 5849 section 3.4.1); exposed for tests and debugging, not secret. */
  baseString: string;
  signature: string;
  /** The `Authorization: OAuth …` header value. */
  authorization: string;
}

export function signOAuth1(input: OAuth1SignInput): OAuth1Signature {
  const url = new URL(input.url);
  const oauthParams: Record<string, string> = {
    oauth_consumer_key: input.consumerKey,
    oauth_nonce: input.nonce ?? randomBytes(16).toString('hex'),
    oauth_signature_method: 'HMAC-SHA1',
    oauth_timestamp: input.timestamp ?? String(Math.floor(Date.now() / 1000)),
    ...(input.includeVersion === false ? {} : { oauth_version: '1.0' }),
    ...(input.token === undefined ? {} : { oauth_token: input.token }),
    ...input.extraOAuthParams,
  };
  // The query is decoded as application/x-www-form-urlencoded, which URLSearchParams does (a `+` is a space).
  const pairs: [string, string][] = [
    ...[...url.searchParams.entries()],
    ...Object.entries(input.formParams ?? {}),
    ...Object.entries(oauthParams),
  ];
  const baseString = [
    input.method.toUpperCase(),
    percentEncode(baseStringUri(url)),
    percentEncode(normalizeParameters(pairs)),
  ].join('&');
  const key = `${percentEncode(input.consumerSecret)}&${percentEncode(input.tokenSecret ?? '')}`;
  const signature = createHmac('sha1', key).update(baseString).digest('base64');
  const headerParams = { ...oauthParams, oauth_signature: signature };
  const authorization =
    'OAuth ' +
    [
      ...(input.realm === undefined ? [] : [`realm="${percentEncode(input.realm)}"`]),
      ...Object.entries(headerParams)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([name, value]) => `${percentEncode(name)}="${percentEncode(value)}"`),
    ].join(', ');
  return { baseString, signature, authorization };
}
