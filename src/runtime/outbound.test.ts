import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import axios from 'axios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  configureOutboundPolicy,
  embeddedIpv4,
  OUTBOUND_REFUSED,
  OutboundPolicy,
  outboundPolicy,
  outboundRefusal,
  policyFetch,
  policyRequest,
  refusedRange,
} from './outbound.js';

describe('refusedRange', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.100.100.200', 'carrier-grade NAT'], // Alibaba Cloud's metadata service
    ['169.254.169.254', 'link-local'], // AWS, GCP, Azure, DigitalOcean, Oracle metadata
    ['168.63.129.16', 'metadata'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fd00:ec2::254', 'unique local'], // AWS metadata over IPv6
    ['fe80::1', 'link-local'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'], // NAT64 of 169.254.169.254
    ['2002:7f00:1::', 'loopback'], // 6to4 of 127.0.0.1
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    // Every IPv4-embedding form, each carrying an address of a refused range.
    ['::ffff:0:127.0.0.1', 'loopback'], // IPv4-translated (SIIT, ::ffff:0:0:0/96)
    ['::ffff:0:7f00:1', 'loopback'],
    ['0:0:0:0:ffff:0:a9fe:a9fe', 'link-local'],
    ['::ffff:0:a00:1', 'private'],
    ['::a9fe:a9fe', 'link-local'], // IPv4-compatible
    ['::0.0.0.2', 'unspecified'],
    ['::ffff:0.0.0.0', 'unspecified'], // IPv4-mapped
    ['::ffff:c0a8:101', 'private'],
    ['64:ff9b::7f00:1', 'loopback'], // NAT64, well-known prefix
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b:1::7f00:1', 'local-use NAT64'], // local-use NAT64 (RFC 8215): any layout
    ['64:ff9b:1:7f00:1::', 'local-use NAT64'],
    ['64:ff9b:1:808:8:800::', 'local-use NAT64'],
    ['2002:a9fe:a9fe::1', 'link-local'], // 6to4
    ['2002:c0a8:101:1::1', 'private'],
    ['2001:0:0a00:1::', 'Teredo'],
    ['2001:db8:1::5efe:127.0.0.1', 'documentation'],
    ['2600:1f18::5efe:7f00:1', 'loopback'], // ISATAP interface identifier
    ['2600:1f18::200:5efe:a9fe:a9fe', 'link-local'],
    ['fe80::5efe:7f00:1', 'link-local'],
    ['2001:2::1', 'benchmarking'],
    ['3fff::1', 'documentation'],
    ['::ffff:0:127.0.0.1%eth0', 'loopback'],
  ])('refuses %s (%s)', (address, kind) => {
    expect(refusedRange(address)).toContain(kind);
  });

  it.each([
    '93.184.215.14',
    '8.8.8.8',
    '1.1.1.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '::ffff:0:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '2600:1f18::5efe:808:808',
  ])('lets the public address %s through', (address) => {
    expect(refusedRange(address)).toBeUndefined();
  });

  it('reads the IPv4 address inside IPv6 forms', () => {
    expect(embeddedIpv4('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(embeddedIpv4('64:ff9b::0a00:0001')).toBe('10.0.0.1');
    expect(embeddedIpv4('2002:0a00:0001::1')).toBe('10.0.0.1');
    expect(embeddedIpv4('::ffff:0:10.0.0.1')).toBe('10.0.0.1');
    expect(embeddedIpv4('::a00:1')).toBe('10.0.0.1');
    expect(embeddedIpv4('2600::5efe:a00:1')).toBe('10.0.0.1');
    expect(embeddedIpv4('64:ff9b:0:0:1::a00:1')).toBeUndefined(); // not the /96 well-known prefix
    expect(embeddedIpv4('2606:4700::1')).toBeUndefined();
  });
});

describe('the allow-list', () => {
  it('opens host names, suffixes, addresses and CIDR blocks, each optionally on one port', () => {
    const policy = new OutboundPolicy(
      'tracker.local, *.corp.example:8443, 10.1.0.0/16, 127.0.0.1:4010, [::1]:8080, fd00::/8, 192.168.1.7',
    );
    expect(policy.refusal('tracker.local', '127.0.0.1', 9999)).toBeUndefined();
    expect(policy.refusal('TRACKER.LOCAL.', '10.9.9.9', 80)).toBeUndefined();
    expect(policy.refusal('api.corp.example', '10.2.0.1', 8443)).toBeUndefined();
    expect(policy.refusal('api.corp.example', '10.2.0.1', 443)).toContain('private');
    expect(policy.refusal('corp.example', '10.2.0.1', 8443)).toContain('private');
    expect(policy.refusal('x', '10.1.200.3', 5432)).toBeUndefined();
    expect(policy.refusal('x', '::ffff:10.1.200.3', 5432)).toBeUndefined();
    expect(policy.refusal('x', '10.2.0.1', 5432)).toContain('private');
    expect(policy.refusal('127.0.0.1', '127.0.0.1', 4010)).toBeUndefined();
    expect(policy.refusal('127.0.0.1', '127.0.0.1', 7233)).toContain('loopback');
    expect(policy.refusal('::1', '::1', 8080)).toBeUndefined();
    expect(policy.refusal('::1', '::1', 8081)).toContain('loopback');
    expect(policy.refusal('x', 'fd12::1', 1)).toBeUndefined();
    expect(policy.refusal('x', '192.168.1.7', 22)).toBeUndefined();
    expect(policy.refusal('x', '192.168.1.8', 22)).toContain('private');
  });

  it.each(['127.0.0.1:0', '127.0.0.1:99999', '10.0.0.0/33', 'bad host!', 'a/b/c', 'host:port', '::1:80:x/7'])(
    'refuses the entry %s, naming the setting',
    (entry) => {
      expect(() => new OutboundPolicy(entry)).toThrow(/SERVICE_OUTBOUND_ALLOW: the entry/);
    },
  );
});

describe('connections through the policy agents', () => {
  let internal: Server;
  let port: number;
  let connects = 0;
  beforeAll(async () => {
    internal = createServer((_req, res) => res.end('internal secret'));
    internal.on('connection', () => connects++);
    await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
    port = (internal.address() as AddressInfo).port;
  });
  afterAll(async () => {
    internal.closeAllConnections();
    await new Promise((resolve) => internal.close(resolve));
  });

  const get = (policy: OutboundPolicy, url: string) => {
    const agents = policy.httpAgents();
    return axios.get<string>(url, {
      httpAgent: agents.http,
      httpsAgent: agents.https,
      proxy: false,
      maxRedirects: 0,
      timeout: 5000,
      responseType: 'text',
    });
  };

  it('refuses every spelling of a loopback address, literal or resolved, before a connection is made', async () => {
    const policy = new OutboundPolicy('');
    const spellings = [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`, // resolved by the system resolver
      `http://2130706433:${port}/`, // 127.0.0.1 as one number
      `http://0x7f.1:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://[::ffff:0:127.0.0.1]:${port}/`, // IPv4-translated (SIIT)
      `http://[::127.0.0.1]:${port}/`,
      `http://[64:ff9b::127.0.0.1]:${port}/`,
      `http://[2002:7f00:1::1]:${port}/`,
      `http://0.0.0.0:${port}/`, // connects to the local host on Linux
      `https://127.0.0.1:${port}/`,
    ];
    for (const url of spellings) {
      const error = await get(policy, url).then(
        () => undefined,
        (failure: unknown) => failure,
      );
      expect(outboundRefusal(error)?.code, url).toBe(OUTBOUND_REFUSED);
      expect((error as { code?: string }).code, url).toBe(OUTBOUND_REFUSED);
    }
    expect(connects).toBe(0);
  });

  it('lets an allowed address through, on the allowed port only', async () => {
    const policy = new OutboundPolicy(`127.0.0.1:${port + 1}`);
    await expect(get(policy, `http://127.0.0.1:${port}/`)).rejects.toMatchObject({ code: OUTBOUND_REFUSED });
    expect(connects).toBe(0);
    policy.allow(`127.0.0.1:${port}`);
    expect((await get(policy, `http://127.0.0.1:${port}/`)).data).toBe('internal secret');
    // The name resolves to ::1 and 127.0.0.1; the allowed one is the one connected to.
    expect((await get(policy, `http://localhost:${port}/`)).data).toBe('internal secret');
    expect(connects).toBeGreaterThan(0);
  });

  it('policyFetch (OAuth token requests, outbound webhooks) obeys the process policy', async () => {
    const before = connects;
    configureOutboundPolicy(new OutboundPolicy(''));
    const refused = await policyFetch(`http://127.0.0.1:${port}/token`, { method: 'POST', body: 'a=b' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(TypeError);
    expect(outboundRefusal(refused)?.message).toContain('SERVICE_OUTBOUND_ALLOW');
    expect(connects).toBe(before);
    configureOutboundPolicy(new OutboundPolicy(`127.0.0.1:${port}`));
    const response = await policyFetch(`http://127.0.0.1:${port}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'a=b',
    });
    expect([response.status, await response.text()]).toEqual([200, 'internal secret']);
  });
});

describe('policyFetch, as fetch answers', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/slow') return void setTimeout(() => res.end('late'), 5_000).unref();
      if (req.url === '/bomb') {
        // 11 MiB of zeros, gzipped to about 11 KiB.
        res.writeHead(200, { 'content-encoding': 'gzip' });
        return void res.end(gzipSync(Buffer.alloc(11 * 1024 * 1024)));
      }
      if (req.url === '/gzip') {
        res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'application/json' });
        return void res.end(gzipSync('{"access_token":"t"}'));
      }
      res.writeHead(201, { 'x-echo-method': req.method ?? '', 'set-cookie': ['a=1', 'b=2'] });
      req.pipe(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    configureOutboundPolicy(new OutboundPolicy(`127.0.0.1:${port}`));
  });
  afterAll(async () => {
    configureOutboundPolicy(new OutboundPolicy(''));
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the body, answers status, headers and body, and ignores an environment proxy', async () => {
    const proxy = process.env['HTTP_PROXY'];
    process.env['HTTP_PROXY'] = 'http://127.0.0.1:9'; // nothing listens there: used, it would fail
    try {
      const response = await policyFetch(`http://127.0.0.1:${port}/echo`, { method: 'PUT', body: 'payload' });
      expect([response.status, response.headers.get('x-echo-method'), await response.text()]).toEqual([
        201,
        'PUT',
        'payload',
      ]);
      expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    } finally {
      if (proxy === undefined) delete process.env['HTTP_PROXY'];
      else process.env['HTTP_PROXY'] = proxy;
    }
  });

  it('connects only where the policy checked, whatever a caller of policyRequest asks: a socket path, a proxy', async () => {
    // A local service on a Unix socket (as the Docker daemon's): never reachable through the client.
    const socketDir = mkdtempSync(join(tmpdir(), 'outbound-'));
    const socketPath = join(socketDir, 'daemon.sock');
    const daemon = createServer((_req, res) => res.end('daemon secret'));
    await new Promise<void>((resolve) => daemon.listen(socketPath, resolve));
    try {
      const allowed = `http://127.0.0.1:${port}/echo`;
      const viaSocket = await policyRequest<string>({ url: allowed, method: 'POST', data: 'to-the-api', socketPath });
      expect(viaSocket.data).toBe('to-the-api');
      const viaProxy = await policyRequest<string>({
        url: allowed,
        method: 'POST',
        data: 'to-the-api',
        proxy: { protocol: 'http', host: '127.0.0.2', port: 9 },
      });
      expect(viaProxy.data).toBe('to-the-api');
      // And the agents themselves refuse a socket path, for a client that passes one to them.
      const agents = outboundPolicy().httpAgents();
      const direct: unknown = await axios
        .get(allowed, { httpAgent: agents.http, proxy: false, socketPath, timeout: 5_000 })
        .catch((failure: unknown) => failure);
      expect(outboundRefusal(direct)?.why).toBe('a local socket');
    } finally {
      await new Promise((resolve) => daemon.close(resolve));
      rmSync(socketDir, { recursive: true, force: true });
    }
  });

  it('decompresses a gzip body, and refuses one that decompresses past 10 MiB', async () => {
    const response = await policyFetch(`http://127.0.0.1:${port}/gzip`);
    expect(await response.json()).toEqual({ access_token: 't' });
    const bomb: unknown = await policyFetch(`http://127.0.0.1:${port}/bomb`).catch((error: unknown) => error);
    expect(bomb).toBeInstanceOf(TypeError);
    expect((bomb as Error).message).toMatch(/maxContentLength/);
  });

  it('rejects with the signal reason on a timeout, and with a TypeError naming the cause when nothing listens', async () => {
    const timedOut = await policyFetch(`http://127.0.0.1:${port}/slow`, { signal: AbortSignal.timeout(100) }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((timedOut as Error).name).toBe('TimeoutError');
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    configureOutboundPolicy(new OutboundPolicy(`127.0.0.1:${port},127.0.0.1:${closedPort}`));
    const failed = await policyFetch(`http://127.0.0.1:${closedPort}/`).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(TypeError);
    expect((failed as Error).message).toMatch(/^fetch failed: .*ECONNREFUSED/);
  });
});
