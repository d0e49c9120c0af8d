/**
 * Which run killed a worker (docs/architecture.md "Runaway scripts"). A script that exhausts memory
 * makes V8 abort the whole worker process (a large allocation past the heap limit is fatal even in a
 * worker thread), or terminate its workflow thread, after which the SDK fails the Worker: either way
 * every run of the process loses its workflow task, and the dying process can do nothing more.
 *
 * So each workflow thread keeps the id of the run whose script it is executing in a small file
 * (src/sandbox/hostRealm.ts), rewritten in place whenever that changes. The next worker process on
 * the host reads the files its dead predecessors left and signals `scriptIncident` to each run named
 * there; the watchdog (src/temporal/runaway.ts) stops a run with two such incidents. Runs that were only
 * waiting are never named, and continue after the restart.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { SCRIPT_INCIDENT_SIGNAL } from '../runtime/definitions.js';
import { shareThreadMarks } from '../sandbox/workerSide.js';
import { convict, INCIDENTS_TO_STOP } from './runaway.js';
import { log } from '../log.js';

export interface ScriptIncident {
  cause: string;
}

// <pid>-<process nonce>-<thread id>: the nonce tells a restarted container's process (often the same
// PID) from its predecessor.
const MARK_FILE = /^(\d+)-([0-9a-z]+)-(\d+)$/;
const OWNER = `${process.pid}-${randomBytes(6).toString('hex')}`;

/** How long an incident counts towards stopping a run. */
const INCIDENT_MEMORY_MS = 30 * 60 * 1000;

/** A stretch of script that grew the heap this much was filling it, whoever allocated last. */
const HEAVY_BYTES = 8 * 1024 * 1024;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A run blamed for a worker's death, and whether it had just filled the heap. */
export interface Blamed {
  workflowId: string;
  /** The execution that was executing (marks written since issue 31); absent: the workflow's current one. */
  runId?: string | undefined;
  heavy: boolean;
  /** Incidents of this run on this host so far, this one included. */
  incidents: number;
}

/**
 * The run to blame from a thread's mark (src/sandbox/hostRealm.ts): the run whose recent stretch of
 * script grew the heap by HEAVY_BYTES or more, or else the run that was executing.
 */
export function blame(mark: string): Omit<Blamed, 'incidents'> | undefined {
  const [executing = '', heaviest = '', grew = '0'] = mark.trimEnd().split('\n');
  if (heaviest && Number(grew) >= HEAVY_BYTES) return { ...execution(heaviest), heavy: true };
  return executing ? { ...execution(executing), heavy: false } : undefined;
}

/** `<run id>\t<workflow id>` (a run id has no tab), or a workflow id alone (a mark of earlier code). */
function execution(marked: string): { workflowId: string; runId?: string } {
  const tab = marked.indexOf('\t');
  return tab < 0 ? { workflowId: marked } : { runId: marked.slice(0, tab), workflowId: marked.slice(tab + 1) };
}

export interface ThreadMarks {
  dir: string;
  /**
   * Runs to blame for the death of workers of this host (each dead thread's file is claimed by one
   * process), with the number of incidents each has had on this host so far.
   */
  collectOrphans(): Blamed[];
  /** Removes this process's files, after a clean shutdown (nobody is to blame). */
  clear(): void;
}

/** What tells one install of the service from another on a shared host. */
export interface InstallIdentity {
  databaseUrl: string;
  temporalAddress: string;
  namespace: string;
  taskQueue: string;
}

/**
 * The default folder of thread marks: one per install on this host (its database, Temporal server,
 * namespace and task queue), so that worker processes of two installs never read each other's marks and
 * signal runs of the other install. src/main.ts uses it unless SERVICE_THREAD_MARKS_DIR is set.
 */
export function threadMarksDirFor(install: InstallIdentity): string {
  let database = install.databaseUrl;
  try {
    const url = new URL(install.databaseUrl);
    // Without the password, so that rotating it keeps the folder (and the blame it holds).
    database = `${url.protocol}//${url.username}@${url.host}${url.pathname}`;
  } catch {
    // Not a URL (key=value, a socket path): the whole string is the database's identity.
  }
  const key = createHash('sha256')
    .update(JSON.stringify([database, install.temporalAddress, install.namespace, install.taskQueue]))
    .digest('hex')
    .slice(0, 16);
  return join(tmpdir(), 'integration-service-threads', key);
}

/**
 * Prepares the folder of thread marks and tells the workflow threads about it (the sandbox hands it
 * to threads that start later, src/sandbox/workerSide.ts): call before the Workers are created.
 */
export function prepareThreadMarks(dir: string): ThreadMarks {
  mkdirSync(dir, { recursive: true });
  shareThreadMarks({ dir, owner: OWNER });
  return {
    dir,
    collectOrphans() {
      const blamed: Blamed[] = [];
      const countsFile = join(dir, 'incidents.json');
      for (const name of readdirSync(dir)) {
        const match = MARK_FILE.exec(name);
        if (!match || name.startsWith(`${OWNER}-`)) continue;
        const pid = Number(match[1]);
        // Another owner with this process's PID is a predecessor (a restarted container); any other
        // PID is dead when no such process exists (this folder belongs to one host or pod).
        if (pid !== process.pid && alive(pid)) continue;
        const claimed = join(dir, `${name}.claimed-${process.pid}`);
        try {
          renameSync(join(dir, name), claimed);
        } catch {
          continue; // another process of this host claimed it first
        }
        const suspect = blame(readFileSync(claimed, 'utf8'));
        rmSync(claimed, { force: true });
        if (suspect) blamed.push({ ...suspect, incidents: 0 });
      }
      if (blamed.length === 0) return blamed;
      // Counted on this host, so that a run is convicted even if its incident signals (which reset
      // its workflow task's attempt count) keep the watchdog from seeing its failures. Incidents
      // older than INCIDENT_MEMORY_MS are forgotten: two far-apart coincidences convict nobody.
      const now = Date.now();
      let counts: Record<string, { count: number; at: number }> = {};
      try {
        counts = JSON.parse(readFileSync(countsFile, 'utf8')) as typeof counts;
      } catch {
        // none yet, or unreadable: start over
      }
      const recent = Object.entries(counts).filter(([, entry]) => now - entry.at < INCIDENT_MEMORY_MS);
      counts = Object.fromEntries(recent.slice(-1000));
      for (const entry of blamed) {
        // Per execution: an entity's next run is another suspect.
        const key = entry.runId === undefined ? entry.workflowId : `${entry.workflowId}\t${entry.runId}`;
        const count = (counts[key]?.count ?? 0) + 1;
        counts[key] = { count, at: now };
        entry.incidents = count;
      }
      // Replaced whole, so that a process that dies writing it leaves the previous counts.
      writeFileSync(`${countsFile}.${process.pid}`, JSON.stringify(counts));
      renameSync(`${countsFile}.${process.pid}`, countsFile);
      return blamed;
    },
    clear() {
      for (const name of readdirSync(dir)) {
        if (name.startsWith(`${OWNER}-`)) rmSync(join(dir, name), { force: true });
      }
    },
  };
}

/**
 * Records, in the history of each run blamed, that its worker died while it was executing (or had
 * just filled the heap), and stops a run with INCIDENTS_TO_STOP incidents.
 */
export async function reportIncidents(client: Client, blamed: Blamed[]): Promise<void> {
  const cause = 'a worker died while this run was executing its script or had just filled the heap';
  await Promise.all(
    blamed.map(async ({ workflowId, runId, incidents, heavy }) => {
      try {
        if (incidents >= INCIDENTS_TO_STOP) {
          const verdict = await convict(client, workflowId, { incidents, heavy, runId });
          if (!verdict) return;
          log.warn(
            { component: 'worker', workflowId },
            `[worker] run ${workflowId} stopped after ${incidents} worker deaths: ${verdict.code}`,
          );
        } else {
          // To the execution that was executing: one that ended since (its run with it) hears nothing.
          await client.workflow
            .getHandle(workflowId, runId)
            .signal<[ScriptIncident]>(SCRIPT_INCIDENT_SIGNAL, { cause });
          log.warn(
            { component: 'worker', workflowId },
            `[worker] a worker died while run ${workflowId} was executing its script: incident recorded`,
          );
        }
      } catch (error) {
        // The run may have ended since.
        log.warn(
          { component: 'worker', workflowId },
          `[worker] could not record an incident for run ${workflowId}: ${(error as Error).message}`,
        );
      }
    }),
  );
}
