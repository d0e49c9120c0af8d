/** The plain HTML pages an end user sees in a connect flow: no script, no external assets. */
import type { ConnectField } from './connectFields.js';

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

export interface ResultPage {
  ok: boolean;
  title: string;
  message: string;
}

export function renderResultPage({ ok, title, message }: ResultPage): string {
  const color = ok ? '#1a7f37' : '#cf222e';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#1f2328}h1{color:${color};font-size:1.4rem}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(message)}</p>
${ok ? '<p>You can close this window.</p>' : ''}
</body>
</html>
`;
}

export interface ConnectPage {
  title: string;
  intro: string;
  /** The connect session token: a hidden field of the form, never in a link of the page. */
  session: string;
  fields: ConnectField[];
  submitLabel: string;
  error?: string | undefined;
  /** Values to show again after a refused submission (never the secret ones). */
  values?: Record<string, string | undefined>;
  docs?: string | undefined;
}

/**
 * The hosted connect page: one form, posted back to POST /connect with the session in a hidden field.
 * No script and nothing loaded from anywhere (the page's CSP says so).
 */
export function renderConnectPage(page: ConnectPage): string {
  const controls = page.fields
    .map((field, index) => {
      const id = `f${index}`;
      const value = field.kind === 'text' ? (page.values?.[field.name] ?? '') : '';
      const hint = field.description ? `<small id="${id}-hint">${escapeHtml(field.description)}</small>` : '';
      const common = `id="${id}" name="${escapeHtml(field.name)}"${field.required ? ' required' : ''}${hint ? ` aria-describedby="${id}-hint"` : ''} autocomplete="off" spellcheck="false"`;
      const input =
        field.kind === 'multiline'
          ? `<textarea ${common} rows="6"></textarea>`
          : `<input ${common} type="${field.kind === 'secret' ? 'password' : 'text'}" value="${escapeHtml(value)}">`;
      return `<p><label for="${id}">${escapeHtml(field.label)}${field.required ? '' : ' (optional)'}</label>${input}${hint}</p>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(page.title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#1f2328}h1{font-size:1.4rem}label{display:block;font-weight:600;margin-bottom:.25rem}input,textarea{box-sizing:border-box;width:100%;padding:.5rem;font:inherit;border:1px solid #8c959f;border-radius:4px}small{display:block;color:#57606a;margin-top:.25rem}button{padding:.6rem 1.2rem;font:inherit;background:#1f6feb;color:#fff;border:0;border-radius:4px;cursor:pointer}button:focus,input:focus,textarea:focus{outline:3px solid #0969da;outline-offset:2px}.error{color:#cf222e;font-weight:600}</style>
</head>
<body>
<main>
<h1>${escapeHtml(page.title)}</h1>
<p>${escapeHtml(page.intro)}</p>
${page.error ? `<p class="error" role="alert">${escapeHtml(page.error)}</p>` : ''}
<form method="post" action="connect">
<input type="hidden" name="session" value="${escapeHtml(page.session)}">
${controls}
<p><button type="submit">${escapeHtml(page.submitLabel)}</button></p>
</form>
${page.docs ? `<p><small>About these credentials: ${escapeHtml(page.docs)}</small></p>` : ''}
</main>
</body>
</html>
`;
}

/** Headers for these pages: nothing cached, nothing loaded, the callback URL (with its code) never sent on as a referrer. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'",
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
};
