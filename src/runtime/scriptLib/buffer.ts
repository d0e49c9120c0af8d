/**
 * `Buffer` for scripts: the global (`Buffer.from(token).toString('base64')`) and `import { Buffer } from
 * 'buffer'`. Node's Buffer does not exist in a script's realm; `service compile` bundles this module into
 * the scripts that use it (src/cli/scriptModules.ts). It is the `buffer` package (the browser
 * implementation of Node's API) with the `base64url` encoding Node has and that package lacks.
 */
// A deep path: 'buffer' itself is this module for scripts (src/cli/scriptModules.ts).
import { Buffer } from 'buffer/index.js';

type Encoding = Parameters<typeof Buffer.byteLength>[1];

const toBase64Url = (base64: string): string => base64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const fromBase64Url = (text: string): string => text.replace(/-/g, '+').replace(/_/g, '/');
const isBase64Url = (encoding: unknown): boolean =>
  typeof encoding === 'string' && encoding.toLowerCase() === 'base64url';

// The module is bundled into each script and evaluated in that run's realm only: these changes are the run's.
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with .call on a Buffer below
const toText = Buffer.prototype.toString;
Buffer.prototype.toString = function toString(this: Buffer, encoding?: string, start?: number, end?: number): string {
  if (isBase64Url(encoding)) return toBase64Url(toText.call(this, 'base64', start, end));
  return toText.call(this, encoding as never, start, end);
};
const from = Buffer.from.bind(Buffer) as (value: unknown, encoding?: unknown, length?: unknown) => Buffer;
Buffer.from = function (value: unknown, encoding?: unknown, length?: unknown): Buffer {
  if (typeof value === 'string' && isBase64Url(encoding)) return from(fromBase64Url(value), 'base64');
  return from(value, encoding, length);
} as typeof Buffer.from;
const isEncoding = Buffer.isEncoding.bind(Buffer);
Buffer.isEncoding = (encoding: string): boolean => isBase64Url(encoding) || isEncoding(encoding);
const byteLength = Buffer.byteLength.bind(Buffer);
Buffer.byteLength = (value: string, encoding?: Encoding) =>
  typeof value === 'string' && isBase64Url(encoding)
    ? byteLength(fromBase64Url(value), 'base64')
    : byteLength(value, encoding);

export { Buffer };
export default { Buffer };
