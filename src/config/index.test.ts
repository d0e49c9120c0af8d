import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isServiceError } from '../errors.js';
import { ConfigError, loadConfigFile } from './index.js';

const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/configs/${name}`, import.meta.url));

describe('loadConfigFile', () => {
  it('returns the normalized config of a valid file (warnings allowed)', async () => {
    const config = await loadConfigFile(fixture('valid-with-warnings.yaml'));
    expect(config.integrations[0]?.syncs[0]).toMatchObject({ name: 'issues', autoStart: false, trackDeletes: true });
  });

  it('throws a ServiceError with code invalid_config listing every error with its position', async () => {
    const error: unknown = await loadConfigFile(fixture('several-mistakes.yaml')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    if (!isServiceError(error) || !(error instanceof ConfigError)) throw new Error('not a ConfigError');
    expect(error.code).toBe('invalid_config');
    expect(error.status).toBe(400);
    expect(error.problems).toHaveLength(6);
    expect(error.message).toContain('has 6 errors:');
    expect(error.message).toContain('several-mistakes.yaml:11:9 error unknown_key');
  });
});
