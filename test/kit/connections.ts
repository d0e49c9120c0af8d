/**
 * The connections area over a test database, with the OAuth routes on an Express app on 127.0.0.1,
 * and a "browser" that follows the connect flow's redirects the way an end user's would.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import express from 'express';

import { createOAuthRouter } from '../../src/api/oauthRoutes.js';
import { createConnections, type CreateConnectionsOptions } from '../../src/connections/index.js';
import { Encryptor } from '../../src/connections/encryption.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import type { Pool } from '../../src/db/pool.js';
import { deferCleanup } from './cleanup.js';
import { listenOnLoopback } from './loopback.js';

export function randomKey(): Buffer {
  return randomBytes(32);
}

export interface HarnessOptions {
  db: Pool;
  encryptor?: Encryptor;
  extraProviders?: Record<string, unknown>;
  providersFile?: string;
  now?: () => Date;
  /** Bind the app to this callback URL instead of its own (to run a second "process" on one app's URL). */
  callbackUrl?: string;
  onConnectionSaved?: CreateConnectionsOptions['onConnectionSaved'];
}

/** The connections harness (createHarness), its server closed when the test file ends. */
export async function startHarness(options: HarnessOptions) {
  const harness = await createHarness(options);
  deferCleanup(harness.stop);
  return harness;
}

/** The connections area with its OAuth routes on 127.0.0.1; `stop` closes the server. */
export async function createHarness(options: HarnessOptions) {
  const server = createServer();
  const { url: appUrl, close: stop } = await listenOnLoopback(server);
  const encryptor = options.encryptor ?? new Encryptor([randomKey()]);
  const createOptions: CreateConnectionsOptions = {
    db: options.db,
    encryptor,
    callbackUrl: options.callbackUrl ?? `${appUrl}/oauth/callback`,
    catalog: loadProviderCatalog({ extraFile: options.providersFile, extra: options.extraProviders }),
    ...(options.now ? { now: options.now } : {}),
    ...(options.onConnectionSaved ? { onConnectionSaved: options.onConnectionSaved } : {}),
  };
  const connections = createConnections(createOptions);
  const app = express();
  app.use(createOAuthRouter({ flow: connections.oauthFlow, environments: connections.environments }));
  server.on('request', app);

  /** Opens `url` and follows redirects by hand (as a browser would), returning the final page. */
  async function browse(
    url: string,
    maxHops = 5,
  ): Promise<{ status: number; body: string; url: string; hops: string[] }> {
    const hops: string[] = [];
    let current = url;
    for (let hop = 0; hop <= maxHops; hop++) {
      const response = await fetch(current, { redirect: 'manual' });
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location) {
        current = new URL(location, current).toString();
        hops.push(current);
        await response.text();
        continue;
      }
      return { status: response.status, body: await response.text(), url: current, hops };
    }
    throw new Error(`more than ${maxHops} redirects from ${url}`);
  }

  /** A connect link for one connection, through a connect session as the application's backend makes it. */
  async function connectLink(
    session: Omit<Parameters<typeof connections.oauthFlow.createConnectSession>[0], 'connectionConfig'> & {
      connectionConfig?: Record<string, string>;
    },
    extra = '',
  ): Promise<string> {
    const { token } = await connections.oauthFlow.createConnectSession(session);
    return `${appUrl}/oauth/connect/${encodeURIComponent(session.integrationId)}?connect_session_token=${token}${extra}`;
  }

  return { ...connections, encryptor, appUrl, browse, connectLink, stop };
}

export type Harness = Awaited<ReturnType<typeof startHarness>>;

/** A provider entry of the catalog pointing at the fake provider. */
export function fakeOAuth2Provider(fakeUrl: string, overrides: Record<string, unknown> = {}) {
  return {
    display_name: 'Fake OAuth 2',
    auth_mode: 'OAUTH2',
    authorization_url: `${fakeUrl}/oauth2/authorize`,
    token_url: `${fakeUrl}/oauth2/token`,
    pkce: true,
    base_url: `${fakeUrl}/api`,
    headers: { 'X-Fake-Version': '1' },
    ...overrides,
  };
}
