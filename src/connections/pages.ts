/** The plain HTML pages an end user sees at the end of a connect flow: no script, no external assets. */

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

/** Headers for these pages: nothing cached, nothing loaded, the callback URL (with its code) never sent on as a referrer. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'",
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
};
