/**
 * A run's failure code says who stopped it: a script cannot name its own failure type. What a script
 * throws is script_error whatever `code` or `name` it carries; a code of the service (an operation's,
 * a limit's) is kept only when the service raised it.
 */
import { describe, expect, it } from 'vitest';
import { ServiceError, type ErrorCode } from '../../src/errors.js';
import { actionOutcomes, useRuntime } from '../kit/runtime.js';
import { TestConnections } from '../kit/testConnections.js';

/** Connections whose every request fails with the code a test sets, as the real service raises it. */
class FailingConnections extends TestConnections {
  code: ErrorCode = 'missing_oauth_client';
  override authorizeRequest(): ReturnType<TestConnections['authorizeRequest']> {
    return Promise.reject(new ServiceError(this.code, `the connection service refused: ${this.code}`));
  }
}

describe('failure codes a script cannot forge', () => {
  it('a script cannot pass its own error off as a service limit: a forged realm code is script_error', async () => {
    // FINDING (fixed in workflows/runScript.ts: a realm code counts only when the realm issued it):
    // REALM_CODES were accepted from any error, so a script that threw { code: 'script_memory_limit' }
    // made its run fail as if the service had stopped it for memory (the API's run status and the run
    // history showed the service's code, and an operator went looking for a memory problem).
    const outcomeOf = actionOutcomes(await useRuntime());
    for (const code of ['script_memory_limit', 'record_too_large', 'invalid_script']) {
      const forged = await outcomeOf(
        `forge-${code}`,
        `async function () { throw Object.assign(new Error('looks official'), { code: '${code}' }); }`,
      );
      expect(forged).toEqual({ code: 'script_error' });
    }
  }, 180_000);

  it("a script cannot name its run's failure type: a forged operation error is script_error, a real one keeps its code", async () => {
    const outcomeOf = actionOutcomes(await useRuntime());
    const forged = await outcomeOf(
      'forger',
      `async function () { throw Object.assign(new Error('looks official'), { name: 'OperationError', code: 'run_superseded' }); }`,
    );
    expect(forged).toEqual({ code: 'script_error' });
    const genuine = await outcomeOf('bad-method', `async function (svc) { await svc.batchSave([{ id: 1 }], 'Row'); }`);
    expect(genuine).toEqual({ code: 'invalid_operation' });
  }, 120_000);

  it("a code the connection service raises on a request reaches the script and the run's caller as it is", async () => {
    // Found by review: missing_oauth_client (an OAuth 1 integration without its client secret, an OAuth 2
    // refresh without a client id) was in no list of run codes, so it reached the script as http_error.
    const connections = new FailingConnections();
    const outcomeOf = actionOutcomes(await useRuntime({ connections: () => connections }));
    const codes: ErrorCode[] = [
      'missing_oauth_client',
      'connection_refresh_failed',
      'connection_refresh_unavailable',
      'credentials_type_mismatch',
      'corrupt_credentials',
      'decryption_failed',
      'base_url_not_allowed',
      'missing_base_url',
    ];
    for (const code of codes) {
      connections.code = code;
      const outcome = await outcomeOf(`request-${code}`, `async function (svc) { await svc.get({ endpoint: '/x' }); }`);
      expect({ code, outcome }).toEqual({ code, outcome: { code } });
    }
  }, 180_000);
});
