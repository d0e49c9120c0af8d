import { describe, expect, it, vi } from 'vitest';
import { createLogger, log, LOG_CENSOR, readable, setLogDestination, type LogLevelName } from './log.js';
import { loadSettings } from './settings.js';

/** A logger of the service's shape whose lines are kept, parsed, instead of written. */
function capture(level: LogLevelName = 'info') {
  const lines: string[] = [];
  const logger = createLogger({ level, destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines, entries: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('the service log', () => {
  it('writes one JSON object a line: ISO time, level name, message and the fields given', () => {
    const { logger, lines, entries } = capture();
    logger.info({ component: 'api', status: 200 }, 'request');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\{.*\}\n$/);
    expect(entries()[0]).toMatchObject({ level: 'info', message: 'request', component: 'api', status: 200 });
    expect(String(entries()[0]?.['time'])).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('redacts the values of secret fields, at the top level, one level down and in headers', () => {
    const { logger, lines, entries } = capture();
    const secrets = {
      authorization: 'Bearer sk_top_level_1234',
      secretKey: 'sk_secret_key_5678',
      client_secret: 'cs_client_secret_9012',
      access_token: 'at_access_token_3456',
      refresh_token: 'rt_refresh_token_7890',
      password: 'pw_password_2468',
    };
    logger.warn(
      {
        ...secrets,
        connection: { ...secrets, id: 'c1' },
        headers: { authorization: 'Basic dXNlcjpwYXNzd29yZA==', cookie: 'session=s3cr3t-cookie', accept: 'json' },
        request: { headers: { authorization: 'Bearer nested_header_1357', 'x-api-key': 'xk_api_key_0000' } },
      },
      'an object logged whole',
    );
    const text = lines.join('');
    for (const value of [
      ...Object.values(secrets),
      'dXNlcjpwYXNzd29yZA==',
      's3cr3t-cookie',
      'nested_header_1357',
      'xk_api_key_0000',
    ]) {
      expect(text).not.toContain(value);
    }
    const entry = entries()[0] ?? {};
    for (const field of Object.keys(secrets)) {
      expect(entry[field]).toBe(LOG_CENSOR);
      expect((entry['connection'] as Record<string, unknown>)[field]).toBe(LOG_CENSOR);
    }
    // What is not a secret stays readable, and the caller's object is as it was.
    expect(entry).toMatchObject({ connection: { id: 'c1' }, headers: { accept: 'json' } });
    const logged = { connection: { id: 'c2', client_secret: 'cs_kept_by_the_caller' } };
    logger.info(logged, 'again');
    expect(logged.connection.client_secret).toBe('cs_kept_by_the_caller');
  });

  it('leaves out what is below its level, and writes nothing when silent', () => {
    const warnOnly = capture('warn');
    warnOnly.logger.info('not shown');
    warnOnly.logger.warn('shown');
    expect(warnOnly.entries().map((entry) => entry['message'])).toEqual(['shown']);
    const silent = capture('silent');
    silent.logger.error('not shown either');
    expect(silent.lines).toEqual([]);
  });

  it('shows an error with its class, message and stack', () => {
    const { logger, entries } = capture();
    logger.error({ err: new TypeError('no such thing') }, 'failed');
    expect(entries()[0]?.['err']).toMatchObject({ type: 'TypeError', message: 'no such thing' });
    expect(String((entries()[0]?.['err'] as { stack?: unknown }).stack)).toContain('TypeError: no such thing');
  });

  it('reads as a line of text on a terminal', () => {
    const { logger, lines } = capture();
    logger.warn({ component: 'db', attempt: 2 }, 'connection lost');
    expect(readable(lines[0] ?? '')).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}\[db\] connection lost attempt=2\n$/);
    expect(readable('not json\n')).toBe('not json\n');
  });

  it("writes the process's log to stdout, or to stderr for a command whose stdout is its answer", () => {
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const text = (spy: typeof stdout) => spy.mock.calls.map(([chunk]) => String(chunk)).join('');
    let written: string[];
    try {
      log.warn({ component: 'test' }, 'to stdout');
      setLogDestination('stderr');
      log.warn({ component: 'test' }, 'to stderr');
      written = [text(stdout), text(stderr)];
    } finally {
      setLogDestination('stdout');
      stdout.mockRestore();
      stderr.mockRestore();
    }
    expect(written).toEqual([expect.stringContaining('to stdout'), expect.stringContaining('to stderr')]);
    expect(written[0]).not.toContain('to stderr');
  });

  it('takes its level from SERVICE_LOG_LEVEL, info by default, and refuses an unknown one by name', () => {
    expect(loadSettings({}).SERVICE_LOG_LEVEL).toBe('info');
    expect(loadSettings({ SERVICE_LOG_LEVEL: 'warn' }).SERVICE_LOG_LEVEL).toBe('warn');
    expect(() => loadSettings({ SERVICE_LOG_LEVEL: 'loud' })).toThrow(/SERVICE_LOG_LEVEL/);
  });
});
