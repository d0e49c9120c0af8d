/**
 * The program that sets up a script's own realm (workflows/scriptRealm.ts). It is not a module of the
 * workflow bundle: the bundler loads this file as text (src/temporal/realmSourceLoader.cjs strips its
 * types, nothing else) and the run evaluates that text inside the realm, so it must stay one function
 * expression that uses nothing from outside itself (only `import type` above it).
 *
 * It receives the bridge to the run (`host`, an object of the workflow's realm), keeps the bridge's
 * functions in its closure and never hands the script anything of another realm: every value that
 * crosses is a string (JSON) or a number, and every object the script sees (svc, its promises, its
 * errors, URL, TextEncoder, Date) is built here, in the script's realm. A script that walks
 * `.constructor` from anything it holds reaches this realm's Function, which cannot compile code.
 *
 * svc's members are built from the list the run sends (`SvcShape.members`, from the operation table
 * workflows/svcOperations.ts): a member is declared there once, by its shape.
 *
 * It also puts in place, before the script runs: deterministic `Date` and `Math.random` (the
 * workflow's), a locked `Error.prepareStackTrace`, no `SharedArrayBuffer` or `WebAssembly`, and
 * buffer constructors that charge every allocation against the run's off-heap budget.
 */
/* eslint-disable @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-member-access,
   @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument,
   @typescript-eslint/no-explicit-any, @typescript-eslint/no-unused-expressions, @typescript-eslint/no-base-to-string,
   prefer-rest-params
   -- This is the boundary to a script's own realm: every value it handles comes from script code of
   unknown shape (what the script passes, throws or plants on prototypes), and it must use the realm's
   own intrinsics as the script left them at start (`arguments`, `Reflect.apply`) rather than helpers. */
import type { RunErrorCode } from '../../src/errors.js';
import type { RealmHost, RealmMember, StartScript, SvcShape } from './types.js';

(function setup(host: RealmHost): StartScript {
  'use strict';
  type AnyFunction = (...args: any[]) => any;
  type Description = Record<string, any> & { kind: string; message: string };
  const apply = Reflect.apply;
  const create = Object.create;
  const numberOf = Number;
  // Every function of the run is called through this guard. Whatever such a call throws (even a
  // RangeError that V8 raises in the run's own realm when the script exhausts the stack inside it) is
  // replaced here by an error of this realm: nothing of another realm ever reaches the script. The
  // answer is a primitive or nothing.
  function guarded(fn: AnyFunction, kind: 'none'): (...args: unknown[]) => undefined;
  function guarded(fn: AnyFunction, kind: 'string'): (...args: unknown[]) => string | undefined;
  function guarded(fn: AnyFunction, kind: 'number'): (...args: unknown[]) => number;
  function guarded(fn: AnyFunction, kind: 'none' | 'string' | 'number') {
    return function (this: unknown): unknown {
      let answer: unknown;
      try {
        answer = apply(fn, undefined, arguments);
      } catch {
        throw new RangeError('the run could not answer (its stack or its limits ran out)');
      }
      if (kind === 'string') return typeof answer === 'string' ? answer : undefined;
      if (kind === 'number') return numberOf(answer);
      return undefined;
    };
  }
  const call = guarded(host.call, 'none');
  const now = guarded(host.now, 'number');
  const random = guarded(host.random, 'number');
  const tick = guarded(host.tick, 'string');
  // Tells the run that this realm (not the script) raised an error with a service code, so that the
  // run may fail with that code (a script's own error with the same code fails as script_error).
  const raised: (code: RunErrorCode) => void = guarded(host.raised, 'none');
  const log = guarded(host.log, 'none');
  const parseUrl = guarded(host.parseUrl, 'string');
  const limits = {
    bufferBytes: numberOf(host.bufferBytes),
    allocationBytes: numberOf(host.allocationBytes),
    recordBytes: numberOf(host.recordBytes),
    logLineChars: numberOf(host.logLineChars),
  };
  const isArray = Array.isArray;
  const slice = Array.prototype.slice;
  const max = Math.max;
  const g = globalThis as unknown as Record<string, any>;
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const P = Promise;
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const construct = Reflect.construct;
  const NativeDate = Date;
  const NativeArrayBuffer = ArrayBuffer;
  // Taken before the script runs (it may replace ArrayBuffer.isView later); a static function.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const isView = ArrayBuffer.isView;
  const FR = FinalizationRegistry;

  // No hooks into other realms' stack frames, no shared memory, no WebAssembly, and no callbacks that
  // the garbage collector calls outside the run's activations (a FinalizationRegistry's callback runs
  // where no time limit holds, and one that throws kills the thread; this realm keeps its own).
  defineProperty(Error, 'prepareStackTrace', { value: undefined, writable: false, configurable: false });
  delete g['SharedArrayBuffer'];
  delete g['WebAssembly'];
  delete g['Atomics'];
  delete g['FinalizationRegistry'];
  delete g['WeakRef'];

  // Deterministic time and randomness: the workflow's (replay sees the same values).
  const DateProxy: DateConstructor = new Proxy(NativeDate, {
    apply() {
      return new NativeDate(now()).toString();
    },
    construct(target, args, newTarget) {
      return construct(target, args.length === 0 ? [now()] : args, newTarget === DateProxy ? target : newTarget);
    },
  });
  defineProperty(NativeDate, 'now', {
    value: function now_() {
      return now();
    },
    writable: false,
    configurable: false,
  });
  defineProperty(NativeDate.prototype, 'constructor', { value: DateProxy, writable: true, configurable: true });
  g['Date'] = DateProxy;
  Math.random = function random_() {
    return random();
  };
  // Intl.DateTimeFormat formats the process's real clock when it is given no date (a review: a branch on
  // `new Intl.DateTimeFormat().format()` took another path on replay): the workflow's time instead. The
  // originals are called through `apply` as taken at start (a second review: a script that replaced
  // Function.prototype.call received them as its `this`), and stay writable and configurable as native.
  const dateTimeFormat = Intl.DateTimeFormat.prototype;
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const boundFormat = Object.getOwnPropertyDescriptor(dateTimeFormat, 'format')!.get!;
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const formatToParts = dateTimeFormat.formatToParts;
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const [cached, cache] = [WeakMap.prototype.get, WeakMap.prototype.set];
  type Format = (date?: Date | number) => string;
  const formats = new WeakMap<object, Format>();
  const wrapped = {
    // A getter, as native: one bound function per formatter, which `new` refuses (an arrow function).
    get format(): Format {
      const format: Format = apply(boundFormat, this, []);
      const known: Format | undefined = apply(cached, formats, [this]);
      if (known) return known;
      const format_ = (date?: Date | number): string => format(date === undefined ? now() : date);
      apply(cache, formats, [this, format_]);
      return format_;
    },
    formatToParts(this: Intl.DateTimeFormat, date?: Date | number): Intl.DateTimeFormatPart[] {
      return apply(formatToParts, this, [date === undefined ? now() : date]);
    },
  };
  for (const name of ['format', 'formatToParts']) {
    // Writable (a value) and configurable as native; not enumerable.
    const descriptor = Object.getOwnPropertyDescriptor(wrapped, name)!;
    descriptor.enumerable = false;
    defineProperty(dateTimeFormat, name, descriptor);
  }

  // Off-heap memory: every buffer allocation is charged to the run; a buffer that is collected gives
  // its bytes back. A single allocation above allocationBytes, or a total above bufferBytes, throws.
  let charged = 0;
  const released = new FR<number>((bytes) => {
    charged -= bytes;
  });
  function charge(bytes: number, what: string): void {
    if (!(bytes > 0)) return;
    if (bytes > limits.allocationBytes || charged + bytes > limits.bufferBytes) {
      const error = new RangeError(
        what +
          ' of ' +
          bytes +
          " bytes is over the run's buffer memory limit (" +
          limits.allocationBytes +
          ' bytes per allocation, ' +
          limits.bufferBytes +
          ' in all)',
      ) as RangeError & { code?: RunErrorCode };
      error.code = 'script_memory_limit';
      raised('script_memory_limit');
      throw error;
    }
    charged += bytes;
  }
  function chargeObject<T extends object>(object: T, bytes: number, what: string): T {
    charge(bytes, what);
    if (bytes > 0) released.register(object, bytes);
    return object;
  }
  function wrapConstructor(
    Native: any,
    name: string,
    bytesOf: (args: unknown[]) => number,
    after?: (made: any, args: unknown[]) => number,
  ): void {
    // bytesOf: what the call allocates, known before it (a length); after: what it allocated, for the
    // forms whose size shows only once made (a copy of an array or an iterable).
    const Wrapped = function (this: unknown) {
      if (new.target === undefined) throw new TypeError('Constructor ' + name + " requires 'new'");
      const args = slice.call(arguments) as unknown[];
      const before = bytesOf(args);
      charge(before, 'new ' + name);
      const made: object = construct(Native, args, new.target === Wrapped ? Native : new.target);
      if (before > 0) released.register(made, before);
      else if (after) chargeObject(made, after(made, args), 'new ' + name);
      return made;
    };
    defineProperty(Wrapped, 'name', { value: name });
    defineProperty(Wrapped, 'length', { value: Native.length });
    Object.setPrototypeOf(Wrapped, Object.getPrototypeOf(Native));
    for (const key of Reflect.ownKeys(Native)) {
      if (key === 'prototype' || key === 'name' || key === 'length') continue;
      defineProperty(Wrapped, key, Object.getOwnPropertyDescriptor(Native, key)!);
    }
    defineProperty(Wrapped, 'prototype', { value: Native.prototype, writable: false });
    defineProperty(Native.prototype, 'constructor', { value: Wrapped, writable: true, configurable: true });
    g[name] = Wrapped;
  }
  const size = (value: unknown): number =>
    typeof value === 'number' ? value : typeof value === 'bigint' ? Number(value) : 0;
  wrapConstructor(NativeArrayBuffer, 'ArrayBuffer', (args) => {
    const options = args[1] as { maxByteLength?: unknown } | null | undefined;
    const maxLength = options !== null && typeof options === 'object' ? size(options.maxByteLength) : 0;
    return max(size(args[0]), maxLength);
  });
  for (const method of ['transfer', 'transferToFixedLength']) {
    const native = (NativeArrayBuffer.prototype as any)[method];
    if (typeof native !== 'function') continue;
    defineProperty(NativeArrayBuffer.prototype, method, {
      value: {
        [method](this: unknown, length?: unknown) {
          return chargeObject(
            native.apply(this, arguments),
            length === undefined ? 0 : size(length),
            'ArrayBuffer ' + method,
          );
        },
      }[method],
      writable: true,
      configurable: true,
    });
  }
  const TypedArray = Object.getPrototypeOf(Int8Array);
  for (const name of [
    'Int8Array',
    'Uint8Array',
    'Uint8ClampedArray',
    'Int16Array',
    'Uint16Array',
    'Int32Array',
    'Uint32Array',
    'Float32Array',
    'Float64Array',
    'BigInt64Array',
    'BigUint64Array',
  ]) {
    const Native = g[name];
    const perElement = Native.BYTES_PER_ELEMENT as number;
    wrapConstructor(
      Native,
      name,
      (args) => (typeof args[0] === 'number' ? args[0] * perElement : 0),
      // A view on an existing buffer allocates nothing; a copy of an array or iterable does.
      (made, args) => (typeof args[0] === 'number' || args[0] instanceof NativeArrayBuffer ? 0 : made.byteLength),
    );
  }
  // Copies: those that bypass the species constructor, and those a script can send to the intrinsic
  // constructor (a 'constructor' property set to undefined makes the species the native one). Each is
  // charged by what it made; the wrapped constructors charge theirs already (a second charge of the
  // same bytes only makes the limit stricter for that copy).
  const copying: [any, string[]][] = [
    [TypedArray.prototype, ['with', 'toReversed', 'toSorted', 'slice', 'map', 'filter']],
    [NativeArrayBuffer.prototype, ['slice']],
  ];
  for (const [prototype, methods] of copying) {
    for (const method of methods) {
      const native = prototype[method];
      if (typeof native !== 'function') continue;
      defineProperty(prototype, method, {
        value: {
          [method](this: unknown) {
            const made = apply(native, this, arguments);
            return chargeObject(made, made.byteLength, 'a buffer copy');
          },
        }[method],
        writable: true,
        configurable: true,
      });
    }
  }

  // Loop protection: the run's budget (workflows/scriptBudget.ts); it answers with a message when spent.
  function budget(): void {
    const spent = tick();
    if (spent !== undefined) {
      const error = new RangeError(spent) as RangeError & { code?: RunErrorCode };
      error.code = 'script_timeout';
      throw error;
    }
  }

  // Errors of svc operations, shaped as the run describes them (name, message, code, response, …).
  function toError(description: Description): Error {
    const error = new Error(description.message) as Error & Record<string, unknown>;
    defineProperty(error, 'name', { value: description['name'], writable: true, configurable: true });
    for (const key of ['code', 'status', 'response', 'errno', 'config', 'payload', 'type']) {
      if (description[key] !== undefined) error[key] = description[key];
    }
    return error;
  }
  function describeError(error: any): Description {
    if (error instanceof ActionError) {
      return { kind: 'action_error', message: String(error.message), payload: error.payload };
    }
    if (
      error !== null &&
      typeof error === 'object' &&
      typeof error.name === 'string' &&
      typeof error.message === 'string'
    ) {
      let payload;
      if (error.type === 'action_script_failure' && typeof error.payload === 'object') payload = error.payload;
      return {
        kind: payload === undefined ? 'error' : 'action_error',
        name: error.name,
        message: error.message,
        code: typeof error.code === 'string' ? error.code : undefined,
        stack: typeof error.stack === 'string' ? error.stack.split('\n').slice(0, 12).join('\n') : undefined,
        payload,
      };
    }
    let text;
    try {
      text = stringify(error);
    } catch {
      text = undefined;
    }
    return { kind: 'value', message: text === undefined ? String(error) : text };
  }
  function safeDescription(error: unknown): string {
    try {
      return stringify(describeError(error));
    } catch {
      return stringify({ kind: 'value', message: 'an error that cannot be described' });
    }
  }

  function coded(name: string, code: RunErrorCode, message: string): Error {
    raised(code);
    return toError({ kind: 'error', name, code, message });
  }

  /** One operation of the run: the arguments go as JSON, the answer comes back as JSON. */
  function operation(name: string, args: unknown[]): Promise<any> {
    let json;
    try {
      json = stringify(args);
    } catch (error) {
      return P.reject(
        coded(
          'TypeError',
          'invalid_operation',
          'svc.' +
            name +
            ': its arguments cannot be sent as JSON (' +
            String(error && (error as { message?: unknown }).message) +
            ')',
        ),
      );
    }
    return send(name, json);
  }

  /** batchSave and batchDelete: each record is measured on its own (recordBytes). */
  function writeOperation(name: string, records: unknown, model: unknown): Promise<any> {
    if (!isArray(records)) return operation(name, [records, model]);
    const parts: string[] = [];
    for (let i = 0; i < records.length; i++) {
      let text: string | undefined;
      try {
        text = stringify(records[i]);
      } catch (error) {
        return P.reject(
          coded(
            'TypeError',
            'invalid_record',
            'svc.' +
              name +
              ': record ' +
              i +
              ' of ' +
              String(model) +
              ' cannot be sent as JSON (' +
              String(error && (error as { message?: unknown }).message) +
              ')',
          ),
        );
      }
      if (text !== undefined && text.length > limits.recordBytes) {
        return P.reject(
          coded(
            'OperationError',
            'record_too_large',
            'svc.' +
              name +
              ': record ' +
              i +
              ' of ' +
              String(model) +
              ' is ' +
              text.length +
              ' bytes of JSON, over the limit of ' +
              limits.recordBytes +
              ' per record',
          ),
        );
      }
      parts.push(text === undefined ? 'null' : text);
    }
    return send(name, '[[' + parts.join(',') + '],' + (model === undefined ? 'null' : stringify(model)) + ']');
  }

  function send(name: string, json: string): Promise<any> {
    // The answer is resolved inside a box with no prototype: resolving with a plain object would look
    // up its 'then' (a getter the script may have planted) right here, in the run's code and outside
    // the drain's time limit. The box is opened in a continuation, inside the drain.
    return new P<{ value: unknown }>((resolve, reject) => {
      call(
        name,
        json,
        (answer: string | undefined) => {
          const box = create(null) as { value: unknown };
          box.value = answer === undefined ? undefined : parse(answer);
          resolve(box);
        },
        (failure: string) => reject(toError(parse(failure) as Description)),
      );
    }).then((box) => box.value);
  }

  class ActionError extends Error {
    type: string;
    payload: unknown;
    constructor(payload?: any) {
      super(payload && typeof payload.message === 'string' ? payload.message : 'action failed');
      this.name = 'ActionError';
      this.type = 'action_script_failure';
      this.payload = payload === undefined ? {} : payload;
    }
  }

  const logWith = (level: string) =>
    function () {
      const parts: string[] = [];
      for (let i = 0; i < arguments.length; i++) {
        const value: unknown = arguments[i];
        if (typeof value === 'string') parts.push(value);
        else {
          try {
            parts.push(stringify(value));
          } catch {
            parts.push(String(value));
          }
        }
      }
      log(level, parts.join(' '));
    };
  g['console'] = freeze({
    log: logWith('info'),
    info: logWith('info'),
    debug: logWith('debug'),
    warn: logWith('warn'),
    error: logWith('error'),
  });

  // Timers are durable: a sleep of the run.
  let timerIds = 0;
  const cancelled = new Set<number>();
  g['setTimeout'] = function setTimeout(callback: unknown, ms: unknown) {
    const id = ++timerIds;
    const rest = Array.prototype.slice.call(arguments, 2);
    void operation('sleep', [Math.max(0, Number(ms) || 0)]).then(() => {
      if (!cancelled.delete(id) && typeof callback === 'function') callback(...rest);
    });
    return id;
  };
  g['clearTimeout'] = function clearTimeout(id: number) {
    if (id > 0 && id <= timerIds) cancelled.add(id);
  };

  // Text, base64 and URLs, built here (the workflow's own are objects of another realm).
  const utf8Encode = (text: unknown): Uint8Array => {
    const bytes: number[] = [];
    for (const char of String(text)) {
      let code = char.codePointAt(0)!;
      if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
      if (code < 0x80) bytes.push(code);
      else if (code < 0x800) bytes.push(0xc0 | (code >> 6), 0x80 | (code & 63));
      else if (code < 0x10000) bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
      else bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 63), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
    }
    return new Uint8Array(bytes);
  };
  const utf8Decode = (input: any): string => {
    const bytes = isView(input)
      ? new Uint8Array(input.buffer, input.byteOffset, input.byteLength)
      : new Uint8Array(input || 0);
    let out = '';
    for (let i = 0; i < bytes.length;) {
      const b = bytes[i]!;
      let code = 0xfffd;
      let n = 1;
      if (b < 0x80) code = b;
      else if (b >= 0xc2 && b < 0xe0 && i + 1 < bytes.length) {
        code = ((b & 31) << 6) | (bytes[i + 1]! & 63);
        n = 2;
      } else if (b >= 0xe0 && b < 0xf0 && i + 2 < bytes.length) {
        code = ((b & 15) << 12) | ((bytes[i + 1]! & 63) << 6) | (bytes[i + 2]! & 63);
        n = 3;
      } else if (b >= 0xf0 && b < 0xf5 && i + 3 < bytes.length) {
        code = ((b & 7) << 18) | ((bytes[i + 1]! & 63) << 12) | ((bytes[i + 2]! & 63) << 6) | (bytes[i + 3]! & 63);
        n = 4;
      }
      out += String.fromCodePoint(code);
      i += n;
    }
    return out;
  };
  g['TextEncoder'] = class TextEncoder {
    get encoding() {
      return 'utf-8';
    }
    encode(text?: unknown) {
      return utf8Encode(text === undefined ? '' : text);
    }
  };
  g['TextDecoder'] = class TextDecoder {
    get encoding() {
      return 'utf-8';
    }
    decode(input?: unknown) {
      return input === undefined ? '' : utf8Decode(input);
    }
  };
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  g['btoa'] = function btoa(text: unknown) {
    const s = String(text);
    let out = '';
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i),
        b = s.charCodeAt(i + 1),
        c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new RangeError('btoa: the string has characters outside Latin-1');
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out +=
        B64[n >> 18]! +
        B64[(n >> 12) & 63]! +
        (i + 1 < s.length ? B64[(n >> 6) & 63]! : '=') +
        (i + 2 < s.length ? B64[n & 63]! : '=');
    }
    return out;
  };
  g['atob'] = function atob(text: unknown) {
    const s = String(text)
      .replace(/[\t\n\f\r ]/g, '')
      .replace(/=+$/, '');
    if (/[^A-Za-z0-9+/]/.test(s) || s.length % 4 === 1) throw new SyntaxError('atob: not base64');
    let out = '';
    let bits = 0,
      value = 0;
    for (const char of s) {
      value = (value << 6) | B64.indexOf(char);
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += String.fromCharCode((value >> bits) & 255);
      }
    }
    return out;
  };

  const encodeComponent = encodeURIComponent;
  const decodeComponent = (text: string) => decodeURIComponent(String(text).replace(/\+/g, ' '));
  class URLSearchParams {
    #pairs: [string, string][] = [];
    #onChange: ((search: string) => void) | undefined;
    constructor(init?: unknown, onChange?: unknown) {
      this.#onChange = typeof onChange === 'function' ? (onChange as (search: string) => void) : undefined;
      if (init === undefined || init === null) return;
      if (typeof init === 'object') {
        const entries: Iterable<[unknown, unknown]> =
          typeof (init as Record<symbol, unknown>)[Symbol.iterator] === 'function'
            ? (init as Iterable<[unknown, unknown]>)
            : Object.entries(init);
        for (const [key, value] of entries) this.#pairs.push([String(key), String(value)]);
        return;
      }
      this.#parse(String(init));
    }
    #parse(text: string) {
      this.#pairs = [];
      for (const part of text.replace(/^\?/, '').split('&')) {
        if (part === '') continue;
        const at = part.indexOf('=');
        this.#pairs.push(
          at < 0
            ? [decodeComponent(part), '']
            : [decodeComponent(part.slice(0, at)), decodeComponent(part.slice(at + 1))],
        );
      }
    }
    #changed() {
      if (this.#onChange) this.#onChange(this.toString());
    }
    get size() {
      return this.#pairs.length;
    }
    append(key: unknown, value: unknown) {
      this.#pairs.push([String(key), String(value)]);
      this.#changed();
    }
    delete(key: unknown) {
      this.#pairs = this.#pairs.filter((pair) => pair[0] !== String(key));
      this.#changed();
    }
    get(key: unknown) {
      const found = this.#pairs.find((pair) => pair[0] === String(key));
      return found ? found[1] : null;
    }
    getAll(key: unknown) {
      return this.#pairs.filter((pair) => pair[0] === String(key)).map((pair) => pair[1]);
    }
    has(key: unknown) {
      return this.#pairs.some((pair) => pair[0] === String(key));
    }
    set(key: unknown, value: unknown) {
      const k = String(key);
      const at = this.#pairs.findIndex((pair) => pair[0] === k);
      if (at < 0) this.#pairs.push([k, String(value)]);
      else
        this.#pairs = this.#pairs
          .filter((pair, i) => i === at || pair[0] !== k)
          .map((pair) => (pair[0] === k ? [k, String(value)] : pair));
      this.#changed();
    }
    sort() {
      this.#pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      this.#changed();
    }
    forEach(callback: (value: string, key: string, params: URLSearchParams) => void, thisArg?: unknown) {
      for (const [k, v] of this.#pairs) callback.call(thisArg, v, k, this);
    }
    keys() {
      return this.#pairs.map((pair) => pair[0])[Symbol.iterator]();
    }
    values() {
      return this.#pairs.map((pair) => pair[1])[Symbol.iterator]();
    }
    entries() {
      return this.#pairs.map((pair) => [pair[0], pair[1]])[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    toString() {
      return this.#pairs
        .map(([k, v]) => encodeComponent(k).replace(/%20/g, '+') + '=' + encodeComponent(v).replace(/%20/g, '+'))
        .join('&');
    }
  }
  g['URLSearchParams'] = URLSearchParams;
  const URL_PARTS = [
    'href',
    'origin',
    'protocol',
    'username',
    'password',
    'host',
    'hostname',
    'port',
    'pathname',
    'search',
    'hash',
  ];
  type UrlParts = Record<string, string> & { error?: string };
  class URL {
    #parts!: UrlParts;
    #params!: URLSearchParams;
    constructor(input: unknown, base?: unknown) {
      this.#set(String(input), base === undefined ? undefined : String(base));
    }
    #set(input: string, base?: string) {
      const answer = parse(parseUrl(input, base === undefined ? '' : base, base !== undefined)!) as UrlParts;
      if (answer.error) throw new TypeError(answer.error);
      this.#parts = answer;
      this.#params = new URLSearchParams(answer['search'], (search: string) =>
        this.#replace('search', search ? '?' + search : ''),
      );
    }
    #replace(part: string, value: string) {
      const p = this.#parts;
      const auth = p['username'] ? p['username'] + (p['password'] ? ':' + p['password'] : '') + '@' : '';
      const next: UrlParts = { ...p, [part]: value };
      const search = next['search'] && !next['search'].startsWith('?') ? '?' + next['search'] : next['search'];
      const hash = next['hash'] && !next['hash'].startsWith('#') ? '#' + next['hash'] : next['hash'];
      this.#set(next['protocol']! + '//' + auth + next['host']! + next['pathname']! + search + hash);
    }
    get searchParams() {
      return this.#params;
    }
    toString() {
      return this.#parts['href'];
    }
    toJSON() {
      return this.#parts['href'];
    }
    static canParse(input: unknown, base?: unknown) {
      return !(parse(parseUrl(String(input), base === undefined ? '' : String(base), base !== undefined)!) as UrlParts)
        .error;
    }
    static {
      for (const part of URL_PARTS) {
        defineProperty(URL.prototype, part, {
          get(this: URL) {
            return this.#parts[part];
          },
          set(this: URL, value: unknown) {
            if (part === 'href') this.#set(String(value));
            else if (part !== 'origin') this.#replace(part, String(value));
          },
          configurable: true,
        });
      }
    }
  }
  g['URL'] = URL;

  // The object scripts import as 'integration-service/runtime'.
  const runtimeModule = freeze({ ActionError });

  /**
   * svc.paginate: the run walks the pages; `<name>` opens a walk and answers its id, `<name>.next`
   * answers the next page. The script's `on_page` (a function: it does not cross) is called here,
   * before the next page is asked for, with what the run sent along with the page.
   */
  function paginate(name: string, config: any) {
    const onPage: unknown =
      config !== null && typeof config === 'object' && config.paginate ? config.paginate.on_page : undefined;
    const callback = typeof onPage === 'function' ? (onPage as (state: unknown) => unknown) : undefined;
    let id: number | undefined;
    let done = false;
    let pending: { state: unknown } | undefined;
    const iterator = {
      async next() {
        if (done) return { done: true, value: undefined };
        if (pending !== undefined && callback !== undefined) {
          const { state } = pending;
          pending = undefined;
          await callback(state);
        }
        if (id === undefined) id = await operation(name, [config, callback !== undefined]);
        const step = await operation(name + '.next', [id]);
        if (step.done) {
          done = true;
          return { done: true, value: undefined };
        }
        if (step.onPage !== undefined) pending = { state: step.onPage };
        return { done: false, value: step.value };
      },
      async return(value: unknown) {
        done = true;
        return { done: true, value };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  /**
   * svc.log in the field's forms: `log(message)`, `log(message, { level })`, `log(message, value, …,
   * { level })`; values that are not strings are written as JSON.
   */
  function logCall(name: string) {
    return function () {
      const args = slice.call(arguments) as unknown[];
      const last = args.length > 1 ? args[args.length - 1] : undefined;
      const options =
        last !== null && typeof last === 'object' && typeof (last as { level?: unknown }).level === 'string'
          ? args.pop()
          : undefined;
      const parts: string[] = [];
      for (const value of args) {
        if (typeof value === 'string') parts.push(value);
        else {
          let text: string | undefined;
          try {
            text = stringify(value);
          } catch {
            text = undefined;
          }
          parts.push(text === undefined ? String(value) : text);
        }
      }
      let message = parts.join(' ');
      // Cut here, before the bridge: the run keeps no more of a line (svc.ts bufferLog cuts again, so
      // this cut, which the script could undo, is no bound), and a line sent whole cost its JSON copy
      // both ways: 100 lines of 1 MiB took 691 ms of the run's 1 s loop budget, 44 ms cut first.
      if (typeof message === 'string' && message.length > limits.logLineChars) {
        message = message.slice(0, limits.logLineChars);
      }
      return operation(name, [message, options]);
    };
  }

  /** svc.zodValidateInput: the script's own zod schema checks the input, here in its realm. */
  function zodValidateInput(svc: Record<string, any>) {
    return async function (options: { zodSchema?: any; input?: unknown } | undefined) {
      const schema = options?.zodSchema;
      if (schema === null || typeof schema !== 'object' || typeof schema.safeParse !== 'function') {
        throw coded(
          'TypeError',
          'invalid_operation',
          'svc.zodValidateInput needs { zodSchema, input } with a zod schema',
        );
      }
      const parsed = schema.safeParse(options?.input);
      if (!parsed.success) {
        for (const issue of parsed.error.issues) {
          await svc['log'](
            'Invalid input provided: ' +
              String(issue.message) +
              ' at path ' +
              (isArray(issue.path) ? issue.path.join('.') : ''),
            { level: 'error' },
          );
        }
        throw new ActionError({ message: 'Invalid input provided' });
      }
      return parsed;
    };
  }

  /** A member of svc, built from its shape in the operation table (workflows/svcOperations.ts). */
  function member({ name, shape }: RealmMember, svc: Record<string, any>): unknown {
    switch (shape) {
      case 'call':
        return function () {
          return operation(name, slice.call(arguments));
        };
      case 'write':
        return (records: unknown, model: unknown) => writeOperation(name, records, model);
      case 'log':
        return logCall(name);
      case 'paginate':
        return (config: unknown) => paginate(name, config);
      case 'zodValidateInput':
        return zodValidateInput(svc);
      default:
        return undefined;
    }
  }

  /**
   * Runs one script: evaluates its bundle factory, calls its default export with svc (and the input),
   * and reports the outcome as JSON. Everything happens in this realm's microtasks, which the run
   * drains under a time limit.
   */
  return function start(factory, svcShape, inputJson, onDone, onFail) {
    const shape = parse(svcShape) as SvcShape;
    const svc: Record<string, unknown> = {
      connectionId: shape.connectionId,
      providerConfigKey: shape.providerConfigKey,
      provider: shape.provider,
      lastSyncDate: shape.lastSyncDate === undefined ? undefined : new NativeDate(shape.lastSyncDate),
      webhook: shape.webhook,
      ActionError,
    };
    for (const each of shape.members) {
      const built = member(each, svc);
      if (built !== undefined) svc[each.name] = built;
    }
    P.resolve()
      .then(() => {
        const module = { exports: {} as Record<string, unknown> };
        const require = (id: string) => {
          if (id === 'integration-service/runtime') return runtimeModule;
          throw coded('OperationError', 'invalid_script', 'requires "' + id + '": scripts cannot import modules');
        };
        (factory as AnyFunction)(module, module.exports, require, undefined, undefined, budget);
        const exported = module.exports['default'] !== undefined ? module.exports['default'] : module.exports;
        if (typeof exported !== 'function') {
          throw coded('OperationError', 'invalid_script', 'has no default-exported function');
        }
        return inputJson === undefined ? exported(svc) : exported(svc, parse(inputJson));
      })
      .then(
        (output: unknown) => {
          let json;
          try {
            json = stringify(output);
          } catch (error) {
            raised('result_not_serializable');
            onFail(
              stringify({
                kind: 'error',
                name: 'TypeError',
                code: 'result_not_serializable',
                message:
                  'the script returned a value that cannot be sent as JSON: ' +
                  String(error && (error as { message?: unknown }).message),
              }),
            );
            return;
          }
          onDone(json);
        },
        (error: unknown) => onFail(safeDescription(error)),
      );
  };
});
