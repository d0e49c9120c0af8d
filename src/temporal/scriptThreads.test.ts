import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { threadMarksDirFor } from './scriptThreads.js';

const install = {
  databaseUrl: 'postgres://service:secret@db.internal:5432/service',
  temporalAddress: 'temporal.internal:7233',
  namespace: 'default',
  taskQueue: 'integration-service',
};

describe('the default folder of thread marks', () => {
  it('is the same for every worker process of one install, under the temporary folder', () => {
    const dir = threadMarksDirFor(install);
    expect(dir).toBe(threadMarksDirFor({ ...install }));
    expect(dir.startsWith(join(tmpdir(), 'integration-service-threads'))).toBe(true);
    // The password is not part of the key: a rotated password is the same install.
    expect(threadMarksDirFor({ ...install, databaseUrl: 'postgres://service:rotated@db.internal:5432/service' })).toBe(
      dir,
    );
    expect(dir).not.toContain('secret');
  });

  it('differs between installs: another database, Temporal server, namespace or task queue', () => {
    const others = [
      { ...install, databaseUrl: 'postgres://service:secret@db.internal:5432/other' },
      { ...install, databaseUrl: 'postgres://service:secret@db.internal:5433/service' },
      { ...install, databaseUrl: 'postgres://service:secret@other.internal:5432/service' },
      { ...install, temporalAddress: 'temporal.internal:7234' },
      { ...install, namespace: 'staging' },
      { ...install, taskQueue: 'integration-service-2' },
    ].map(threadMarksDirFor);
    expect(new Set([threadMarksDirFor(install), ...others]).size).toBe(others.length + 1);
  });

  it('takes a DATABASE_URL that is not a URL (a socket path, key=value) without failing', () => {
    const a = threadMarksDirFor({ ...install, databaseUrl: 'host=/var/run/postgresql dbname=a' });
    const b = threadMarksDirFor({ ...install, databaseUrl: 'host=/var/run/postgresql dbname=b' });
    expect(a).not.toBe(b);
  });
});
