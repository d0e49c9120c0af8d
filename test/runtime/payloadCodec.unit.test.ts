/**
 * The encryption codec of workflow payloads (src/runtime/payloadStorage.ts): binary encryption of the
 * payload's protobuf encoding since issue 31, and the older JSON-in-base64 form still read.
 */
import { randomBytes } from 'node:crypto';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import type { Pool } from '../../src/db/pool.js';
import { localActivityInput, serializedJson } from '../../src/runtime/localActivityInput.js';
import {
  CLAIM_ENCODING,
  createClaimCheckCodec,
  createEncryptionCodec,
  ENCRYPTED_ENCODING,
} from '../../src/runtime/payloadStorage.js';
import { readableSummary } from '../../src/runtime/stepSummary.js';

const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
const jsonPayload = (value: unknown): Payload => ({
  metadata: { encoding: Buffer.from('json/plain'), extra: Buffer.from([0, 255, 7]) },
  data: Buffer.from(JSON.stringify(value)),
});

describe('payload encryption codec', () => {
  const encryptor = new Encryptor([randomBytes(32)]);
  const codec = createEncryptionCodec(encryptor);

  it('round-trips metadata and data, and the history sees neither', async () => {
    const secret = { token: 'ghp_secretvalue123456789', list: Array.from({ length: 50 }, (_, i) => `item ${i}`) };
    const [encoded] = await codec.encode([jsonPayload(secret)]);
    expect(text(encoded!.metadata!['encoding'])).toBe(ENCRYPTED_ENCODING);
    expect(Object.keys(encoded!.metadata!)).toEqual(['encoding']);
    expect(text(encoded!.data)).not.toContain('ghp_secretvalue');
    expect(text(encoded!.data)).not.toContain('item 1');
    const [decoded] = await codec.decode([encoded!]);
    expect(text(decoded!.metadata!['encoding'])).toBe('json/plain');
    expect([...decoded!.metadata!['extra']!]).toEqual([0, 255, 7]);
    expect(JSON.parse(text(decoded!.data))).toEqual(secret);
  });

  it('adds about 40 bytes where the earlier form took 1.78 times the payload', async () => {
    const big = jsonPayload({ body: randomBytes(60_000).toString('base64') });
    const [encoded] = await codec.encode([big]);
    const overhead = encoded!.data!.byteLength - big.data!.byteLength;
    expect(overhead).toBeGreaterThan(0);
    expect(overhead).toBeLessThan(100);
  });

  it('still decodes payloads of the earlier form (JSON with base64 inside, text ciphertext)', async () => {
    const original = jsonPayload({ n: 1, s: 'é✓' });
    const earlier = {
      metadata: { encoding: Buffer.from(ENCRYPTED_ENCODING) },
      data: Buffer.from(
        encryptor.encrypt(
          JSON.stringify({
            metadata: Object.fromEntries(
              Object.entries(original.metadata!).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
            ),
            data: Buffer.from(original.data!).toString('base64'),
          }),
          'temporal_payload',
        ),
      ),
    };
    const [decoded] = await codec.decode([earlier]);
    expect(JSON.parse(text(decoded!.data))).toEqual({ n: 1, s: 'é✓' });
    expect([...decoded!.metadata!['extra']!]).toEqual([0, 255, 7]);
  });

  it('refuses an altered payload, one of an unknown key, and another purpose', async () => {
    const [encoded] = await codec.encode([jsonPayload({ a: 1 })]);
    const altered = Buffer.from(encoded!.data!);
    altered[altered.length - 1] = altered[altered.length - 1]! ^ 1;
    await expect(codec.decode([{ ...encoded!, data: altered }])).rejects.toThrow(/failed authentication/);
    const stranger = createEncryptionCodec(new Encryptor([randomBytes(32)]));
    await expect(stranger.decode([encoded!])).rejects.toThrow(/not among the configured keys/);
    expect(() => encryptor.decryptBytes(encoded!.data!, 'step_outcome')).toThrow(/failed authentication/);
    expect(() => encryptor.decryptBytes(Buffer.from('v2.short'), 'temporal_payload')).toThrow(/ciphertext format/);
  });

  it('decrypts with an older key of the ring (rotation)', async () => {
    const old = new Encryptor([randomBytes(32)]);
    const [encoded] = await createEncryptionCodec(old).encode([jsonPayload('before rotation')]);
    const rotated = createEncryptionCodec(new Encryptor([randomBytes(32), old.keys[0]!.key]));
    const [decoded] = await rotated.decode([encoded!]);
    expect(JSON.parse(text(decoded!.data))).toBe('before rotation');
  });

  it('leaves a readable step summary in clear', async () => {
    const summary = readableSummary('GET /issues?page=3') as unknown as { payload: Payload };
    const [encoded] = await codec.encode([summary.payload]);
    expect(JSON.parse(text(encoded!.data))).toBe('GET /issues?page=3');
  });
});

describe("a local activity's input (src/runtime/localActivityInput.ts)", () => {
  const encryptor = new Encryptor([randomBytes(32)]);
  const encryption = createEncryptionCodec(encryptor);
  // The claim check's database: every statement recorded, claims answered from what was inserted.
  const statements: string[] = [];
  const db = {
    query: (sql: string) => {
      statements.push(sql);
      return Promise.resolve({ rows: [], rowCount: 1 });
    },
  } as unknown as Pool;
  const claimCheck = createClaimCheckCodec({ db, threshold: 1024 });
  const encode = async (payload: Payload) => (await claimCheck.encode(await encryption.encode([payload])))[0]!;
  const decode = async (payload: Payload) => (await encryption.decode(await claimCheck.decode([payload])))[0]!;
  const batch = {
    model: 'Record',
    records: Array.from({ length: 200 }, (_, i) => ({ id: `r${i}`, token: 'ghp_secretvalue123456789' })),
  };
  const asPayload = (value: unknown) => defaultPayloadConverter.toPayload(value);

  it('stays inline (no payload_blobs write) but encrypted, and decodes to the same value', async () => {
    const marked = asPayload(localActivityInput(batch));
    const encoded = await encode(marked);
    expect(statements).toEqual([]);
    expect(text(encoded.metadata!['encoding'])).toBe(ENCRYPTED_ENCODING);
    expect(encoded.data!.byteLength).toBeGreaterThan(1024);
    expect(text(encoded.data)).not.toContain('ghp_secretvalue');
    expect(text(encoded.data)).not.toContain('Record');
    expect(defaultPayloadConverter.fromPayload(await decode(encoded))).toEqual(batch);
  });

  it('is what the default converter makes of the value, apart from the mark', () => {
    const plain = asPayload(batch);
    const marked = asPayload(localActivityInput(batch));
    expect(text(marked.data)).toBe(text(plain.data));
    expect(text(marked.metadata!['encoding'])).toBe('json/plain');
    expect(localActivityInput(undefined)).toBeUndefined();
  });

  it("a request's answer serialized once (serializedJson) is the default converter's payload, byte for byte", () => {
    const answer = { status: 200, headers: { 'content-type': 'application/json' }, data: batch };
    const once = asPayload(serializedJson(JSON.stringify(answer)));
    const plain = asPayload(answer);
    expect(Object.keys(once.metadata!)).toEqual(Object.keys(plain.metadata!));
    expect(text(once.metadata!['encoding'])).toBe(text(plain.metadata!['encoding']));
    expect(Buffer.from(once.data!).equals(Buffer.from(plain.data!))).toBe(true);
  });

  it('an unmarked payload of the same size (any other activity input, any result) is claim-checked', async () => {
    statements.length = 0;
    const encoded = await encode(asPayload(batch));
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/INSERT INTO payload_blobs/);
    expect(text(encoded.metadata!['encoding'])).toBe(CLAIM_ENCODING);
  });
});

describe("the claim check's memory of what it stored (ClaimCache)", () => {
  // The claim check's database: every statement recorded, a SELECT answered with what was inserted.
  function recordingDb() {
    const statements: string[] = [];
    const rows = new Map<string, { metadata: Record<string, string>; data: Buffer }>();
    const db = {
      query: (sql: string, params: [string, string, Uint8Array]) => {
        statements.push(sql.split(' ')[0]!);
        if (sql.startsWith('INSERT')) {
          rows.set(params[0], {
            metadata: JSON.parse(params[1]) as Record<string, string>,
            data: Buffer.from(params[2]),
          });
          return Promise.resolve({ rows: [], rowCount: 1 });
        }
        const row = rows.get(params[0]);
        return Promise.resolve({ rows: row ? [row] : [], rowCount: row ? 1 : 0 });
      },
    } as unknown as Pool;
    return { db, statements };
  }
  const payload = (bytes: number): Payload => ({
    metadata: { encoding: Buffer.from('binary/plain') },
    data: new Uint8Array(randomBytes(bytes)),
  });

  it('hands a payload larger than the cache to its first read, then reads it from Postgres', async () => {
    const { db, statements } = recordingDb();
    const codec = createClaimCheckCodec({ db, threshold: 1024, cacheBytes: 64 * 1024 });
    const large = payload(100 * 1024);
    const [claim] = await codec.encode([large]);
    expect(statements).toEqual(['INSERT']);
    const [first] = await codec.decode([claim!]);
    expect(statements).toEqual(['INSERT']);
    expect(Buffer.from(first!.data!).equals(Buffer.from(large.data!))).toBe(true);
    const [second] = await codec.decode([claim!]);
    expect(statements).toEqual(['INSERT', 'SELECT']);
    expect(Buffer.from(second!.data!).equals(Buffer.from(large.data!))).toBe(true);
  });

  it('keeps only the last such payload, and none with the cache off', async () => {
    const { db, statements } = recordingDb();
    const codec = createClaimCheckCodec({ db, threshold: 1024, cacheBytes: 64 * 1024 });
    const [one] = await codec.encode([payload(100 * 1024)]);
    const [two] = await codec.encode([payload(100 * 1024)]);
    await codec.decode([one!]);
    await codec.decode([two!]);
    expect(statements).toEqual(['INSERT', 'INSERT', 'SELECT']);

    const off = recordingDb();
    const uncached = createClaimCheckCodec({ db: off.db, threshold: 1024, cacheBytes: 0 });
    const [claim] = await uncached.encode([payload(100 * 1024)]);
    await uncached.decode([claim!]);
    expect(off.statements).toEqual(['INSERT', 'SELECT']);
  });
});
