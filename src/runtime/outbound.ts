/**
 * The outbound request policy (docs/operations.md "Outbound requests"): which addresses the service's
 * requests to external APIs may reach. Every `svc` request, every proxied request, every OAuth token
 * request and every outbound webhook goes through the agents of this module, which check the address
 * after DNS resolution, at the moment of connecting, and connect to exactly the address they checked
 * (no second resolution an attacker's DNS server could answer differently). Redirects are new
 * connections, so each hop is checked too.
 *
 * Refused by default: loopback, private (RFC 1918, unique local), carrier-grade NAT, link-local (where
 * cloud metadata services live), unspecified, multicast, reserved and documentation ranges, the
 * IPv6 addresses that embed an IPv4 address of those ranges (IPv4-mapped, IPv4-translated,
 * IPv4-compatible, NAT64, 6to4, ISATAP: `embeddedIpv4`), Teredo and local-use NAT64 whole, and the
 * metadata addresses outside them (Azure's 168.63.129.16). `SERVICE_OUTBOUND_ALLOW` opens what a
 * deployment needs: comma-separated host names (`api.internal`, `*.corp.example`), addresses and CIDR
 * blocks (`10.1.0.0/16`, `fd00::/8`), each optionally with a port (`127.0.0.1:4010`, `[::1]:8080`,
 * `tracker.local:443`). A host-name entry opens that name whatever it resolves to.
 */
import axios, { type AxiosRequestConfig, type AxiosResponse } from 'axios';
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http, { type ClientRequestArgs } from 'node:http';
import https from 'node:https';
import net, { BlockList } from 'node:net';
import { ServiceError } from '../errors.js';

/** The setting that opens addresses; named in every refusal. */
export const OUTBOUND_ALLOW_SETTING = 'SERVICE_OUTBOUND_ALLOW';

/** `code` of the error a refused connection fails with (and of the ServiceError it becomes). */
export const OUTBOUND_REFUSED = 'outbound_request_refused';

interface Range {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
  why: string;
}

const REFUSED_RANGES: Range[] = [
  { address: '0.0.0.0', prefix: 8, family: 'ipv4', why: 'an unspecified ("this network") address' },
  { address: '10.0.0.0', prefix: 8, family: 'ipv4', why: 'a private address' },
  { address: '100.64.0.0', prefix: 10, family: 'ipv4', why: 'a carrier-grade NAT address' },
  { address: '127.0.0.0', prefix: 8, family: 'ipv4', why: 'a loopback address' },
  { address: '169.254.0.0', prefix: 16, family: 'ipv4', why: 'a link-local address (cloud metadata services)' },
  { address: '172.16.0.0', prefix: 12, family: 'ipv4', why: 'a private address' },
  { address: '192.0.0.0', prefix: 24, family: 'ipv4', why: 'an IETF protocol assignment' },
  { address: '192.0.2.0', prefix: 24, family: 'ipv4', why: 'a documentation address' },
  { address: '192.88.99.0', prefix: 24, family: 'ipv4', why: 'a 6to4 relay address' },
  { address: '192.168.0.0', prefix: 16, family: 'ipv4', why: 'a private address' },
  { address: '198.18.0.0', prefix: 15, family: 'ipv4', why: 'a benchmarking address' },
  { address: '198.51.100.0', prefix: 24, family: 'ipv4', why: 'a documentation address' },
  { address: '203.0.113.0', prefix: 24, family: 'ipv4', why: 'a documentation address' },
  { address: '224.0.0.0', prefix: 4, family: 'ipv4', why: 'a multicast address' },
  { address: '240.0.0.0', prefix: 4, family: 'ipv4', why: 'a reserved or broadcast address' },
  { address: '168.63.129.16', prefix: 32, family: 'ipv4', why: 'a cloud metadata address (Azure)' },
  { address: '::', prefix: 128, family: 'ipv6', why: 'the unspecified address' },
  { address: '::1', prefix: 128, family: 'ipv6', why: 'a loopback address' },
  {
    address: '64:ff9b:1::',
    prefix: 48,
    family: 'ipv6',
    why: 'a local-use NAT64 address (translated as the local network chooses)',
  },
  { address: '100::', prefix: 64, family: 'ipv6', why: 'a discard address' },
  { address: '2001::', prefix: 32, family: 'ipv6', why: 'a Teredo address' },
  { address: '2001:2::', prefix: 48, family: 'ipv6', why: 'a benchmarking address' },
  { address: '2001:db8::', prefix: 32, family: 'ipv6', why: 'a documentation address' },
  { address: '3fff::', prefix: 20, family: 'ipv6', why: 'a documentation address' },
  { address: 'fc00::', prefix: 7, family: 'ipv6', why: 'a unique local (private) address' },
  { address: 'fe80::', prefix: 10, family: 'ipv6', why: 'a link-local address' },
  { address: 'fec0::', prefix: 10, family: 'ipv6', why: 'a site-local address' },
  { address: 'ff00::', prefix: 8, family: 'ipv6', why: 'a multicast address' },
];

const refusedLists = REFUSED_RANGES.map((range) => {
  const list = new BlockList();
  list.addSubnet(range.address, range.prefix, range.family);
  return { list, range };
});

/** The 16 bytes of an IPv6 address (with `::` and an embedded dotted quad handled), or undefined. */
export function ipv6Bytes(address: string): number[] | undefined {
  let text = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const parts = dotted[1]!.split('.').map(Number);
    if (parts.some((part) => part > 255)) return undefined;
    const hex = (high: number, low: number) => ((high << 8) | low).toString(16);
    text = `${text.slice(0, -dotted[1]!.length)}${hex(parts[0]!, parts[1]!)}:${hex(parts[2]!, parts[3]!)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array.from({ length: halves.length === 2 ? missing : 0 }, () => '0'), ...tail];
  if (all.some((group) => !/^[0-9a-f]{1,4}$/i.test(group))) return undefined;
  return all.flatMap((group) => {
    const value = parseInt(group, 16);
    return [value >> 8, value & 0xff];
  });
}

/**
 * The IPv4 address an IPv6 address carries, in every form that may reach it: IPv4-mapped
 * (`::ffff:a.b.c.d`, RFC 4291), IPv4-translated (SIIT, `::ffff:0:a.b.c.d`, RFC 2765),
 * IPv4-compatible (`::a.b.c.d`, deprecated by RFC 4291), the NAT64 well-known prefix
 * (`64:ff9b::a.b.c.d`, RFC 6052), 6to4 (`2002:AABB:CCDD::/48`, RFC 3056) and an ISATAP interface
 * identifier (`…:0:5efe:a.b.c.d`, `…:200:5efe:a.b.c.d`, RFC 5214). Teredo (2001::/32, the client's
 * address obfuscated) and local-use NAT64 (64:ff9b:1::/48, RFC 8215, whose layout the local network
 * chooses) are refused whole by REFUSED_RANGES instead.
 */
export function embeddedIpv4(address: string): string | undefined {
  const bytes = ipv6Bytes(address);
  if (!bytes) return undefined;
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0);
  const quad = (offset: number) => bytes.slice(offset, offset + 4).join('.');
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return quad(12);
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) return quad(12);
  if (zeros(0, 12)) return quad(12);
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12)) {
    return quad(12);
  }
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return quad(2);
  if ((bytes[8]! & 0xfd) === 0 && bytes[9] === 0 && bytes[10] === 0x5e && bytes[11] === 0xfe) return quad(12);
  return undefined;
}

/** Why an address is refused by default, or undefined for a public unicast address. */
export function refusedRange(address: string): string | undefined {
  const family = net.isIP(address);
  if (family === 0) return 'not an IP address';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const listed = refusedLists.find(({ list, range }) => range.family === type && list.check(address, type))?.range.why;
  if (listed !== undefined || family === 4) return listed;
  const inner = embeddedIpv4(address);
  if (inner === undefined) return undefined;
  const why = refusedRange(inner);
  return why === undefined ? undefined : `${why} (${inner} inside the IPv6 address)`;
}

interface AllowEntry {
  text: string;
  port: number | undefined;
  /** A block list holding one subnet; set for address and CIDR entries. */
  subnet?: BlockList;
  family?: 'ipv4' | 'ipv6';
  /** A host name (lower case, no trailing dot); `*.x` entries keep the leading `*.`. */
  host?: string;
}

function parsePort(text: string, entry: string): number {
  const port = Number(text);
  if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65_535) {
    throw invalidAllowEntry(entry, `'${text}' is not a port (1 to 65535)`);
  }
  return port;
}

function invalidAllowEntry(entry: string, why: string): ServiceError {
  return new ServiceError(
    'invalid_settings',
    `${OUTBOUND_ALLOW_SETTING}: the entry '${entry}' is not valid: ${why}. Entries are host names (api.internal, *.corp.example), addresses or CIDR blocks (10.0.0.0/8, fd00::/8), each optionally with :port ([::1]:8080 for IPv6).`,
  );
}

function parseAllowEntry(entry: string): AllowEntry {
  let rest = entry;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?:\/(\d+))?(?::(\d+))?$/.exec(rest);
  if (bracketed) {
    rest = `${bracketed[1]!}${bracketed[2] === undefined ? '' : `/${bracketed[2]}`}`;
    if (bracketed[3] !== undefined) port = parsePort(bracketed[3], entry);
  } else if ((rest.match(/:/g) ?? []).length === 1) {
    const at = rest.lastIndexOf(':');
    port = parsePort(rest.slice(at + 1), entry);
    rest = rest.slice(0, at);
  }
  const [address, prefixText, extra] = rest.split('/');
  if (extra !== undefined || address === undefined) throw invalidAllowEntry(entry, 'more than one /');
  const family = net.isIP(address);
  if (family !== 0) {
    const type = family === 4 ? 'ipv4' : 'ipv6';
    const max = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? max : Number(prefixText);
    if (!/^\d{1,3}$/.test(prefixText ?? String(max)) || prefix > max) {
      throw invalidAllowEntry(entry, `the prefix length must be 0 to ${max}`);
    }
    const subnet = new BlockList();
    subnet.addSubnet(address, prefix, type);
    return { text: entry, port, subnet, family: type };
  }
  if (prefixText !== undefined) throw invalidAllowEntry(entry, `'${address}' is not an IP address`);
  const host = address.toLowerCase().replace(/\.$/, '');
  if (!/^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/.test(host)) {
    throw invalidAllowEntry(entry, 'not a host name, an address or a CIDR block');
  }
  return { text: entry, port, host };
}

/** Thrown (as a socket error) when a connection is refused; axios keeps its `code`. */
export class OutboundRefusedError extends Error {
  override readonly name = 'OutboundRefusedError';
  readonly code = OUTBOUND_REFUSED;
  constructor(
    readonly host: string,
    readonly address: string,
    readonly port: number,
    readonly why: string,
  ) {
    super(
      `the request to ${host}${host === address ? '' : ` (${address})`} port ${port} was refused: ${address} is ${why}; the operator can allow it with ${OUTBOUND_ALLOW_SETTING}`,
    );
  }
}

/** The OutboundRefusedError behind an error (an axios or fetch error wraps it), if any. */
export function outboundRefusal(error: unknown): OutboundRefusedError | undefined {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (current instanceof OutboundRefusedError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function normalHost(host: string): string {
  return host
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export class OutboundPolicy {
  private readonly entries: AllowEntry[] = [];
  private agents: { http: http.Agent; https: https.Agent } | undefined;

  /** A policy with the default refusals and the given allow-list (the text of SERVICE_OUTBOUND_ALLOW). */
  constructor(allow = '') {
    this.allow(allow);
  }

  /** Opens more: comma-separated entries as in SERVICE_OUTBOUND_ALLOW. Throws `invalid_settings` for a bad entry. */
  allow(entries: string): this {
    const parsed = entries
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '')
      .map(parseAllowEntry);
    this.entries.push(...parsed);
    return this;
  }

  /** The allow-list entries, as given. */
  allowed(): string[] {
    return this.entries.map((entry) => entry.text);
  }

  /**
   * Why a connection to `address` (resolved from `host`) on `port` is refused, or undefined when it
   * may go: a public address, or one an allow-list entry opens.
   */
  refusal(host: string, address: string, port: number): string | undefined {
    const name = normalHost(host);
    const ip = normalHost(address);
    for (const entry of this.entries) {
      if (entry.port !== undefined && entry.port !== port) continue;
      if (entry.host !== undefined) {
        const matches = entry.host.startsWith('*.') ? name.endsWith(entry.host.slice(1)) : name === entry.host;
        if (matches) return undefined;
      } else if (entry.subnet && entry.family) {
        const family = net.isIP(ip);
        if (family === 0) continue;
        if (entry.subnet.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return undefined;
        const inner = family === 6 ? embeddedIpv4(ip) : undefined;
        if (inner !== undefined && entry.subnet.check(inner, 'ipv4')) return undefined;
      }
    }
    return refusedRange(ip);
  }

  /** Throws OutboundRefusedError unless a connection to `address` may go. */
  check(host: string, address: string, port: number): void {
    const why = this.refusal(host, address, port);
    if (why !== undefined) throw new OutboundRefusedError(normalHost(host), normalHost(address), port, why);
  }

  /**
   * A `lookup` for sockets to `port`: resolves with the system resolver, keeps the addresses the
   * policy lets through, and fails with OutboundRefusedError when none is left.
   */
  lookupFor(port: number) {
    return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
      dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
        if (error) {
          callback(error, '');
          return;
        }
        const permitted = addresses.filter((entry) => this.refusal(hostname, entry.address, port) === undefined);
        if (permitted.length === 0) {
          const first = addresses[0];
          const refused = new OutboundRefusedError(
            normalHost(hostname),
            first?.address ?? '?',
            port,
            first ? (this.refusal(hostname, first.address, port) ?? 'refused') : 'not resolvable',
          );
          callback(refused, '');
          return;
        }
        if (options.all) callback(null, permitted);
        else callback(null, permitted[0]!.address, permitted[0]!.family);
      });
    };
  }

  /**
   * Why a request to `url` would be refused now, for checking a URL when it is saved (an outbound
   * webhook's target): the host's addresses as the resolver gives them now, judged as at connect time.
   * Undefined when some address may be reached, or when the name does not resolve (yet): every
   * request is checked again when it connects, so a name that later resolves to an internal address
   * is still refused then.
   */
  async refusedUrl(url: URL): Promise<OutboundRefusedError | undefined> {
    const host = normalHost(url.hostname);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    if (net.isIP(host) !== 0) {
      const why = this.refusal(host, host, port);
      return why === undefined ? undefined : new OutboundRefusedError(host, host, port, why);
    }
    return new Promise((resolve) => {
      this.lookupFor(port)(host, { all: true }, (error) => resolve(outboundRefusal(error)));
    });
  }

  /** The http and https agents that apply this policy to every connection they open. */
  httpAgents(): { http: http.Agent; https: https.Agent } {
    this.agents ??= { http: guardedAgent(http.Agent, this), https: guardedAgent(https.Agent, this) };
    return this.agents;
  }
}

/** Checks an IP-literal host before connecting (the resolver is not asked for those) and sets the lookup. */
function guard(policy: OutboundPolicy, options: ClientRequestArgs): { options: ClientRequestArgs; refused?: Error } {
  const host = normalHost(options.host ?? options.hostname ?? 'localhost');
  const port = Number(options.port ?? 0);
  // A Unix socket is a local service whatever the host says: never through the policy.
  if (options.socketPath) {
    return { options, refused: new OutboundRefusedError(host, options.socketPath, port, 'a local socket') };
  }
  if (net.isIP(host) !== 0) {
    const why = policy.refusal(host, host, port);
    if (why !== undefined) return { options, refused: new OutboundRefusedError(host, host, port, why) };
  }
  return { options: { ...options, lookup: policy.lookupFor(port) } };
}

/** A socket that fails with `error` as soon as the caller has attached its listeners. */
function failedSocket(error: Error): net.Socket {
  const socket = new net.Socket();
  process.nextTick(() => socket.destroy(error));
  return socket;
}

/** An agent of `Base` (http.Agent or https.Agent) whose every connection obeys `policy`. */
function guardedAgent<T extends http.Agent>(Base: new (options: http.AgentOptions) => T, policy: OutboundPolicy): T {
  const agent = new Base({ keepAlive: true });
  // The class's own connect (net.connect or tls.connect), kept before this instance's replaces it.
  const connect = agent.createConnection.bind(agent);
  agent.createConnection = (options, callback) => {
    const guarded = guard(policy, options);
    if (guarded.refused) return failedSocket(guarded.refused);
    return connect(guarded.options, callback);
  };
  return agent;
}

let processPolicy: OutboundPolicy | undefined;

/**
 * The policy of this process: the one `configureOutboundPolicy` set (src/main.ts from the settings'
 * SERVICE_OUTBOUND_ALLOW, bin/service.js from the CLI's environment), else the default refusals with
 * nothing allowed (test workers open their fake servers with `allow`).
 */
export function outboundPolicy(): OutboundPolicy {
  processPolicy ??= new OutboundPolicy('');
  return processPolicy;
}

/** Sets the policy of this process (the composition root does, from its settings). */
export function configureOutboundPolicy(policy: OutboundPolicy): void {
  processPolicy = policy;
}

/** The ServiceError a refused connection becomes at the API and in activities: 403, not retryable. */
export function refusedError(refusal: OutboundRefusedError): ServiceError {
  return new ServiceError(OUTBOUND_REFUSED, refusal.message);
}

/**
 * The one HTTP client of the service's server code (`svc` requests, the proxy, OAuth token requests,
 * outbound webhooks): axios through the policy's agents. Environment proxies are ignored (a proxy
 * would connect on the service's behalf, past the check), no redirect is followed (a caller that
 * follows them authorises each hop: src/runtime/http.ts), and every status is an answer, not an error.
 * The caller's options come first; the agents, the redirects, the proxy, the socket path and the transport
 * cannot be replaced.
 */
export function policyRequest<T = unknown>(config: AxiosRequestConfig): Promise<AxiosResponse<T>> {
  const agents = outboundPolicy().httpAgents();
  return axios.request<T>({
    validateStatus: () => true,
    // A timeout keeps axios's ECONNABORTED code, which the callers' retry rules know.
    transitional: { clarifyTimeoutError: false },
    ...config,
    // What would connect anywhere but through the policy's agents is not the caller's to choose.
    maxRedirects: 0,
    proxy: false,
    socketPath: null,
    transport: undefined,
    httpAgent: agents.http,
    httpsAgent: agents.https,
  });
}

/**
 * `fetch` through the policy, for the callers written against fetch (OAuth token requests, outbound
 * webhooks): `policyRequest` underneath. Redirects are not followed. As fetch does, a compressed body
 * is decompressed, a network error rejects with a TypeError whose `cause` chain holds the error (an
 * OutboundRefusedError for a refused address), and an aborted signal rejects with its reason.
 */
/** The longest (decompressed) body policyFetch reads: 10 MiB. */
export const POLICY_FETCH_MAX_BYTES = 10 * 1024 * 1024;

export const policyFetch: typeof fetch = async (input, init) => {
  const request = new Request(input, init);
  const body = request.body === null ? undefined : Buffer.from(await request.arrayBuffer());
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => (headers[name] = value));
  let response: AxiosResponse<ArrayBuffer>;
  try {
    response = await policyRequest<ArrayBuffer>({
      method: request.method,
      url: request.url,
      headers,
      data: body,
      responseType: 'arraybuffer',
      decompress: true,
      // Token answers and webhook acknowledgements are small: a body past this (a decompression bomb)
      // fails the request instead of the process's memory.
      maxContentLength: POLICY_FETCH_MAX_BYTES,
      maxBodyLength: Infinity,
      signal: request.signal,
    });
  } catch (error) {
    if (request.signal.aborted) throw request.signal.reason;
    throw new TypeError(`fetch failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined || value === null) continue;
    for (const item of Array.isArray(value) ? value : [value]) responseHeaders.append(name, String(item));
  }
  const noBody = response.status === 204 || response.status === 304 || request.method === 'HEAD';
  return new Response(noBody ? null : Buffer.from(response.data), {
    status: response.status,
    statusText: response.statusText ?? '',
    headers: responseHeaders,
  });
};
