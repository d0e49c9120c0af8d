import { describe, expect, it } from 'vitest';
import { ServiceError } from '../errors.js';
import { ownServiceUnavailable, whileOwnServicesReturn } from './ownServices.js';

const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const adminShutdown = Object.assign(new Error('terminating connection due to administrator command'), {
  code: '57P01',
});

describe('a step waits for its own servers', () => {
  it('knows Postgres and Temporal going away from a failed query', () => {
    expect(ownServiceUnavailable(refused)).toBe(true);
    expect(ownServiceUnavailable(adminShutdown)).toBe(true);
    expect(ownServiceUnavailable(new ServiceError('temporal_unavailable', 'no answer', { retryable: true }))).toBe(
      true,
    );
    expect(ownServiceUnavailable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
    expect(ownServiceUnavailable(new ServiceError('unknown_connection', 'no such connection'))).toBe(false);
  });

  it('tries again while they cannot be reached, with growing pauses, and answers what the work answers', async () => {
    const pauses: number[] = [];
    let calls = 0;
    const answer = await whileOwnServicesReturn(
      () => (++calls < 5 ? Promise.reject(calls % 2 ? refused : adminShutdown) : Promise.resolve('ok')),
      { sleep: (ms) => (pauses.push(ms), Promise.resolve()) },
    );
    expect(answer).toBe('ok');
    expect(pauses).toEqual([100, 200, 400, 800]);
  });

  it('gives up past its wait, and never waits on an error of another kind', async () => {
    const unknown = new ServiceError('unknown_connection', 'no such connection');
    let calls = 0;
    await expect(
      whileOwnServicesReturn(() => (calls++, Promise.reject(unknown)), { sleep: () => Promise.resolve() }),
    ).rejects.toBe(unknown);
    expect(calls).toBe(1);
    await expect(
      whileOwnServicesReturn(() => Promise.reject(refused), {
        waitMs: 50,
        sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      }),
    ).rejects.toBe(refused);
  });
});
