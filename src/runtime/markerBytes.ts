/**
 * What a local activity's outcome weighs in its marker, at most: the task cut of runs with
 * SvcContext.taskCutByBody (workflows/svc.ts TASK_RESULT_BYTES). Workflow-safe: no Node imports.
 *
 * A marker carries its outcome as payloads: a result is one payload, the JSON of the value as UTF-8,
 * encrypted (a few dozen bytes more, src/connections/encryption.ts); a failure is one payload for its
 * message and stack (src/runtime/failureConverter.cjs) and one per detail, for itself and each cause.
 * A payload whose encoding is over the claim check's threshold (src/runtime/payloadStorage.ts) leaves
 * the marker for a reference of a few hundred bytes; one at or below it stays whole. So a payload in
 * a marker never weighs more than the threshold, and one whose JSON has more characters than the
 * threshold surely left (UTF-8 takes at least one byte per UTF-16 unit, and encryption only adds).
 *
 * Counted from what was recorded, never from a declared length: a compressed answer's content-length
 * is its compressed size (a hostile review: 150 answers of 40 KiB declaring 2.8 KiB made one task
 * completion of 4.75 MB, which gRPC refused on every retry). What a response's text becomes in JSON
 * is counted per character (a quote or backslash 2 bytes, a control character 6, non-ASCII up to 3),
 * only when the text is short enough to stay inline.
 */
import { isHttpAnswer } from './httpAnswer.js';
import type { RecordedResponse } from './svcTypes.js';

/**
 * Encoded payloads above this size leave the history (the claim check, src/runtime/payloadStorage.ts,
 * which takes it from here: that module is not workflow-safe, this one is). The weights below assume
 * it; the claim check refuses a higher threshold, which they would undercount. An encrypted payload is
 * its body plus a few dozen bytes (createEncryptionCodec), so a body over 64 KiB is over this. A run
 * of 10,000 steps stays far below Temporal's 50 MiB.
 */
export const EXTERNAL_PAYLOAD_THRESHOLD = 64 * 1024;
/** What the claim check's size leaves out of a payload it keeps inline (protobuf framing of its fields). */
const FRAMING = 64;
/** A payload's bytes besides its JSON: metadata (`encoding`, the key id) and the encryption's IV and tag. */
const PAYLOAD_OVERHEAD = 256;
/** A claim's reference (hash and metadata) in place of a payload that left. */
const CLAIM_BYTES = 256;
/**
 * The marker itself (activity id and type, sequence number, attempt, times), without its payloads; its
 * step's summary is weighed apart (src/runtime/stepSummary.ts summaryBytes).
 */
export const MARKER_ENVELOPE = 400;
/** A failure in the chain of causes besides its payloads (type, flags, source). */
const FAILURE_ENVELOPE = 200;
/**
 * What one step's marker weighs at most before its outcome is known, its summary apart: a result is
 * one payload; a failure of the service's activities (src/runtime/http.ts, activities/runtime.ts) is
 * one payload for its message and stack and one for its details (a 4xx's answer), no cause. Each
 * payload at most the claim check's threshold. The gates of SvcContext.cutAtGates (workflows/svc.ts)
 * reserve this for every step in flight; a failure with more payloads (a cause chain) may pass it, which
 * their 1 MiB margin below gRPC's 4 MiB absorbs.
 */
export const STEP_MARKER_BOUND = MARKER_ENVELOPE + 2 * (FAILURE_ENVELOPE + EXTERNAL_PAYLOAD_THRESHOLD + FRAMING);
/** Causes followed at most (the SDK's failures are a few deep). */
const MAX_CAUSES = 32;

/** The UTF-8 bytes of `text` written as a JSON string, at most, quotes included. */
export function jsonStringBytes(text: string): number {
  let bytes = 2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20) bytes += 6;
    else if (c === 0x22 || c === 0x5c) bytes += 2;
    else if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    // A surrogate: half of a 4-byte pair, or alone `\udxxx`.
    else if (c >= 0xd800 && c <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

/** The UTF-8 bytes of text that is JSON already (JSON.stringify escaped what needs it), at most. */
function utf8Bytes(json: string): number {
  let bytes = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    bytes += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 2 : 3;
  }
  return bytes;
}

/** One payload in a marker: surely claim-checked past the threshold in characters, else at most its bytes. */
function payloadBytes(characters: number, bytes: () => number): number {
  if (characters > EXTERNAL_PAYLOAD_THRESHOLD) return CLAIM_BYTES;
  return Math.min(bytes() + PAYLOAD_OVERHEAD, EXTERNAL_PAYLOAD_THRESHOLD + FRAMING);
}

/** A value's payload (the JSON payload converter's), at most. */
function valueBytes(value: unknown): number {
  if (value instanceof Uint8Array) return payloadBytes(value.byteLength, () => value.byteLength);
  if (isRecordedAnswer(value)) {
    // The text is most of it; the rest (status, headers, the request's method and URL) as JSON.
    const { body, ...rest } = value;
    const restJson = JSON.stringify(rest);
    return payloadBytes(body.length + restJson.length, () => jsonStringBytes(body) + utf8Bytes(restJson) + 16);
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    // Not JSON (a cycle, a BigInt): the step would not have been recorded so; the most a payload holds.
    return EXTERNAL_PAYLOAD_THRESHOLD;
  }
  if (json === undefined) return PAYLOAD_OVERHEAD;
  return payloadBytes(json.length, () => utf8Bytes(json));
}

function isRecordedAnswer(value: unknown): value is Extract<RecordedResponse, { body: string }> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { body?: unknown }).body === 'string' &&
    isHttpAnswer(value as RecordedResponse)
  );
}

/** What a step's result weighs in its marker, at most. */
export function resultMarkerBytes(result: unknown): number {
  return MARKER_ENVELOPE + valueBytes(result);
}

/** What a step's failure weighs in its marker, at most: each failure of its chain, message, stack and details. */
export function failureMarkerBytes(failure: unknown): number {
  let bytes = MARKER_ENVELOPE;
  let current: unknown = failure;
  for (let depth = 0; current instanceof Error && depth < MAX_CAUSES; depth++) {
    bytes += FAILURE_ENVELOPE + valueBytes({ message: current.message, stack_trace: current.stack ?? '' });
    const details = (current as { details?: unknown }).details;
    if (Array.isArray(details)) for (const detail of details) bytes += valueBytes(detail);
    current = current.cause;
  }
  return bytes;
}
