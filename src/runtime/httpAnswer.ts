/**
 * A request's answer between the activity and the script (issue 31, the JSON hole). The activity reads
 * the body as text and records it so (HttpAnswer); the run's workflow thread parses it here, where the
 * run's own CPU is counted (the lanes, the isolate timeout), not on the worker's main thread, which
 * every environment's tasks and activities share: a 32 MiB answer of `[{},{},…]` held that thread
 * 33.9 s (docs/architecture.md "A request's answer is parsed on the run's thread").
 * Workflow-safe: no Node imports.
 */
import { BASE64_UTF8, type HttpAnswer, type HttpResult, type RecordedResponse } from './svcTypes.js';

export function isHttpAnswer(recorded: RecordedResponse): recorded is HttpAnswer {
  return typeof (recorded as Partial<HttpAnswer>).body === 'string' && !('data' in recorded);
}

/**
 * The body as axios gave it for the same text: JSON asked for (the default) and the text parses, the
 * value; an empty body, ''; text that is not JSON, whatever the content type says, the text itself
 * (axios's `silentJSONParsing`). Anything else (text, stream, base64 of binary) is the text.
 */
export function answerData(body: string, json: boolean): unknown {
  if (!json || body === '') return body;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return body;
  }
}

/** The response as the script sees it (less `config` and `statusText`), from either recorded form. */
export function responseOf(recorded: RecordedResponse): HttpResult {
  if (!isHttpAnswer(recorded)) return recorded;
  const { status, headers, request, json } = recorded;
  return { status, headers, data: answerData(answerText(recorded), json), request };
}

/** The answer's text, as the activity read it, whichever way `body` carries it. */
export function answerText(answer: HttpAnswer): string {
  return answer.encoding === BASE64_UTF8 ? utf8OfBase64(answer.body) : answer.body;
}

// The workflow sandbox has Node's TextDecoder (the SDK injects it) but no atob. Not `fatal`: the bytes
// are what Buffer wrote of a string; `ignoreBOM`: a BOM axios left (a second one) stays in the text.
const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });
const SEXTETS = new Uint8Array(256).fill(255);
for (let i = 0; i < 64; i++) {
  SEXTETS['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;
}

/** Text from the base64 of its UTF-8 bytes, as Buffer writes it (padded, no line breaks). */
export function utf8OfBase64(base64: string): string {
  let end = base64.length;
  while (end > 0 && base64.charCodeAt(end - 1) === 61 /* = */) end--;
  if ((end & 3) === 1) throw new TypeError('the answer body is not base64');
  const bytes = new Uint8Array(Math.floor((end * 3) / 4));
  let out = 0;
  let i = 0;
  for (; i + 4 <= end; i += 4) {
    const n =
      (sextet(base64, i) << 18) | (sextet(base64, i + 1) << 12) | (sextet(base64, i + 2) << 6) | sextet(base64, i + 3);
    bytes[out++] = n >>> 16;
    bytes[out++] = (n >>> 8) & 255;
    bytes[out++] = n & 255;
  }
  if (end - i >= 2) {
    const n =
      (sextet(base64, i) << 18) | (sextet(base64, i + 1) << 12) | (end - i === 3 ? sextet(base64, i + 2) << 6 : 0);
    bytes[out++] = n >>> 16;
    if (end - i === 3) bytes[out++] = (n >>> 8) & 255;
  }
  return utf8.decode(bytes);
}

function sextet(base64: string, at: number): number {
  const value = SEXTETS[base64.charCodeAt(at) & 255]!;
  if (value === 255 || base64.charCodeAt(at) > 255) throw new TypeError('the answer body is not base64');
  return value;
}

/** The body's size in characters, for the history budget: the text when recorded so, else the JSON of the data. */
export function recordedBodyLength(recorded: RecordedResponse): number {
  if (isHttpAnswer(recorded)) return recorded.body.length;
  try {
    return JSON.stringify(recorded.data)?.length ?? 0;
  } catch {
    return 0;
  }
}
