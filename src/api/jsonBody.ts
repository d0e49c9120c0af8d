/**
 * What a JSON body costs the API process. Parsing and validating a body runs on the one event loop every
 * environment's requests share, and its cost grows with the number of values in it, not its bytes: 4 MB
 * of 300,000 small keys took ~250 ms to parse and ~400 ms more to validate, while 4 MB of one string
 * parses in a few milliseconds, and values a schema refuses cost ~25 times what valid ones do (an issue
 * each). So a body is weighed before it is parsed: its structural tokens (the commas, colons and opening
 * brackets outside strings, about two per key and one per array element) are counted in one pass over
 * its bytes, and a body with more than its route allows is refused unparsed. What parsing and validating
 * it then took past BODY_MS_INCLUDED is charged to the caller's rate budget, one request per
 * BODY_MS_PER_REQUEST, and may put the budget in debt: a key that spends the loop waits until its budget has refilled.
 */
import { MIMEType } from 'node:util';
import { ServiceError } from '../errors.js';

/** Structural tokens any body may have (≈ 100,000 keys, or 200,000 array elements). */
export const MAX_JSON_TOKENS = 200_000;
/** Structural tokens a route's body may have unless it says otherwise (RouteDefinition.bodyTokens). */
export const DEFAULT_BODY_TOKENS = 10_000;
/** Milliseconds of parsing and validating a body that the request's own count covers. */
export const BODY_MS_INCLUDED = 0.25;
/** Milliseconds of parsing and validating a body, past those, that cost one request more of the budget. */
export const BODY_MS_PER_REQUEST = 0.5;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;

/**
 * The structural tokens of JSON text (commas, colons, `[` and `{` outside strings), counted up to just
 * past `stopAbove`. Text that is not JSON is counted all the same; the parser refuses it afterwards.
 */
export function countJsonTokens(bytes: Buffer, stopAbove = MAX_JSON_TOKENS): number {
  let tokens = 0;
  const length = bytes.length;
  for (let i = 0; i < length; i++) {
    const byte = bytes[i]!;
    if (byte === QUOTE) {
      // To the quote that ends the string (one not escaped by an odd run of backslashes), found natively.
      for (;;) {
        const end = bytes.indexOf(QUOTE, i + 1);
        if (end < 0) return tokens;
        let backslashes = 0;
        while (bytes[end - 1 - backslashes] === BACKSLASH) backslashes++;
        i = end;
        if (backslashes % 2 === 0) break;
      }
    } else if (byte === COMMA || byte === COLON || byte === OPEN_BRACKET || byte === OPEN_BRACE) {
      if (++tokens > stopAbove) return tokens;
    }
  }
  return tokens;
}

/** Requests of the rate budget that `ms` of parsing and validating a body cost beyond the request itself. */
export function bodyCharge(ms: number, included = true): number {
  const charged = included ? ms - BODY_MS_INCLUDED : ms;
  return charged <= 0 ? 0 : Math.floor(charged / BODY_MS_PER_REQUEST);
}

/** Weighs a JSON body before it is parsed: refuses one with more than `most` tokens (413 `payload_too_large`). */
export function weighJsonBody(bytes: Buffer, most: number): void {
  if (countJsonTokens(bytes, most) > most) {
    throw new ServiceError(
      'payload_too_large',
      `The JSON body has more than ${most.toLocaleString('en-US')} values (commas, colons and opening brackets outside strings), the most this route takes; send fewer per request.`,
    );
  }
}

/**
 * JSON bodies are UTF-8 (RFC 8259). Returns the media type alone (`application/json`), for the parser to
 * decode the body as UTF-8 whatever else the header says: the bytes it parses are then the bytes
 * weighJsonBody counted (a parameter the parser would read as another charset, `charset =utf-7`, cannot
 * hide tokens). A charset the header plainly names other than UTF-8 is refused (415), before any read.
 */
export function utf8MediaType(contentType: string | undefined): string {
  let mime: MIMEType;
  try {
    mime = new MIMEType(contentType ?? '');
  } catch {
    throw new ServiceError('invalid_request', 'The Content-Type header is not a media type.', { status: 415 });
  }
  const charset = mime.params.get('charset')?.toLowerCase();
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ServiceError(
      'invalid_request',
      `JSON bodies are UTF-8; this one says charset=${charset.slice(0, 40)}. Send it as UTF-8, with charset=utf-8 or no charset.`,
      { status: 415 },
    );
  }
  return mime.essence;
}
