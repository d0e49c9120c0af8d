/**
 * What a JSON body costs the API process. Parsing and validating a body runs on the one event loop every
 * environment's requests share, and its cost grows with the number of values in it, not its bytes: 4 MB
 * of 300,000 small keys took ~250 ms to parse and ~400 ms more to validate, while 4 MB of one string
 * parses in a few milliseconds. So a body is weighed before it is parsed: its structural tokens (the
 * commas, colons and opening brackets outside strings, about two per key and one per array element) are
 * counted in one pass over its bytes, a body with more than MAX_JSON_TOKENS is refused unparsed, and
 * the caller's rate budget is charged by bytes and tokens (`bodyCost`), so that one key's heavy bodies
 * spend its own budget instead of every environment's time.
 */
import { ServiceError } from '../errors.js';

/** Structural tokens a body may have (≈ 100,000 keys, or 200,000 array elements). */
export const MAX_JSON_TOKENS = 200_000;
/** A body costs one request more per this many bytes… */
export const BYTES_PER_REQUEST = 64 * 1024;
/** …and one more per this many structural tokens (parse and validation of them ≈ a small request's time). */
export const TOKENS_PER_REQUEST = 1_000;

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

/** What a body of `bytes` with `tokens` structural tokens costs, in requests of the rate budget (at least 1). */
export function bodyCost(bytes: number, tokens: number): number {
  return 1 + Math.floor(bytes / BYTES_PER_REQUEST) + Math.floor(tokens / TOKENS_PER_REQUEST);
}

/**
 * Weighs a JSON body before it is parsed: refuses one with too many tokens (413 `payload_too_large`,
 * saying how many), else returns its cost in requests.
 */
export function weighJsonBody(bytes: Buffer): number {
  const tokens = countJsonTokens(bytes);
  if (tokens > MAX_JSON_TOKENS) {
    throw new ServiceError(
      'payload_too_large',
      `The JSON body has more than ${MAX_JSON_TOKENS.toLocaleString('en-US')} values (commas, colons and opening brackets outside strings); send fewer per request.`,
    );
  }
  return bodyCost(bytes.length, tokens);
}
