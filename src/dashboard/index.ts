/**
 * The web dashboard (docs/dashboard.md): static HTML, CSS and ES modules served at /dashboard, with
 * nothing to build or install. The pages call the REST API of the same origin with the environment
 * secret key as a Bearer token, like any other API client; this router adds only what the API has no
 * route for: the dashboard's own settings (the Temporal Web UI link) and the environment's keys.
 *
 * @example
 * app.use(createDashboardRouter({ temporalUiUrl: 'http://127.0.0.1:8233', temporalNamespace: 'default', environments }));
 */
import { createRequire } from 'node:module';
import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import type { EnvironmentStore } from '../connections/environmentStore.js';
import { ServiceError, isServiceError } from '../errors.js';

export interface DashboardOptions {
  /** Base URL of the Temporal Web UI; each run of a sync links to its workflow there. Omitted: no links. */
  temporalUiUrl?: string | undefined;
  /** @default 'default' */
  temporalNamespace?: string | undefined;
  /**
   * The environments, for the Environment Settings page's keys (public key, rotating the secret
   * key). Omitted: the page shows the key the user signed in with and no rotation.
   */
  environments?: Pick<EnvironmentStore, 'findBySecretKey' | 'rotateSecretKey'> | undefined;
}

const optionsSchema = z.object({
  temporalUiUrl: z
    .url({ protocol: /^https?$/ })
    .transform((url) => url.replace(/\/+$/, ''))
    .optional(),
  temporalNamespace: z.string().min(1).max(1000).default('default'),
});

/** Where the dashboard lives; the pages use relative URLs, so only this file and the docs name it. */
export const DASHBOARD_PATH = '/dashboard';

const publicDir = fileURLToPath(new URL('./public/', import.meta.url));

/**
 * Files of npm packages the pages load, by the path they load them from (under /dashboard/): each
 * one exact file of node_modules, so nothing else of node_modules is reachable and nothing is built.
 * The chart library: uPlot (js/chart.js imports `../vendor/uplot.esm.js`).
 */
const resolvePackageFile = createRequire(import.meta.url).resolve;
export const VENDOR_FILES: Readonly<Record<string, string>> = {
  'vendor/uplot.esm.js': resolvePackageFile('uplot/dist/uPlot.esm.js'),
  'vendor/uplot.min.css': resolvePackageFile('uplot/dist/uPlot.min.css'),
};

/**
 * The pages hold the secret key, so the browser is told to run nothing but the dashboard's own files
 * (no inline script, no other origin) and to keep the pages out of frames and caches of other sites.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export function createDashboardRouter(options: DashboardOptions = {}): Router {
  const parsed = optionsSchema.safeParse({
    temporalUiUrl: options.temporalUiUrl,
    temporalNamespace: options.temporalNamespace,
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ServiceError('invalid_dashboard_options', `Invalid dashboard options: ${problems.join('; ')}`, {
      details: problems,
    });
  }
  const settings = parsed.data;
  const router = express.Router();

  router.use(DASHBOARD_PATH, (_req, res, next) => {
    res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.setHeader('X-Frame-Options', 'DENY');
    // Small files, changed by upgrades of the service: always revalidate, so a deploy never mixes versions.
    res.setHeader('Cache-Control', 'no-cache');
    next();
  });

  router.get(`${DASHBOARD_PATH}/config.json`, (_req, res) => {
    res.json({
      temporal_ui_url: settings.temporalUiUrl ?? null,
      temporal_namespace: settings.temporalNamespace,
      features: { keys: options.environments !== undefined },
    });
  });

  const environments = options.environments;
  if (environments) {
    const authenticated = async (req: Request) => {
      const key = bearer(req);
      const environment = await environments.findBySecretKey(key);
      if (!environment) {
        throw new ServiceError(
          'invalid_secret_key',
          'No environment has this secret key. Check the key in your environment settings.',
        );
      }
      return environment;
    };
    router.get(`${DASHBOARD_PATH}/environment`, (req, res, next) => {
      authenticated(req)
        .then((environment) =>
          res.json({ id: environment.id, name: environment.name, public_key: environment.publicKey }),
        )
        .catch(next);
    });
    router.post(`${DASHBOARD_PATH}/environment/rotate-secret-key`, (req, res, next) => {
      authenticated(req)
        .then(async (environment) => {
          const secretKey = await environments.rotateSecretKey(environment.id);
          // Shown once: only its hash is stored.
          res.json({ secret_key: secretKey });
        })
        .catch(next);
    });
  }

  for (const [path, file] of Object.entries(VENDOR_FILES)) {
    router.get(`${DASHBOARD_PATH}/${path}`, (_req, res, next) => {
      // `root`: the file's folder, so only its own name is checked (the checkout may sit under a dot folder).
      res.sendFile(basename(file), { root: dirname(file) }, (error?: Error) => {
        if (error) next(error);
      });
    });
  }

  router.use(DASHBOARD_PATH, express.static(publicDir, { index: 'index.html', redirect: true, dotfiles: 'ignore' }));

  // Nothing else lives under /dashboard: a missing file is a 404 here, not a request for the API's fallback.
  router.use(DASHBOARD_PATH, (req, _res, next) => {
    next(new ServiceError('route_not_found', `No dashboard file ${req.originalUrl.split('?')[0] ?? ''}.`));
  });

  // Errors of the dashboard's own routes, in the API's envelope; the pages read `error.message`.
  router.use(DASHBOARD_PATH, (error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const failure = isServiceError(error)
      ? error
      : new ServiceError('internal_error', 'The dashboard failed to answer this request.');
    res.status(failure.status).json({ error: { code: failure.code, message: failure.message } });
  });

  return router;
}

function bearer(req: Request): string {
  const header = req.header('authorization');
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  if (!match?.[1]) {
    throw new ServiceError(
      'missing_authorization',
      'Send the header `Authorization: Bearer <environment secret key>`.',
    );
  }
  return match[1];
}
