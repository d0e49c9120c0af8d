import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import type { Request } from 'express';
import { ServiceError } from '../errors.js';
import { bodyLimitOf, JSON_TYPES, rawBodyOf } from './server.js';

const decoders = {
  gzip: promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
} as const;

const tooLarge = () =>
  new ServiceError('payload_too_large', 'The request body is larger than the limit of this server.');

/**
 * Reads the stream whole, refusing it past `limitBytes`. A refused body is left flowing (its rest read
 * and dropped), not destroyed: the client then gets the 413, where a destroyed socket would answer it
 * with a reset while it is still sending.
 */
function readWhole(req: Request, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limitBytes) {
        chunks.push(chunk);
        return;
      }
      stop();
      req.resume();
      reject(tooLarge());
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      stop();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/**
 * The request body as bytes, unparsed: what the JSON parser kept, or the stream read whole, refused
 * past the server's body limit. A JSON body sent compressed (`Content-Encoding: gzip`, `deflate`, `br`)
 * is inflated, as the JSON parser does, the limit applying to what it inflates to, unless `inflate` is
 * false (the proxy passes bytes on as sent, with their Content-Encoding).
 */
export async function readBodyBytes(req: Request, options: { inflate?: boolean } = {}): Promise<Buffer> {
  const parsed = rawBodyOf(req);
  if (parsed !== undefined) return parsed;
  const limitBytes = bodyLimitOf(req);
  const bytes = await readWhole(req, limitBytes);
  const encoding = (req.header('content-encoding') ?? 'identity').trim().toLowerCase();
  if (options.inflate === false || !req.is(JSON_TYPES) || encoding === 'identity') return bytes;
  if (!Object.hasOwn(decoders, encoding)) {
    throw new ServiceError('invalid_request', `Content-Encoding ${encoding.slice(0, 40)} is not gzip, deflate or br.`, {
      status: 415,
    });
  }
  try {
    return await decoders[encoding as keyof typeof decoders](bytes, { maxOutputLength: limitBytes });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge();
    throw new ServiceError('invalid_request', `The body is not valid ${encoding} data.`);
  }
}
