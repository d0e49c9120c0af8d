import type { ApiDeps } from '../../deps.js';
import { renderReference } from '../../reference.js';
import { defineRoute, type AnyRoute } from '../../route.js';
import { openApiDocument } from './getOpenApi.js';

export const getReferenceRoute = (deps: ApiDeps, routes: () => readonly AnyRoute[]) =>
  defineRoute({
    method: 'get',
    path: '/reference',
    summary: 'The API reference as a web page, rendered from /openapi.json',
    description: 'Self-contained HTML (no scripts, fonts or styles from elsewhere), so it works offline.',
    tags: ['service'],
    auth: 'none',
    responses: { 200: { description: 'HTML' } },
    handler: async ({ req, res }) => {
      const html = renderReference(await openApiDocument(deps, routes(), req));
      res
        .status(200)
        .set({
          'content-type': 'text/html; charset=utf-8',
          'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
          'cache-control': 'no-store',
        })
        .send(html);
      return undefined;
    },
  });
