/**
 * The task cut's weight of a step (src/runtime/markerBytes.ts) against what the service's own data
 * converter makes of the same outcome: the JSON payload converter, the failure converter, encryption,
 * and the claim check's threshold. The weight must never be below the bytes the marker carries.
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import {
  ApplicationFailure,
  defaultPayloadConverter,
  type FailureConverter,
  type RawValue,
  type Payload,
} from '@temporalio/common';
import { encodeFailure } from '@temporalio/common/lib/internal-non-workflow/codec-helpers.js';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { Encryptor } from '../connections/encryption.js';
import { failureMarkerBytes, MARKER_ENVELOPE, resultMarkerBytes } from './markerBytes.js';
import { readableSummary, summaryBytes } from './stepSummary.js';
import { createEncryptionCodec, EXTERNAL_PAYLOAD_THRESHOLD } from './payloadStorage.js';
import type { HttpAnswer } from './svcTypes.js';

const { failureConverter } = createRequire(import.meta.url)('./failureConverter.cjs') as {
  failureConverter: FailureConverter;
};

const encryption = createEncryptionCodec(new Encryptor([randomBytes(32)]));

function payloadSize(payload: Payload): number {
  return proto.temporal.api.common.v1.Payload.encode(payload).finish().length;
}

// What the claim check leaves in the marker for a payload over its threshold (a hash and its encoding).
const claimCodec = {
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) =>
      payloadSize(payload) <= EXTERNAL_PAYLOAD_THRESHOLD
        ? payload
        : { metadata: { encoding: Buffer.from('binary/postgres-claim') }, data: Buffer.from('f'.repeat(64)) },
    );
  },
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads;
  },
};

async function resultInMarker(value: unknown): Promise<number> {
  const [encrypted] = await encryption.encode([defaultPayloadConverter.toPayload(value)]);
  const [stored] = await claimCodec.encode([encrypted!]);
  return payloadSize(stored!);
}

async function failureInMarker(error: Error): Promise<number> {
  const failure = failureConverter.errorToFailure(error, defaultPayloadConverter);
  const encoded = await encodeFailure([encryption, claimCodec], failure);
  return proto.temporal.api.failure.v1.Failure.encode(encoded).finish().length;
}

const answer = (body: string, headers: Record<string, string> = {}): HttpAnswer => ({
  status: 200,
  headers: { 'content-type': 'application/json', 'content-length': '2860', ...headers },
  request: { method: 'GET', url: 'https://api.example.test/v1/items?page=3' },
  body,
  json: true,
});
const page = (records: number) =>
  JSON.stringify({
    items: Array.from({ length: records }, (_, i) => ({ id: `item-${i}`, name: `Item "${i}"`, done: i % 2 === 0 })),
    next: 'cursor-xyz',
  });

describe('what a step weighs in its marker', () => {
  const results: [string, unknown][] = [
    ['an ASCII JSON page of ~40 KB', answer(page(700))],
    ['text of 20,000 € (3 bytes each in UTF-8)', answer('€'.repeat(20_000))],
    ['control characters written \\u0001 in JSON', answer('\u0001'.repeat(10_000))],
    ['control characters whose JSON passes the threshold', answer('\u0001'.repeat(12_000))],
    ['emoji (surrogate pairs)', answer('😀'.repeat(8_000))],
    ['a lone surrogate per character', answer('\ud800'.repeat(9_000))],
    ['a 15 KB header and an empty body', answer('{}', { 'x-big': 'y'.repeat(15_000) })],
    ['a body past the threshold (claim-checked)', answer('a'.repeat(70_000))],
    ['metadata of 60 KB of non-ASCII text', { notes: Array.from({ length: 1000 }, () => 'ü€'.repeat(10)) }],
    ['a small summary', { added: 3, updated: 0, deleted: 0 }],
    ['no value', undefined],
    ['an answer of the older form (parsed data)', { status: 200, headers: {}, data: JSON.parse(page(300)) }],
  ];
  for (const [name, value] of results) {
    it(`weighs no less than its marker carries: ${name}`, async () => {
      expect(resultMarkerBytes(value) - MARKER_ENVELOPE).toBeGreaterThanOrEqual(await resultInMarker(value));
    });
  }

  it('weighs an ordinary JSON page close to what it takes (the cut is not paid for twice)', async () => {
    const value = answer(page(700));
    const carried = await resultInMarker(value);
    expect(carried).toBeGreaterThan(30_000);
    expect(resultMarkerBytes(value)).toBeLessThan(carried * 1.2);
  });

  for (const [name, text] of [
    ['an ordinary request', 'GET /v1/items?page=3'],
    ['control characters in the path (6 bytes each in JSON, encrypted)', `GET /${'\u0001'.repeat(300)}`],
    ['CJK text', `GET /${'漢'.repeat(300)}`],
  ] as const) {
    it(`weighs a step's summary no less than it takes: ${name}`, async () => {
      const summary = readableSummary(text);
      const [stored] = await encryption.encode([(summary as unknown as RawValue).payload]);
      expect(summaryBytes(summary)).toBeGreaterThanOrEqual(payloadSize(stored!));
    });
  }

  it('weighs a failure by its message, stack and details (a 4xx with its body), causes included', async () => {
    const details = { kind: 'response', response: answer('€'.repeat(20_000)) };
    const failure = ApplicationFailure.create({
      message: 'the API answered 404',
      type: 'RequestError',
      details: [details],
      cause: ApplicationFailure.create({ message: 'ö'.repeat(5_000), details: ['ü'.repeat(15_000)] }),
    });
    const carried = await failureInMarker(failure);
    expect(carried).toBeGreaterThan(60_000);
    expect(failureMarkerBytes(failure) - MARKER_ENVELOPE).toBeGreaterThanOrEqual(carried);
  });
});
