/**
 * Step names that stay readable in Temporal's Web UI and `temporal workflow show` while every payload
 * is encrypted (src/runtime/payloadStorage.ts): a step's summary is handed to Temporal as a ready-made
 * payload that carries READABLE_SUMMARY_KEY, and the encryption codec passes exactly those through.
 * Only workflow code builds them (a RawValue cannot cross into a script's realm, which sees JSON only),
 * and what they say is redacted here first. Workflow-safe: no Node imports.
 */
import { RawValue, type Payload } from '@temporalio/common';

/** Payload metadata key of a readable step summary; its value is READABLE_SUMMARY_VALUE. */
export const READABLE_SUMMARY_KEY = 'service-readable';
const READABLE_SUMMARY_VALUE = 'step-summary';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A step summary that the encryption codec leaves readable. Typed as the string Temporal's options take.
 * Whatever the caller built it from, every word that looks like a credential is redacted (see
 * shownWord) and the whole is cut at SUMMARY_LENGTH: a summary is in clear in the history, so it must
 * not become a way to put a script's data there (an action name, say, is whatever the script passed).
 */
export function readableSummary(text: string): string {
  const payload: Payload = {
    metadata: {
      encoding: encoder.encode('json/plain'),
      [READABLE_SUMMARY_KEY]: encoder.encode(READABLE_SUMMARY_VALUE),
    },
    data: encoder.encode(JSON.stringify(scrubbed(text))),
  };
  // RawValue bypasses the payload converter (the SDK's own escape hatch); the codecs still see it.
  return RawValue.fromPayload(payload) as unknown as string;
}

/**
 * What a summary made by readableSummary weighs in its step's marker, at most: its payload (JSON and
 * metadata), encrypted when the codec does not leave it in clear (a summary of control characters is
 * written 6 bytes each, past clearSummary's limit: a review found 1,288 bytes per step).
 */
export function summaryBytes(summary: string): number {
  const payload = (summary as unknown as RawValue).payload;
  let bytes = payload.data?.byteLength ?? 0;
  for (const [key, value] of Object.entries(payload.metadata ?? {})) bytes += key.length + (value?.byteLength ?? 0);
  // The encryption's key id, IV and tag, and the payload's own framing, when it is not left clear.
  return bytes + 128;
}

export function isReadableSummary(payload: Payload): boolean {
  const marker = payload.metadata?.[READABLE_SUMMARY_KEY];
  return marker !== undefined && marker !== null && decoder.decode(marker) === READABLE_SUMMARY_VALUE;
}

/**
 * The payload the encryption codec may leave in clear: a readable summary that is a short JSON string
 * and already scrubbed (a backstop: whatever built it, nothing else passes). Undefined: encrypt it.
 */
export function clearSummary(payload: Payload): Payload | undefined {
  if (!isReadableSummary(payload) || !payload.data || payload.data.byteLength > SUMMARY_LENGTH * 4 + 2)
    return undefined;
  let text: unknown;
  try {
    text = JSON.parse(decoder.decode(payload.data));
  } catch {
    return undefined;
  }
  if (typeof text !== 'string' || scrubbed(text) !== text) return undefined;
  return payload;
}

const REDACTED = '…';
// Query parameters whose values are credentials by their name (OpenWeatherMap's `appid` is its API key).
const SENSITIVE_NAME =
  /key|token|secret|pass|pwd|auth|sig|session|code|credential|cookie|jwt|bearer|otp|pin|appid|hmac|nonce|private/i;
// Longer values are opaque enough to be a credential (a token pasted in a path, a signed cursor).
const LONGEST_SHOWN_VALUE = 40;
// From this length a word that mixes letters and digits reads as a generated token (a Slack webhook's
// 24-character secret, a 32-digit hex API key, `sk_live_…`), not as a name.
const SHORTEST_TOKEN = 16;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_DATE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const SUMMARY_LENGTH = 200;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** The word as it is, or REDACTED when it may be a credential: long, or a letters-and-digits token. */
function shownWord(word: string): string {
  const plain = decoded(word);
  if (UUID.test(plain) || ISO_DATE.test(plain)) return word;
  if (plain.length > LONGEST_SHOWN_VALUE) return REDACTED;
  const digits = plain.replace(/[^0-9]/g, '').length;
  const letters = plain.replace(/[^A-Za-z]/g, '').length;
  if (plain.length >= SHORTEST_TOKEN && digits >= 2 && letters >= 2) return REDACTED;
  return word;
}

function shownValue(name: string, value: string): string {
  return SENSITIVE_NAME.test(decoded(name)) ? REDACTED : shownWord(value);
}

/** Every word of `text` that may be a credential redacted, and the whole cut at SUMMARY_LENGTH. */
export function scrubbed(text: string): string {
  const shown = text
    .split(/([\s/?&=#,;:@]+)/)
    .map((part, index) => (index % 2 === 1 || part === '' || part === REDACTED ? part : shownWord(part)))
    .join('');
  return shown.length > SUMMARY_LENGTH ? `${shown.slice(0, SUMMARY_LENGTH - 1)}…` : shown;
}

/**
 * `GET /issues?page=3`: the request's method, path and query, with what may carry a secret redacted
 * (values of parameters named like credentials, long path segments and values, user info of an
 * absolute URL). Headers and bodies never appear.
 */
export function requestSummary(method: string, endpoint: string, params: Record<string, unknown> | undefined): string {
  // A fragment is never sent; it can still carry a token (`#access_token=…`).
  const fragment = endpoint.indexOf('#');
  const sent = fragment === -1 ? endpoint : endpoint.slice(0, fragment);
  const queryStart = sent.indexOf('?');
  let path = queryStart === -1 ? sent : sent.slice(0, queryStart);
  const query: [string, string][] = [];
  if (queryStart !== -1) {
    for (const part of sent.slice(queryStart + 1).split('&')) {
      if (part === '') continue;
      const equals = part.indexOf('=');
      query.push(equals === -1 ? [part, ''] : [part.slice(0, equals), part.slice(equals + 1)]);
    }
  }
  for (const [name, value] of Object.entries(params ?? {})) query.push([name, String(value)]);
  // An absolute URL may carry user:password@.
  path = path.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, `$1${REDACTED}@`);
  path = path
    .split('/')
    .map((segment, index) => (index === 0 && /:$/.test(segment) ? segment : shownWord(segment)))
    .join('/');
  // A name is shown as a word too: `?<token>` has no value, `{ [token]: 1 }` puts it in the name.
  const shownQuery = query.map(([name, value]) =>
    value === '' ? shownWord(name) : `${shownWord(name)}=${shownValue(name, value)}`,
  );
  const summary = `${method} ${path}${shownQuery.length > 0 ? `?${shownQuery.join('&')}` : ''}${fragment === -1 ? '' : `#${REDACTED}`}`;
  return summary.length > SUMMARY_LENGTH ? `${summary.slice(0, SUMMARY_LENGTH - 1)}…` : summary;
}
