/**
 * What the docs promise about a crashed run and about `svc.lastSyncDate`, against what the code does
 * (issue 19). The behaviour itself is measured elsewhere: test/runtime/crash.test.ts (the steps of the
 * last seconds before a kill run again) and test/runtime/syncEntity.test.ts (lastSyncDate is the start
 * of the last successful run). These checks keep the sentences from drifting back to stronger claims.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const read = (path: string): string =>
  readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8')
    .replace(/^\s*\*\s?/gm, ' ') // JSDoc line starts
    .replace(/\s+/g, ' ');

/** The phrases of `text` that match, so that a failure names them instead of printing the file. */
const found = (text: string, ...patterns: RegExp[]): string[] =>
  patterns.flatMap((pattern) => [...text.matchAll(new RegExp(pattern.source, 'gi'))].map((match) => match[0]));

const OVERCLAIMS = [
  /completed requests are not sent again/,
  /resumes where it was/,
  /without repeating completed requests/,
  /records are not saved twice/,
];

describe('the docs claim what the code does', () => {
  it.each(['README.md', 'docs/scripts.md', 'src/runtime/public.ts'])(
    '%s does not promise that no completed step runs again after a crash',
    (path) => {
      expect(found(read(path), ...OVERCLAIMS)).toEqual([]);
    },
  );

  it.each(['README.md', 'docs/scripts.md', 'src/runtime/public.ts'])(
    '%s says that a request may be sent again after a crash',
    (path) => {
      expect(found(read(path), /may be sent again/)).not.toEqual([]);
    },
  );

  it.each(['docs/scripts.md', 'src/runtime/public.ts'])(
    '%s describes lastSyncDate as the start of the last successful run',
    (path) => {
      const text = read(path);
      expect(found(text, /last successful run of this sync for this connection ended/)).toEqual([]);
      expect(found(text, /When the last successful run of this sync for this connection started/)).not.toEqual([]);
    },
  );
});
