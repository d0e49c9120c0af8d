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

/** A step summary that the encryption codec leaves readable. Typed as the string Temporal's options take. */
export function readableSummary(text: string): string {
  const payload: Payload = {
    metadata: {
      encoding: encoder.encode('json/plain'),
      [READABLE_SUMMARY_KEY]: encoder.encode(READABLE_SUMMARY_VALUE),
    },
    data: encoder.encode(JSON.stringify(text)),
  };
  // RawValue bypasses the payload converter (the SDK's own escape hatch); the codecs still see it.
  return RawValue.fromPayload(payload) as unknown as string;
}

export function isReadableSummary(payload: Payload): boolean {
  const marker = payload.metadata?.[READABLE_SUMMARY_KEY];
  return marker !== undefined && marker !== null && decoder.decode(marker) === READABLE_SUMMARY_VALUE;
}

const REDACTED = '…';
// Query parameters whose values are credentials by their name.
const SENSITIVE_NAME = /key|token|secret|pass|auth|sig|session|code|credential|cookie|jwt|bearer|otp|pin/i;
// Longer values are opaque enough to be a credential (a token pasted in a path, a signed cursor).
const LONGEST_SHOWN_VALUE = 40;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SUMMARY_LENGTH = 200;

function shownSegment(segment: string): string {
  if (segment.length <= LONGEST_SHOWN_VALUE || UUID.test(segment)) return segment;
  return REDACTED;
}

function shownValue(name: string, value: string): string {
  if (SENSITIVE_NAME.test(name) || value.length > LONGEST_SHOWN_VALUE) return REDACTED;
  return value;
}

/**
 * `GET /issues?page=3`: the request's method, path and query, with what may carry a secret redacted
 * (values of parameters named like credentials, long path segments and values, user info of an
 * absolute URL). Headers and bodies never appear.
 */
export function requestSummary(method: string, endpoint: string, params: Record<string, unknown> | undefined): string {
  const queryStart = endpoint.indexOf('?');
  let path = queryStart === -1 ? endpoint : endpoint.slice(0, queryStart);
  const query: [string, string][] = [];
  if (queryStart !== -1) {
    for (const part of endpoint.slice(queryStart + 1).split('&')) {
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
    .map((segment, index) => (index === 0 && /:$/.test(segment) ? segment : shownSegment(segment)))
    .join('/');
  const shownQuery = query.map(([name, value]) => (value === '' ? name : `${name}=${shownValue(name, value)}`));
  const summary = `${method} ${path}${shownQuery.length > 0 ? `?${shownQuery.join('&')}` : ''}`;
  return summary.length > SUMMARY_LENGTH ? `${summary.slice(0, SUMMARY_LENGTH - 1)}…` : summary;
}
