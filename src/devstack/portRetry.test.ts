import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startOnFreePorts, type PortChooser, type PortStart } from './portRetry.js';
import { DevStackError, freePorts } from './process.js';

// Real listeners: the one a test holds, and the ones a start binds (closed again after each test).
const listeners: Server[] = [];
afterEach(async () => {
  await Promise.all(listeners.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listen(port = 0): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  listeners.push(server);
  return server;
}

const portOf = (server: Server): number => (server.address() as { port: number }).port;

/** Binds every port as a server does, saying what Node says when one is taken. */
async function bindAll(ports: Record<string, number>): Promise<PortStart<Record<string, number>>> {
  const bound: Server[] = [];
  try {
    for (const port of Object.values(ports)) bound.push(await listen(port));
    return { started: ports };
  } catch (error) {
    await Promise.all(bound.map((server) => new Promise((resolve) => server.close(resolve))));
    return { portTaken: `Error: ${(error as Error).message}` };
  }
}

/** The chooser of the race: the port the kernel found free was taken before the server bound it. */
function raceOn(held: number, times: number): { choose: PortChooser; calls: number[][] } {
  const calls: number[][] = [];
  const choose: PortChooser = async (count, taken) => {
    const free = await freePorts(count, [...taken, held]);
    if (calls.length < times) free[free.length - 1] = held;
    calls.push(free);
    return free;
  };
  return { choose, calls };
}

describe('startOnFreePorts: a port found free and taken before the bind', () => {
  it('starts again on other ports when the first start finds its metrics port taken', async () => {
    const held = portOf(await listen());
    const { choose, calls } = raceOn(held, 1);
    const ports = await startOnFreePorts({
      what: 'the server',
      chosen: ['HTTP', 'metrics'],
      remedy: '',
      choose,
      start: bindAll,
    });
    expect(calls).toHaveLength(2);
    expect(calls[0]).toContain(held);
    expect(ports['metrics']).not.toBe(held);
    expect(ports).toEqual({ HTTP: calls[1]![0], metrics: calls[1]![1] });
  });

  it('after 3 starts that each found a port taken, says which port and what to do', async () => {
    const held = portOf(await listen());
    const { choose, calls } = raceOn(held, 3);
    const failure = startOnFreePorts({
      what: 'the server',
      chosen: ['HTTP', 'metrics'],
      remedy: 'Set SERVER_ADDRESS to use a running server instead.',
      choose,
      start: bindAll,
    });
    await expect(failure).rejects.toThrow(DevStackError);
    await expect(failure).rejects.toThrow(
      new RegExp(
        `the server could not bind port ${held} \\(metrics\\): a port found free was taken before it bound it, on each of 3 starts.*` +
          `EADDRINUSE.*Set SERVER_ADDRESS to use a running server instead\\.`,
      ),
    );
    expect(calls).toHaveLength(3);
  });

  it('keeps a port the caller fixed on every start, and says at once when that one is taken', async () => {
    const fixed = portOf(await listen());
    const chosen: number[][] = [];
    const failure = startOnFreePorts({
      what: 'the server',
      chosen: ['metrics'],
      fixed: { gRPC: fixed },
      remedy: 'Or set SERVER_ADDRESS.',
      choose: async (count, taken) => {
        expect(taken).toContain(fixed);
        const free = await freePorts(count, taken);
        chosen.push(free);
        return free;
      },
      start: bindAll,
    });
    await expect(failure).rejects.toThrow(
      new RegExp(
        `could not bind port ${fixed} \\(gRPC\\), which was asked for: another process holds it.*Or set SERVER_ADDRESS`,
      ),
    );
    expect(chosen).toHaveLength(1);
  });

  it('does not start again for a failure other than a taken port', async () => {
    let starts = 0;
    await expect(
      startOnFreePorts({
        what: 'the server',
        chosen: ['HTTP'],
        remedy: '',
        start: () => {
          starts++;
          throw new Error('no such binary');
        },
      }),
    ).rejects.toThrow('no such binary');
    expect(starts).toBe(1);
  });

  it('chooses again when a chosen port is one the server derives from another (the UI: gRPC + 1000)', async () => {
    const [first, second] = await freePorts(2, []);
    const picks = [
      [first!, first! + 1000],
      [first!, second!],
    ];
    const started = await startOnFreePorts({
      what: 'the server',
      chosen: ['gRPC', 'metrics'],
      derived: ({ gRPC }) => ({ UI: gRPC + 1000 }),
      remedy: '',
      choose: () => Promise.resolve(picks.shift()!),
      start: (ports) => Promise.resolve({ started: ports }),
    });
    expect(started).toEqual({ gRPC: first, metrics: second });
  });
});
