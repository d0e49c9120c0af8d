/**
 * The encryption codec of workflow payloads (src/runtime/payloadStorage.ts): binary encryption of the
 * payload's protobuf encoding since issue 31, and the older JSON-in-base64 form still read.
 */
import { randomBytes } from 'node:crypto';
import type { Payload } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import { createEncryptionCodec, ENCRYPTED_ENCODING } from '../../src/runtime/payloadStorage.js';
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
