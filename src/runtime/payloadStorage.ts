import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { Pool } from '../db/pool.js';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { clearSummary } from './stepSummary.js';

/**
 * The claim check in Postgres: a payload above the threshold (a large HTTP response, a large batch, a
 * large bundle) is written to payload_blobs and Temporal's history keeps only its hash. It is a
 * payload codec, so it runs outside the workflow sandbox, on the worker and on every client, and is
 * transparent to workflow code. Both the worker and every client that starts runs or reads their
 * results must use createDataConverter.
 *
 * Why not SDK 1.24's DataConverter.externalStorage: it is experimental, and in this install it fails
 * on every offload with "type must be a Type" (@temporalio/common and @temporalio/proto each carry a
 * copy of protobufjs 8, and the reference payload is encoded across the two). docs/architecture.md.
 */

/** Payloads above this size leave the history. 128 KiB keeps a run of 10,000 steps far below 50 MiB. */
export const EXTERNAL_PAYLOAD_THRESHOLD = 128 * 1024;

/** Metadata encoding of a claim: the payload's data is the hash of the stored payload. */
export const CLAIM_ENCODING = 'binary/postgres-claim';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function size(payload: Payload): number {
  let total = payload.data?.byteLength ?? 0;
  for (const [key, value] of Object.entries(payload.metadata ?? {})) total += key.length + value.byteLength;
  return total;
}

function payloadHash(payload: Payload): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(payload.metadata ?? {}).sort()) {
    hash
      .update(key)
      .update('\0')
      .update(payload.metadata?.[key] ?? new Uint8Array())
      .update('\0');
  }
  hash.update(payload.data ?? new Uint8Array());
  return hash.digest('hex');
}

export function createClaimCheckCodec({
  db,
  threshold = EXTERNAL_PAYLOAD_THRESHOLD,
}: {
  db: Pool;
  threshold?: number;
}): PayloadCodec {
  return {
    async encode(payloads) {
      return Promise.all(
        payloads.map(async (payload) => {
          if (size(payload) <= threshold) return payload;
          const hash = payloadHash(payload);
          const metadata = Object.fromEntries(
            Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
          );
          // Content-addressed: the same payload stored twice (a replayed step) is one row, whose
          // last_written_at moves (retention keeps a blob a history written since may refer to).
          await db.query(
            'INSERT INTO payload_blobs (hash, metadata, data) VALUES ($1, $2, $3) ON CONFLICT (hash) DO UPDATE SET last_written_at = now()',
            [hash, JSON.stringify(metadata), Buffer.from(payload.data ?? new Uint8Array())],
          );
          return { metadata: { encoding: encoder.encode(CLAIM_ENCODING) }, data: encoder.encode(hash) };
        }),
      );
    },
    async decode(payloads) {
      return Promise.all(
        payloads.map(async (payload) => {
          const encoding = payload.metadata?.['encoding'];
          if (!encoding || decoder.decode(encoding) !== CLAIM_ENCODING) return payload;
          const hash = decoder.decode(payload.data ?? new Uint8Array());
          const result = await db.query<{ metadata: Record<string, string>; data: Buffer }>(
            'SELECT metadata, data FROM payload_blobs WHERE hash = $1',
            [hash],
          );
          const row = result.rows[0];
          if (!row) throw new Error(`claimed payload ${hash} is missing from payload_blobs`);
          return {
            metadata: Object.fromEntries(
              Object.entries(row.metadata).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, 'base64'))]),
            ),
            data: new Uint8Array(row.data),
          };
        }),
      );
    },
  };
}

/** Metadata encoding of an encrypted payload: its data is the Encryptor's ciphertext of the payload. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';

/**
 * Encrypts every payload with the service's key before it reaches Temporal: a script's
 * `svc.getConnection()` result holds credentials, and API responses hold users' data, and neither may
 * sit in clear in a workflow history. Step names (summaries, src/runtime/stepSummary.ts) stay
 * readable in the Web UI; payloads show as ciphertext there.
 */
/**
 * What the codec needs of the service's Encryptor (src/connections/encryption.ts), declared here so that
 * src/runtime does not import src/connections.
 */
export interface PayloadCipher {
  encrypt(plaintext: string, purpose: 'temporal_payload'): string;
  decrypt(ciphertext: string, purpose: 'temporal_payload'): string;
}

export function createEncryptionCodec(encryptor: PayloadCipher): PayloadCodec {
  return {
    async encode(payloads) {
      return payloads.map((payload) => {
        // A step's name, built and redacted by workflow code: the Web UI shows it as it is.
        const clear = clearSummary(payload);
        if (clear) return clear;
        const plain = JSON.stringify({
          metadata: Object.fromEntries(
            Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
          ),
          data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
        });
        return {
          metadata: { encoding: encoder.encode(ENCRYPTED_ENCODING) },
          data: encoder.encode(encryptor.encrypt(plain, 'temporal_payload')),
        };
      });
    },
    async decode(payloads) {
      return payloads.map((payload) => {
        const encoding = payload.metadata?.['encoding'];
        if (!encoding || decoder.decode(encoding) !== ENCRYPTED_ENCODING) return payload;
        const plain = JSON.parse(
          encryptor.decrypt(decoder.decode(payload.data ?? new Uint8Array()), 'temporal_payload'),
        ) as {
          metadata: Record<string, string>;
          data: string;
        };
        return {
          metadata: Object.fromEntries(
            Object.entries(plain.metadata).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, 'base64'))]),
          ),
          data: new Uint8Array(Buffer.from(plain.data, 'base64')),
        };
      });
    },
  };
}

/**
 * The module exporting the service's failure converter (encodeCommonAttributes), for workers, clients and
 * the workflow bundle. From the package root, not beside this module: the same file whether the service
 * runs from src/ or from its build in dist/ (the workflow bundle's manifest names it).
 */
export const FAILURE_CONVERTER_PATH = join(PACKAGE_ROOT, 'src', 'runtime', 'failureConverter.cjs');

/**
 * The data converter of the worker and of every client that starts runs or reads their results. With
 * an encryptor (the service always passes one) every payload is encrypted first, then a large one is
 * claim-checked (so stored blobs are ciphertext too).
 */
export function createDataConverter({
  db,
  threshold,
  encryptor,
}: {
  db: Pool;
  threshold?: number;
  encryptor?: PayloadCipher;
}) {
  const claimCheck = createClaimCheckCodec({ db, ...(threshold === undefined ? {} : { threshold }) });
  return {
    // Failure messages and stack traces are encoded as payloads, so the codecs encrypt them too.
    failureConverterPath: FAILURE_CONVERTER_PATH,
    payloadCodecs: encryptor ? [createEncryptionCodec(encryptor), claimCheck] : [claimCheck],
  };
}
