/**
 * The API reference page (GET /reference): HTML rendered on the server from the OpenAPI document,
 * with its styles inline and no script, font or stylesheet from elsewhere, so it works offline and
 * under a strict Content-Security-Policy.
 */

type Json = Record<string, unknown>;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);

/** Escaped text with `code` spans and line breaks: the little Markdown the descriptions use. */
function prose(text: unknown): string {
  if (typeof text !== 'string' || text === '') return '';
  return escapeHtml(text)
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\n/g, '<br>');
}

const asObject = (value: unknown): Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
const asArray = (value: unknown): unknown[] => (Array.isArray(value) ? (value as unknown[]) : []);
const text = (value: unknown, fallback = ''): string =>
  typeof value === 'string' || typeof value === 'number' ? String(value) : fallback;

/** A JSON Schema as a short type: `{ id: string, tags?: string[] }`. */
export function schemaText(schema: unknown, depth = 0): string {
  const s = asObject(schema);
  if (typeof s['$ref'] === 'string') return s['$ref'].split('/').pop() ?? 'object';
  if ('const' in s) return JSON.stringify(s['const']);
  if (Array.isArray(s['enum']))
    return asArray(s['enum'])
      .map((value) => JSON.stringify(value))
      .join(' | ');
  for (const key of ['anyOf', 'oneOf']) {
    if (Array.isArray(s[key]))
      return asArray(s[key])
        .map((member) => schemaText(member, depth))
        .join(' | ');
  }
  const type = s['type'];
  if (Array.isArray(type))
    return asArray(type)
      .map((t) => schemaText({ ...s, type: t }, depth))
      .join(' | ');
  if (type === 'array') return `${schemaText(s['items'], depth)}[]`;
  if (type === 'object' || s['properties']) {
    const properties = Object.entries(asObject(s['properties']));
    if (properties.length === 0) return 'object';
    if (depth >= 3) return '{ … }';
    const required = new Set(asArray(s['required']).map(String));
    const inner = properties.map(
      ([name, value]) => `${name}${required.has(name) ? '' : '?'}: ${schemaText(value, depth + 1)}`,
    );
    return `{ ${inner.join(', ')} }`;
  }
  if (typeof type === 'string') return typeof s['format'] === 'string' ? `${type} (${s['format']})` : type;
  return 'any';
}

function parameterRows(parameters: unknown[]): string {
  if (parameters.length === 0) return '';
  const rows = parameters.map((raw) => {
    const p = asObject(raw);
    return `<tr><td><code>${escapeHtml(String(p['name']))}</code></td><td>${escapeHtml(String(p['in']))}</td><td>${p['required'] ? 'yes' : 'no'}</td><td><code>${escapeHtml(schemaText(p['schema']))}</code></td><td>${prose(p['description'] ?? asObject(p['schema'])['description'])}</td></tr>`;
  });
  return `<table><thead><tr><th>parameter</th><th>in</th><th>required</th><th>type</th><th>meaning</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function jsonSchemaOf(content: unknown): unknown {
  return asObject(asObject(asObject(content)['application/json'])['schema']);
}

function operationHtml(method: string, path: string, operation: Json): string {
  const id = `op-${method}-${path}`.replace(/[^A-Za-z0-9-]+/g, '-');
  const body = asObject(operation['requestBody']);
  const bodySchema = body['content'] ? jsonSchemaOf(body['content']) : undefined;
  const responses = Object.entries(asObject(operation['responses'])).map(([status, raw]) => {
    const response = asObject(raw);
    const schema = response['content'] ? schemaText(jsonSchemaOf(response['content'])) : '';
    return `<li><strong>${escapeHtml(status)}</strong> ${prose(response['description'])}${schema ? ` <code>${escapeHtml(schema)}</code>` : ''}</li>`;
  });
  const secured = asArray(operation['security']).length > 0;
  return `<section class="op" id="${id}">
<h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
<p class="summary">${prose(operation['summary'])}${secured ? '' : ' <span class="public">no key</span>'}</p>
${operation['description'] ? `<p>${prose(operation['description'])}</p>` : ''}
${parameterRows(asArray(operation['parameters']))}
${bodySchema ? `<p>Body: <code>${escapeHtml(schemaText(bodySchema))}</code></p><details><summary>JSON Schema of the body</summary><pre>${escapeHtml(JSON.stringify(bodySchema, null, 2))}</pre></details>` : ''}
<ul class="responses">${responses.join('')}</ul>
</section>`;
}

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{padding:1.5rem 2rem;border-bottom:1px solid #d8dee4}main{display:flex}nav{width:17rem;padding:1rem 1.5rem;border-right:1px solid #d8dee4;font-size:13px}
nav a{display:block;color:#0550ae;text-decoration:none;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.content{flex:1;padding:1rem 2rem;max-width:64rem}
.op{border:1px solid #d8dee4;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}.method{display:inline-block;min-width:4.5rem;text-align:center;border-radius:4px;color:#fff;font-size:12px;padding:2px 6px}
.get{background:#1f6feb}.post{background:#1a7f37}.put{background:#9a6700}.patch{background:#8250df}.delete{background:#cf222e}
table{border-collapse:collapse;font-size:13px;margin:.5rem 0}td,th{border:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}
code,pre{font:12.5px ui-monospace,monospace;background:#f6f8fa;border-radius:4px;padding:1px 4px}pre{padding:.75rem;overflow:auto}.public{color:#9a6700;font-size:12px}`;

/** The reference page of an OpenAPI 3.1 document. */
export function renderReference(document: Json): string {
  const info = asObject(document['info']);
  const byTag = new Map<string, { method: string; path: string; operation: Json }[]>();
  for (const [path, item] of Object.entries(asObject(document['paths']))) {
    for (const [method, raw] of Object.entries(asObject(item))) {
      const operation = asObject(raw);
      const tag = text(asArray(operation['tags'])[0], 'other');
      byTag.set(tag, [...(byTag.get(tag) ?? []), { method, path, operation }]);
    }
  }
  const nav: string[] = [];
  const sections: string[] = [];
  for (const [tag, operations] of byTag) {
    nav.push(`<h4>${escapeHtml(tag)}</h4>`);
    sections.push(`<h2 id="tag-${escapeHtml(tag)}">${escapeHtml(tag)}</h2>`);
    for (const { method, path, operation } of operations) {
      const id = `op-${method}-${path}`.replace(/[^A-Za-z0-9-]+/g, '-');
      nav.push(`<a href="#${id}">${method.toUpperCase()} ${escapeHtml(path)}</a>`);
      sections.push(operationHtml(method, path, operation));
    }
  }
  const schemas = Object.entries(asObject(asObject(document['components'])['schemas'])).map(
    ([name, schema]) =>
      `<h3 id="schema-${escapeHtml(name)}">${escapeHtml(name)}</h3><p><code>${escapeHtml(schemaText(schema))}</code></p>`,
  );
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(text(info['title'], 'API reference'))}</title><style>${STYLE}</style></head>
<body><header><h1>${escapeHtml(text(info['title'], 'API reference'))} <small>v${escapeHtml(text(info['version']))}</small></h1><p>${prose(info['description'])}</p>
<p>Machine-readable: <a href="openapi.json">openapi.json</a> (OpenAPI ${escapeHtml(text(document['openapi']))}).</p></header>
<main><nav>${nav.join('\n')}<h4>schemas</h4></nav><div class="content">${sections.join('\n')}<h2>Schemas</h2>${schemas.join('\n')}</div></main></body></html>`;
}
