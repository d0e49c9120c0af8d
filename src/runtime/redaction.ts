/**
 * Keeping credential values out of what the service echoes: error messages, statuses, logs, the
 * failure details a script sees. Redaction is by value, not by field name: an API key that went out
 * in a query parameter called `appid` is found wherever an upstream or a script repeated it.
 */

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
      return Object.fromEntries(Object.entries(node).map(([key, item]) => [redactSecrets(key, secrets), walk(item)]));
    }
    return node;
  };
  return walk(value) as T;
}

// A JSON string literal with at least one escape in it (for valid JSON, a match starts at a literal's
// opening quote: between a closing quote and the next opening one there is no backslash).
const ESCAPED_LITERAL = /"(?:[^"\\]*\\.)+[^"\\]*"/g;

/**
 * A body kept as text (a failed request's answer, src/runtime/http.ts), redacted as `redactValue` would
 * redact it once parsed, without parsing it on the worker's main thread: each credential value where it
 * appears as written, and each JSON string literal that spells one through escapes (`\u0061`, `\/`)
 * rewritten as its redacted value. Linear in the text; only literals with escapes are decoded.
 */
export function redactJsonText(text: string, secrets: readonly string[]): string {
  if (secrets.length === 0) return text;
  const plain = redactSecrets(text, secrets);
  if (!plain.includes('\\')) return plain;
  return plain.replace(ESCAPED_LITERAL, (literal) => {
    let value: unknown;
    try {
      value = JSON.parse(literal);
    } catch {
      return literal;
    }
    if (typeof value !== 'string') return literal;
    const redacted = redactSecrets(value, secrets);
    return redacted === value ? literal : JSON.stringify(redacted);
  });
}
