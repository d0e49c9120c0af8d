import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { expiryByAge, type Expiring } from '../db/expiry.js';
import type { Pool } from '../db/pool.js';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { isLocalActivityInput, localInputMark } from './localActivityInput.js';
import { EXTERNAL_PAYLOAD_THRESHOLD } from './markerBytes.js';
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

/** Encoded payloads above this size leave the history: src/runtime/markerBytes.ts, whose weights assume it. */
export { EXTERNAL_PAYLOAD_THRESHOLD };

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

/** What the claim check keeps in memory by default: payloads it stored or read lately, by hash. */
export const CLAIM_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * Recently stored or read payloads by hash, least recently used first out, at most `maxBytes` in all.
 * A claim is most often decoded by the process that just encoded it (a local activity's large result
 * goes from the activity to the workflow in the same worker; a large input the other way), which then
 * needs no query. Content-addressed, so an entry can never be stale.
 *
 * A payload larger than `maxBytes` (an answer near the 32 MiB limit on a body) is handed off instead:
 * kept beside the cache, one at most, until it is read once or the next such payload stored replaces
 * it. Reading it back from Postgres cost the worker's main thread ~0.65 s for a 32 MiB answer (the
 * driver merging and copying the row, then decoding its hex) and a 43 MiB read.
 */
class ClaimCache {
  private readonly entries = new Map<string, Payload>();
  private bytes = 0;
  private handoff: { hash: string; payload: Payload } | undefined;
  constructor(private readonly maxBytes: number) {}

  get(hash: string): Payload | undefined {
    if (this.handoff?.hash === hash) {
      const { payload } = this.handoff;
      this.handoff = undefined;
      return payload;
    }
    const payload = this.entries.get(hash);
    if (payload) {
      this.entries.delete(hash);
      this.entries.set(hash, payload);
    }
    return payload;
  }

  set(hash: string, payload: Payload): void {
    const bytes = size(payload);
    if (bytes > this.maxBytes || this.entries.has(hash)) return;
    this.entries.set(hash, payload);
    this.bytes += bytes;
    for (const [oldest, evicted] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= size(evicted);
    }
  }

  /** A payload just stored: cached, or handed off when larger than the cache (nothing when it is off). */
  stored(hash: string, payload: Payload): void {
    if (size(payload) <= this.maxBytes) this.set(hash, payload);
    else if (this.maxBytes > 0) this.handoff = { hash, payload };
  }
}

export function createClaimCheckCodec({
  db,
  threshold = EXTERNAL_PAYLOAD_THRESHOLD,
  cacheBytes = CLAIM_CACHE_BYTES,
}: {
  db: Pool;
  threshold?: number;
  /** Memory for payloads stored or read lately (ClaimCache); 0 turns it off. */
  cacheBytes?: number;
}): PayloadCodec {
  // Workflow code weighs a step's marker assuming no inline payload is larger (src/runtime/markerBytes.ts).
  if (threshold > EXTERNAL_PAYLOAD_THRESHOLD) {
    throw new Error(`the claim check's threshold is at most ${EXTERNAL_PAYLOAD_THRESHOLD} bytes, got ${threshold}`);
  }
  const cache = new ClaimCache(cacheBytes);
  return {
    async encode(payloads) {
      return Promise.all(
        payloads.map(async (payload) => {
          // A local activity's input never reaches a history (src/runtime/localActivityInput.ts).
          if (size(payload) <= threshold || isLocalActivityInput(payload)) return payload;
          const hash = payloadHash(payload);
          const metadata = Object.fromEntries(
            Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
          );
          // Content-addressed: the same payload stored twice (a replayed step) is one row, whose
          // last_written_at moves (retention keeps a blob a history written since may refer to).
          await db.query(
            'INSERT INTO payload_blobs (hash, metadata, data) VALUES ($1, $2, $3) ON CONFLICT (hash) DO UPDATE SET last_written_at = now()',
            // node-postgres sends any typed array as a Buffer over the same bytes (pg/lib/utils.js
            // prepareValue, pg 8.23): no copy, which for 43 MiB took the main thread ~60 ms.
            [hash, JSON.stringify(metadata), payload.data ?? new Uint8Array()],
          );
          cache.stored(hash, payload);
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
          const cached = cache.get(hash);
          if (cached) return cached;
          const result = await db.query<{ metadata: Record<string, string>; data: Buffer }>(
            'SELECT metadata, data FROM payload_blobs WHERE hash = $1',
            [hash],
          );
          const row = result.rows[0];
          if (!row) throw new Error(`claimed payload ${hash} is missing from payload_blobs`);
          const stored = {
            metadata: Object.fromEntries(
              Object.entries(row.metadata).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, 'base64'))]),
            ),
            data: new Uint8Array(row.data),
          };
          cache.set(hash, stored);
          return stored;
        }),
      );
    },
  };
}

/**
 * The claim check's table (payload_blobs) as retention sees it. `expireBefore` deletes the blobs last
 * written before `cutoff`; which cutoff is safe (no history Temporal keeps can refer to an older blob)
 * is retention's decision (src/runtime/retention.ts).
 */
export function createPayloadBlobStore({ db }: { db: Pool }): Expiring {
  return {
    expireBefore: expiryByAge(db, 'payload_blobs', 'last_written_at', ['hash']),
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
  encryptBytes(plaintext: Uint8Array, purpose: 'temporal_payload'): Uint8Array;
  decryptBytes(envelope: Uint8Array, purpose: 'temporal_payload'): Uint8Array;
}

const PayloadMessage = proto.temporal.api.common.v1.Payload;
// The first bytes of a binary ciphertext (Encryptor.encryptBytes); a text one starts `v1.`.
const BINARY_CIPHERTEXT = encoder.encode('v2.');

function isBinaryCiphertext(data: Uint8Array): boolean {
  return data.byteLength > BINARY_CIPHERTEXT.byteLength && BINARY_CIPHERTEXT.every((byte, at) => data[at] === byte);
}

/**
 * Each payload becomes its protobuf encoding (metadata and data, as Temporal itself encodes a
 * Payload), encrypted as bytes: about 40 bytes over the payload. Until issue 31 a payload was encrypted
 * as JSON with base64 inside and base64 outside (1.78× its size, and four conversions each way);
 * payloads of that form, in the histories of older runs, still decode.
 */
export function createEncryptionCodec(encryptor: PayloadCipher): PayloadCodec {
  return {
    async encode(payloads) {
      return payloads.map((payload) => {
        // A step's name, built and redacted by workflow code: the Web UI shows it as it is.
        const clear = clearSummary(payload);
        if (clear) return clear;
        const plain = PayloadMessage.encode({
          metadata: payload.metadata ?? {},
          data: payload.data ?? new Uint8Array(),
        }).finish();
        return {
          metadata: {
            encoding: encoder.encode(ENCRYPTED_ENCODING),
            // Outside the ciphertext, for the claim check to leave it inline: says nothing of the content.
            ...(isLocalActivityInput(payload) ? localInputMark() : {}),
          },
          data: encryptor.encryptBytes(plain, 'temporal_payload'),
        };
      });
    },
    async decode(payloads) {
      return payloads.map((payload) => {
        const encoding = payload.metadata?.['encoding'];
        if (!encoding || decoder.decode(encoding) !== ENCRYPTED_ENCODING) return payload;
        const data = payload.data ?? new Uint8Array();
        if (isBinaryCiphertext(data)) {
          const message = PayloadMessage.decode(encryptor.decryptBytes(data, 'temporal_payload'));
          // Each in an ArrayBuffer of its own: the decoded fields are views into the decrypted bytes
          // (or into Node's shared 8 KiB pool), and a view sent to a workflow thread (postMessage)
          // carries its whole buffer along, once per view.
          return {
            metadata: Object.fromEntries(
              Object.entries(message.metadata).map(([key, value]) => [key, new Uint8Array(value)]),
            ),
            data: new Uint8Array(message.data),
          };
        }
        const plain = JSON.parse(encryptor.decrypt(decoder.decode(data), 'temporal_payload')) as {
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
