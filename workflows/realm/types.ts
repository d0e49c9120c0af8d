/**
 * What the run (workflows/scriptRealm.ts) and the program it evaluates in a script's realm
 * (workflows/realm/bootstrap.ts) exchange. Types only: the bootstrap is code of another realm, loaded
 * as text, and shares nothing with the workflow bundle at run time.
 */
import type { RunErrorCode } from '../../src/errors.js';

/** How the realm builds one svc member (workflows/svcOperations.ts declares each member's shape). */
export type RealmShape =
  /** A method whose arguments go to the run as JSON, and whose answer comes back as JSON. */
  | 'call'
  /** batchSave / batchDelete: each record is measured and serialized on its own. */
  | 'write'
  /** svc.log: any message and an optional `{ level }`, as the field's format writes them. */
  | 'log'
  /** svc.paginate: an async iterator over the run's `paginate` and `paginate.next` operations. */
  | 'paginate'
  /** svc.zodValidateInput: runs in the realm, on the script's own zod schema. */
  | 'zodValidateInput'
  /** An operation the realm's own code calls (setTimeout, the iterator's next page), not a member. */
  | 'internal';

/** One svc member as the realm learns it. */
export interface RealmMember {
  name: string;
  shape: RealmShape;
}

/** What the script sees of svc besides its operations. */
export interface SvcShape {
  connectionId: string;
  providerConfigKey: string;
  /** The integration's provider, when the bundle names `provider` (LoadedScript.provider). */
  provider?: string | undefined;
  /** ISO 8601, or absent on a first run and a full resync. */
  lastSyncDate: string | undefined;
  webhook: unknown;
  /** The members the realm builds, from the operation table. */
  members: RealmMember[];
}

/**
 * The bridge the run hands the bootstrap. Functions of the workflow's realm: the bootstrap keeps them
 * in its closure and calls each through a guard; only strings and numbers cross.
 */
export interface RealmHost {
  /** Runs operation `name` with JSON arguments; answers through one of the two callbacks, as JSON. */
  call: (
    name: string,
    json: string,
    onResult: (json: string | undefined) => void,
    onError: (json: string) => void,
  ) => void;
  /** The workflow's deterministic clock (ms since the epoch). */
  now: () => number;
  /** The workflow's deterministic random number. */
  random: () => number;
  /** Loop protection: undefined, or the message of a spent budget. */
  tick: () => string | undefined;
  /** The realm (not the script) raised an error with this service code (src/errors.ts). */
  raised: (code: RunErrorCode) => void;
  /** A line of the script's console. */
  log: (level: string, message: string) => void;
  /** Parses a URL in the worker's realm: JSON of its parts, or `{ error }`. */
  parseUrl: (input: string, base: string, hasBase: boolean) => string;
  bufferBytes: number;
  allocationBytes: number;
  recordBytes: number;
  /** The most of a svc.log line the run keeps (characters): the realm cuts there, before the bridge. */
  logLineChars: number;
}

/** Runs one script (the bootstrap's answer): the outcome comes back through `onDone` or `onFail`, as JSON. */
export type StartScript = (
  factory: unknown,
  svcShape: string,
  inputJson: string | undefined,
  onDone: (json: string | undefined) => void,
  onFail: (description: string) => void,
) => void;

/** The bootstrap's own type: evaluated in the realm, it answers the function that starts the script. */
export type RealmSetup = (host: RealmHost) => StartScript;
