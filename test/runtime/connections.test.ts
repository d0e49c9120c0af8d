/** The runtime over the real connections area: credentials injected, base URL from the integration, getConnection. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createConnections, Encryptor, type Connections } from '../../src/connections/index.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

describe('svc requests through the real connection service', () => {
  it('injects the API key, takes the base URL from the integration, fails clearly for an unknown connection', async () => {
    let connections: Connections | undefined;
    const h = await useRuntime({
      connections: (pool) => {
        connections = createConnections({
          db: pool,
          encryptor: new Encryptor([randomBytes(32)]),
          callbackUrl: 'http://127.0.0.1/oauth/callback',
        });
        return connections.service;
      },
    });
    const api = await startFakeUpstream((request, response) => {
      if (request.headers.authorization !== 'Bearer pat-123') return json(response, 401, { error: 'bad credentials' });
      json(response, 200, { login: 'octocat', path: request.url });
    });
    const { environment } = await connections!.environments.create({ name: 'runtime-conn' });
    await connections!.integrations.upsert(environment.id, {
      id: 'gh',
      provider: 'github-pat',
      provider_settings: { base_url: api.url },
    });
    await connections!.service.importConnection({
      environmentId: environment.id,
      integrationId: 'gh',
      connectionId: 'user-1',
      credentials: { type: 'API_KEY', apiKey: 'pat-123' },
    });
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const hash = await h.scripts.put(
      bundle(`async function (svc) {
        const res = await svc.get({ endpoint: '/user', params: { q: 1 } });
        const conn = await svc.getConnection();
        return { data: res.data, url: res.request.url, credentialType: conn.credentials.type, connectionId: conn.connection_id };
      }`),
      environment.id,
    );
    const outcome = await control.runAction({
      definition: { environmentId: environment.id, integrationId: 'gh', actionName: 'me', scriptHash: hash },
      connectionId: 'user-1',
      input: {},
    });
    expect(outcome).toEqual({
      ok: true,
      output: {
        data: { login: 'octocat', path: '/user?q=1' },
        url: `${api.url}/user?q=1`,
        credentialType: 'API_KEY',
        connectionId: 'user-1',
      },
    });

    await expect(
      control.runAction({
        definition: { environmentId: environment.id, integrationId: 'gh', actionName: 'me', scriptHash: hash },
        connectionId: 'nobody',
        input: {},
      }),
    ).rejects.toMatchObject({ code: 'unknown_connection' });
  });
});
