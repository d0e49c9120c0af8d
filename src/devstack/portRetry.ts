import { DevStackError, freePorts, log } from './process.js';

/** Starts of a server when a port found free was taken before it could bind it. */
export const PORT_ATTEMPTS = 3;

/** How a server's output says it could not bind a port (Go and Postgres: the OS's words; Node: its code). */
export function saysPortTaken(output: string): boolean {
  return /address already in use|EADDRINUSE/i.test(output);
}

/** What one start gave: the thing started, or the output in which the server said a port was taken. */
export type PortStart<T> = { started: T } | { portTaken: string };

/** Gives `count` distinct free loopback ports, none in `taken` (process.ts's freePorts). */
export type PortChooser = (count: number, taken: readonly number[]) => Promise<number[]>;

export interface StartOnFreePortsOptions<Name extends string, T> {
  /** Who starts, for messages: "the Temporal dev server". */
  what: string;
  /** The ports to choose free on every attempt, by name ("metrics"). */
  chosen: readonly Name[];
  /** Ports the caller fixed (a given gRPC port): kept on every attempt, never chosen again. */
  fixed?: Partial<Record<Name, number>>;
  /** Ports the server also binds that follow from these (the dev server's UI: gRPC + 1000), by name. */
  derived?: (ports: Record<Name, number>) => Record<string, number>;
  /** What the user can do when the ports keep being taken (an address to set instead). */
  remedy: string;
  /** Starts on `ports`; throws for any failure other than a port taken. */
  start: (ports: Record<Name, number>) => Promise<PortStart<T>>;
  attempts?: number;
  /** Tests: the chooser that makes the race happen. */
  choose?: PortChooser;
}

/**
 * Starts a server on ports found free, again on other ports when it said one was taken.
 *
 * A port found free may be taken before the server binds it: the probe is closed and the number
 * handed over, and in between another listener, or the local port of an outgoing connection (the
 * kernel hands out both from the same range), can take it. The server then exits saying so, and is
 * started again on newly chosen ports, up to `attempts` times (a CI run lost a test to this). A port
 * the caller fixed is never chosen again: when that one is taken, the error says so at once.
 */
export async function startOnFreePorts<Name extends string, T>(options: StartOnFreePortsOptions<Name, T>): Promise<T> {
  const attempts = options.attempts ?? PORT_ATTEMPTS;
  const choose = options.choose ?? freePorts;
  const fixed = Object.entries(options.fixed ?? {}).filter((entry): entry is [Name, number] => entry[1] !== undefined);
  for (let attempt = 1; ; attempt++) {
    const { ports, derived } = await choosePorts(options, fixed, choose);
    const outcome = await options.start(ports);
    if ('started' in outcome) return outcome.started;

    const taken = takenPorts({ ...ports, ...derived }, outcome.portTaken);
    const detail = lastLines(outcome.portTaken);
    const fixedTaken = taken.filter(([name]) => fixed.some(([fixedName]) => fixedName === name));
    if (fixedTaken.length > 0) {
      throw new DevStackError(
        'port_taken',
        `${options.what} could not bind ${describePorts(fixedTaken)}, which was asked for: another process holds it (${detail}). ` +
          `Stop that process or ask for another port. ${options.remedy}`,
      );
    }
    if (attempt >= attempts) {
      throw new DevStackError(
        'port_taken',
        `${options.what} could not bind ${taken.length > 0 ? describePorts(taken) : `one of ${describePorts(Object.entries(ports))}`}: ` +
          `a port found free was taken before it bound it, on each of ${attempts} starts on other free ports (${detail}). ` +
          `Something on this machine takes loopback ports as fast as they are freed; run again once it is done, ` +
          `or stop it. ${options.remedy}`,
      );
    }
    log(
      `${options.what} found ${taken.length > 0 ? describePorts(taken) : 'a port'} taken; starting it again on other ports`,
    );
  }
}

/** Free ports for the chosen names, none of them one the server derives from the others. */
async function choosePorts<Name extends string>(
  options: StartOnFreePortsOptions<Name, unknown>,
  fixed: [Name, number][],
  choose: PortChooser,
): Promise<{ ports: Record<Name, number>; derived: Record<string, number> }> {
  for (let pick = 1; ; pick++) {
    const free = await choose(
      options.chosen.length,
      fixed.map(([, port]) => port),
    );
    const ports = Object.fromEntries([...options.chosen.map((name, index) => [name, free[index]]), ...fixed]) as Record<
      Name,
      number
    >;
    const derived = options.derived?.(ports) ?? {};
    const all = Object.values<number>(ports);
    // A clash is only likely when the kernel hands out ports close together; then another pick.
    if (pick >= 20 || !Object.values(derived).some((port) => all.includes(port))) return { ports, derived };
  }
}

/**
 * The ports named where the server says one is taken (`127.0.0.1:50123: bind: address already in
 * use`, Postgres's `already running on port 50123`), by their name.
 */
function takenPorts<Name extends string>(ports: Record<Name, number>, output: string): [Name, number][] {
  const said = output
    .split('\n')
    .filter((line) => TAKEN.test(line))
    .join('\n');
  return (Object.entries(ports) as [Name, number][]).filter(([, port]) =>
    new RegExp(`(?<!\\d)${port}(?!\\d)`).test(said),
  );
}

const TAKEN = /in use|EADDRINUSE|already running on port/i;

function describePorts(ports: readonly (readonly [string, number])[]): string {
  return ports.map(([name, port]) => `port ${port} (${name})`).join(' and ');
}

function lastLines(output: string): string {
  const lines = output
    .trim()
    .split('\n')
    .filter((line) => TAKEN.test(line));
  return (lines.at(-1) ?? output.trim().split('\n').at(-1) ?? 'no output').trim().slice(0, 400);
}
