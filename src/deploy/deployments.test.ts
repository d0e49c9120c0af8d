import { describe, expect, it } from 'vitest';
import { isServiceError } from '../errors.js';
import { createDeployments, type DeploymentsDeps, MAX_LISTED_PROBLEMS } from './deployments.js';

/** A request is compiled and checked before anything is touched: these deps are never reached. */
const reached = (name: string) => () => {
  throw new Error(`deps.${name} reached before the request was checked`);
};
const untouched = new Proxy({} as DeploymentsDeps, {
  get: (_target, name) => new Proxy(reached(String(name)), { get: reached(String(name)) }),
});

describe('a deploy request refused for its service.yaml', () => {
  it('lists the first 100 problems and says how many there were', async () => {
    // 500 syncs that are numbers, not definitions: a problem each.
    const syncs = Array.from({ length: 500 }, (_, i) => `      s${i}: 1\n`).join('');
    const yaml = `integrations:\n  github:\n    syncs:\n${syncs}models: {}\n`;
    const measured: number[] = [];
    const failure = await createDeployments(untouched)
      .preview('env', { yaml, scripts: [] }, (work) => {
        measured.push(1);
        return work();
      })
      .catch((error: unknown) => error);
    expect(isServiceError(failure) && failure.code).toBe('invalid_config');
    const { message, details } = failure as { message: string; details: unknown[] };
    expect(details).toHaveLength(MAX_LISTED_PROBLEMS);
    expect(message).toMatch(/and \d+ more problems \((\d+) in all; the first 100 are listed\)/);
    expect(Number(/\((\d+) in all/.exec(message)?.[1])).toBeGreaterThanOrEqual(500);
    // The compile ran inside the caller's measure (the API charges its time to the caller's budget).
    expect(measured).toEqual([1]);
  });
});
