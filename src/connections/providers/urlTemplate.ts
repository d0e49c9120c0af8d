/**
 * URL templates of the provider catalog (`https://${connectionConfig.subdomain}.zendesk.com/oauth/tokens`).
 * A placeholder fills one position of the URL, known from the template's literal text around it, and a
 * connection setting is a value in that position, never URL syntax:
 *
 * - `origin`: the template starts with the placeholder (Salesforce's `${connectionConfig.instance_url}`):
 *   the value is a whole `http(s)://host[:port]` and nothing else (no user info, path, query);
 * - `host`: inside the host (`https://${…}.zendesk.com`): host-name labels only (letters, digits, `-`,
 *   dots between labels), so `/ ? # @ : \ %` and every other character that would end the host are
 *   refused;
 * - `path`: one path segment: `/ \ ? # %`, `.` and `..` are refused, anything else is percent-encoded;
 * - `query`, `fragment`: percent-encoded.
 *
 * The filled URL is parsed again and its host compared with the host the template and the host values
 * make, so no value can move it. A URL that receives a secret (a token URL, an authorization URL) must
 * also keep a literal domain at the end of its host (`secretUrlProblem`): a setting fills labels in
 * front of it, never the whole host, whatever pattern an integration's provider_settings give it.
 */

export type TemplatePosition = 'origin' | 'host' | 'path' | 'query' | 'fragment';

export type TemplatePart =
  | { kind: 'literal'; text: string; position: 'scheme' | TemplatePosition }
  | { kind: 'setting'; name: string; position: TemplatePosition };

/** A template that cannot be read: the message says why. */
export class UrlTemplateError extends Error {
  override readonly name = 'UrlTemplateError';
}

export const PLACEHOLDER = /\$\{connectionConfig\.([A-Za-z_][A-Za-z0-9_]*)\}/g;

const SCHEME = /^https?:\/\//i;
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})';
/** Host-name labels: what a setting may put inside a host. */
export const HOST_LABELS = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);
/** A whole origin: what a setting at the start of a template may be. */
const ORIGIN = new RegExp(`^https?://${LABEL}(?:\\.${LABEL})*(?::[0-9]{1,5})?/?$`, 'i');
/** The literal end of a secret URL's host after its last setting: at least two labels (`.zendesk.com`). */
const LITERAL_DOMAIN = new RegExp(`^(?:\\.${LABEL}){2,}(?::[0-9]{1,5})?$`);
const MAX_HOST_LENGTH = 253;

const cache = new Map<string, TemplatePart[]>();

/** The template in parts, each placeholder with its position; a UrlTemplateError for a template of no known shape. */
export function parseUrlTemplate(template: string): TemplatePart[] {
  const known = cache.get(template);
  if (known) return known;
  const parts: TemplatePart[] = [];
  let position: 'scheme' | TemplatePosition = 'scheme';
  let afterOrigin = false;
  const literal = (text: string): void => {
    let start = 0;
    if (position === 'scheme') {
      const scheme = SCHEME.exec(text);
      if (!scheme)
        throw new UrlTemplateError('must start with http:// or https:// or with a ${connectionConfig.…} placeholder');
      parts.push({ kind: 'literal', text: scheme[0], position: 'scheme' });
      start = scheme[0].length;
      position = 'host';
    }
    if (afterOrigin && text !== '' && !/^[/?#]/.test(text)) {
      throw new UrlTemplateError(
        'a placeholder at the start stands for the whole origin: it must be followed by /, ? or # (or nothing)',
      );
    }
    afterOrigin = false;
    for (let i = start; i < text.length; i++) {
      const c = text[i]!;
      const next: TemplatePosition =
        position === 'host' && (c === '/' || c === '\\')
          ? 'path'
          : c === '?' && (position === 'host' || position === 'path')
            ? 'query'
            : c === '#' && position !== 'fragment'
              ? 'fragment'
              : position;
      if (next !== position) {
        if (i > start) parts.push({ kind: 'literal', text: text.slice(start, i), position });
        start = i;
        position = next;
      }
    }
    if (text.length > start) parts.push({ kind: 'literal', text: text.slice(start), position });
  };
  let last = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    const index = match.index;
    if (index === 0) {
      parts.push({ kind: 'setting', name: match[1]!, position: 'origin' });
      position = 'path';
      afterOrigin = true;
    } else {
      literal(template.slice(last, index));
      if (afterOrigin) {
        throw new UrlTemplateError(
          'a placeholder at the start stands for the whole origin: it must be followed by /, ? or # (or nothing)',
        );
      }
      parts.push({ kind: 'setting', name: match[1]!, position: position as TemplatePosition });
    }
    last = index + match[0].length;
  }
  literal(template.slice(last));
  if (cache.size > 1000) cache.clear();
  cache.set(template, parts);
  return parts;
}

/** The settings a template uses, with the positions each fills. */
export function templateSettings(template: string): Map<string, Set<TemplatePosition>> {
  const settings = new Map<string, Set<TemplatePosition>>();
  for (const part of parseUrlTemplate(template)) {
    if (part.kind !== 'setting') continue;
    const positions = settings.get(part.name) ?? new Set<TemplatePosition>();
    positions.add(part.position);
    settings.set(part.name, positions);
  }
  return settings;
}

/**
 * The text a value takes in a position, or a reason it cannot stand there (a string starting with
 * "must"): the one place that decides what a setting may put into a URL.
 */
export function placeValue(value: string, position: TemplatePosition): { text: string } | { problem: string } {
  switch (position) {
    case 'origin':
      return ORIGIN.test(value)
        ? { text: value.replace(/\/$/, '') }
        : {
            problem:
              'must be a whole http(s) origin (scheme, host, optional port), with no user, path, query or fragment',
          };
    case 'host':
      return HOST_LABELS.test(value) && value.length <= MAX_HOST_LENGTH
        ? { text: value }
        : { problem: 'must be host-name labels (letters, digits, - and dots between labels): it fills part of a host' };
    case 'path':
      // Refused rather than encoded: a server that decodes %2F before routing would see a new path.
      return value === '.' || value === '..' || /[/\\?#%]/.test(value)
        ? { problem: 'must be one path segment: no / \\ ? # %, and not . or ..' }
        : { text: encodeURIComponent(value) };
    case 'query':
    case 'fragment':
      return { text: encodeURIComponent(value) };
  }
}

/**
 * Fills a template with `valueOf(name)` (already checked against the setting's pattern by the caller)
 * and checks the result: a valid http(s) URL whose host is the one the template's literal text and its
 * host values make. Throws UrlTemplateError with a message naming the setting.
 */
export function fillUrlTemplate(
  template: string,
  valueOf: (name: string, position: TemplatePosition) => string,
): string {
  const parts = parseUrlTemplate(template);
  let url = '';
  let scheme = '';
  let authority = '';
  let origin: string | undefined;
  for (const part of parts) {
    let text: string;
    if (part.kind === 'literal') {
      text = part.text;
    } else {
      const placed = placeValue(valueOf(part.name, part.position), part.position);
      if ('problem' in placed) throw new UrlTemplateError(`the connection setting '${part.name}' ${placed.problem}`);
      text = placed.text;
      if (part.position === 'origin') origin = text;
    }
    if (part.position === 'scheme') scheme = text;
    if (part.position === 'host') authority += text;
    url += text;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UrlTemplateError('does not make a valid URL with this connection’s settings');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UrlTemplateError('is not an http(s) URL');
  // The host the template says, parsed on its own: the filled URL must have exactly this one.
  let expected: URL;
  try {
    expected = new URL(origin ?? `${scheme}${authority}`);
  } catch {
    throw new UrlTemplateError('does not make a valid host with this connection’s settings');
  }
  if (parsed.host !== expected.host || parsed.username !== expected.username || parsed.password !== expected.password) {
    throw new UrlTemplateError(`would not keep its host ${expected.host} with this connection’s settings`);
  }
  return url;
}

/** Why a template cannot be a URL of the catalog (no known shape, or no valid URL with sample values); undefined when it can. */
export function urlTemplateProblem(template: string): string | undefined {
  try {
    fillUrlTemplate(template, (_name, position) => (position === 'origin' ? 'https://example.com' : 'x'));
    return undefined;
  } catch (error) {
    if (error instanceof UrlTemplateError) return error.message;
    throw error;
  }
}

/**
 * Why a template cannot be a URL that receives a secret, or undefined: its scheme and the end of its
 * host are literal, so no setting decides which domain the secret goes to.
 */
export function secretUrlProblem(template: string): string | undefined {
  const parts = parseUrlTemplate(template);
  if (parts[0]?.kind === 'setting') {
    return 'receives a secret: it must start with a literal http(s)://host, not a ${connectionConfig.…} origin';
  }
  const host = parts.filter((part) => part.position === 'host');
  const lastSetting = host.map((part) => part.kind).lastIndexOf('setting');
  if (lastSetting === -1) return undefined;
  const tail = host
    .slice(lastSetting + 1)
    .map((part) => (part.kind === 'literal' ? part.text : ''))
    .join('');
  return LITERAL_DOMAIN.test(tail)
    ? undefined
    : 'receives a secret: a ${connectionConfig.…} in its host must be followed by a literal domain of at least two labels (https://${connectionConfig.subdomain}.zendesk.com)';
}
