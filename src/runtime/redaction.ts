/**
 * Keeping credential values out of what the service echoes: error messages, statuses, logs, the
 * failure details a script sees. Redaction is by value, not by field name: an API key that went out
 * in a query parameter called `appid` is found wherever an upstream or a script repeated it.
 */
import { answerText } from './httpAnswer.js';
import { BASE64_UTF8, type HttpAnswer } from './svcTypes.js';

export const REDACTED = '[redacted]';

/** Values shorter than this are not redacted: replacing every `a` of a text would hide everything and protect nothing. */
const MIN_SECRET_LENGTH = 4;

/**
 * The spellings of each secret that can appear in text: as is, percent-encoded (a query string),
 * form-encoded (`+` for spaces) and base64 (an `Authorization: Basic` pair is added by the caller).
 * Longest first, so that a longer form is replaced before a shorter one inside it.
 */
export function secretForms(values: readonly (string | undefined)[]): string[] {
  const forms = new Set<string>();
  for (const value of values) {
    if (value === undefined || value.length < MIN_SECRET_LENGTH) continue;
    forms.add(value);
    forms.add(encodeURIComponent(value));
    forms.add(new URLSearchParams({ v: value }).toString().slice(2));
    forms.add(Buffer.from(value).toString('base64').replace(/=+$/, ''));
  }
  return [...forms].filter((form) => form.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}

/** `text` with every occurrence of every secret replaced by `[redacted]`. */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  let result = text;
  for (const secret of secrets) {
    if (secret && secret.length >= MIN_SECRET_LENGTH && result.includes(secret))
      result = result.split(secret).join(REDACTED);
  }
  return result;
}

/** A JSON-like value with every string (keys included) redacted; other values as they are. */
export function redactValue<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const walk = (node: unknown): unknown => {
    if (typeof node === 'string') return redactSecrets(node, secrets);
    if (Array.isArray(node)) return node.map(walk);
    if (node && typeof node === 'object' && Object.getPrototypeOf(node) === Object.prototype) {
      // A request's answer carried as base64 (src/runtime/http.ts `carried`) is redacted as its text,
      // and shown so: its bytes would hide a credential from the walk.
      const entries = isCarriedAnswer(node) ? Object.entries(textAnswer(node)) : Object.entries(node);
      return Object.fromEntries(entries.map(([key, item]) => [redactSecrets(key, secrets), walk(item)]));
    }
    return node;
  };
  return walk(value) as T;
}

function isCarriedAnswer(node: object): node is HttpAnswer {
  const answer = node as Partial<HttpAnswer>;
  return answer.encoding === BASE64_UTF8 && typeof answer.body === 'string' && !('data' in node);
}

function textAnswer(answer: HttpAnswer): Omit<HttpAnswer, 'encoding'> {
  const { encoding: _encoding, ...rest } = answer;
  return { ...rest, body: answerText(answer) };
}

/** What a failed answer's body becomes when it spells a credential in `\u` escapes (redactJsonText). */
export const WITHHELD_BODY = '[redacted: the answer spelled a credential of the connection in JSON escapes]';

/**
 * A body kept as text (a failed request's answer, src/runtime/http.ts), redacted without parsing it on
 * the worker's main thread, where `redactValue` redacted the parsed value: each credential value where
 * it appears as written or as JSON writes it (`"` and `\` escaped, `/` as `\/` or not). A body that still
 * spells one once its escapes are decoded (`\u0073k-…`) is withheld whole (WITHHELD_BODY): an API does
 * that only on purpose. Linear in the text, with no callback per literal (decoding each escaped literal
 * with its own JSON.parse took 6.6 s for 36 MB of short ones).
 */
export function redactJsonText(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  const forms = new Set<string>();
  for (const secret of secrets) {
    forms.add(secret);
    const escaped = JSON.stringify(secret).slice(1, -1);
    forms.add(escaped);
    forms.add(escaped.replaceAll('/', '\\/'));
  }
  const plain = redactSecrets(
    text,
    [...forms].sort((a, b) => b.length - a.length),
  );
  if (!plain.includes('\\')) return plain;
  const view = decodedView(plain);
  return secrets.some((secret) => secret.length >= MIN_SECRET_LENGTH && view.includes(secret)) ? WITHHELD_BODY : plain;
}

const ESCAPED: Record<number, number> = { 98: 8, 102: 12, 110: 10, 114: 13, 116: 9 };

function hexDigit(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  const lower = code | 32;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

/**
 * The text with every JSON escape decoded (`\u0073` as `s`, `\/` as `/`, …), inside string literals or
 * not, and any other backslash kept as it is, in one pass over the characters. It only detects: a body
 * that is not JSON (one bad escape, a body cut mid-escape, an escape outside a string) is shown to the
 * script as its text, escapes and all, so it must be searched as a reader would decode it (a regular
 * expression that escaped the quotes took 3-9 s for 36 MB of short escaped literals at load 14-18; the
 * whole redaction with this pass 0.6 s).
 */
function decodedView(text: string): string {
  const out = new Uint16Array(text.length);
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code !== 92) {
      out[length++] = code;
      continue;
    }
    const escape = text.charCodeAt(i + 1);
    if (escape === 117) {
      let value = 0;
      let k = 1;
      for (; k <= 4; k++) {
        const digit = hexDigit(text.charCodeAt(i + 1 + k));
        if (digit < 0) break;
        value = value * 16 + digit;
      }
      if (k > 4) {
        out[length++] = value;
        i += 5;
        continue;
      }
    } else if (escape === 34 || escape === 92 || escape === 47) {
      out[length++] = escape;
      i += 1;
      continue;
    } else if (ESCAPED[escape] !== undefined) {
      out[length++] = ESCAPED[escape];
      i += 1;
      continue;
    }
    out[length++] = code;
  }
  return Buffer.from(out.buffer, 0, length * 2).toString('utf16le');
}
