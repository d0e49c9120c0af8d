/**
 * Reads service.yaml into a plain value plus a way back from any YAML path to its line and column.
 * YAML syntax errors (including duplicate keys) become problems; the rest of the pipeline runs on the
 * value only when the text parsed.
 */
import { isAlias, isMap, isNode, isPair, isScalar, isSeq, Lexer, LineCounter, parseDocument, visit } from 'yaml';
import type { Document, Node, Pair, YAMLMap } from 'yaml';
import type { ConfigProblem, YamlPath } from './problems.js';

export interface LoadedYaml {
  /** The document as plain data; undefined when the text did not parse. */
  value: unknown;
  problems: ConfigProblem[];
  /** Line and column (1-based) of the value at `path`, or of its key with `{ key: true }`. */
  locate(path: YamlPath, options?: { key?: boolean }): { line: number; column: number };
  /** True when the value at `path` was written as nothing at all (`field:`), not as `null`. */
  isEmptyScalar(path: YamlPath): boolean;
}

interface Located {
  key: Node | null;
  value: Node | null;
}

/**
 * How deep a service.yaml may nest, counted generously (indentation columns, block indicators and open
 * flow collections of a line: `nestingEstimate`): far beyond any configuration, far below where the YAML
 * library's recursive composer slows down out of proportion (a 1 MB `[[[…]]]` held the API's event
 * loop, every environment's, for 20 s) or runs out of stack.
 */
export const MAX_YAML_NESTING = 256;

export function loadYaml(text: string): LoadedYaml {
  const lineCounter = new LineCounter();
  const tooDeep = nestingEstimate(text, MAX_YAML_NESTING);
  if (tooDeep !== undefined) {
    // Line starts for the position only: the document is not composed.
    lineCounter.addNewLine(0);
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lineCounter.addNewLine(i + 1);
    const { line, col } = lineCounter.linePos(tooDeep);
    return {
      value: undefined,
      problems: [
        {
          severity: 'error',
          code: 'yaml_syntax',
          message: `the document is nested more than ${MAX_YAML_NESTING} levels deep (counting indentation columns); no configuration needs that`,
          path: [],
          line,
          column: col,
        },
      ],
      locate: () => ({ line, column: col }),
      isEmptyScalar: () => false,
    };
  }
  // uniqueKeys: false because yaml compares each key with every earlier key of its mapping (20,000 keys:
  // 28 s); duplicateKeys finds the same duplicates in one pass.
  // merge: the de-facto format's loader (js-yaml) reads `<<: *base` as a merge key, so this one does too.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false, prettyErrors: false, strict: true, merge: true });
  const position = (offset: number) => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };

  const problems: ConfigProblem[] = doc.errors.map((error) => ({
    severity: 'error',
    code: 'yaml_syntax',
    message: firstLine(error.message),
    path: [],
    ...position(error.pos[0]),
  }));
  for (const offset of duplicateKeys(doc)) {
    problems.push({
      severity: 'error',
      code: 'duplicate_key',
      message: 'Map keys must be unique',
      path: [],
      ...position(offset),
    });
  }

  const walk = (path: YamlPath): Located & { depth: number } => walkPath(doc, path);

  let value: unknown;
  const aliasProblem = problems.length === 0 ? checkAliases(doc) : null;
  if (aliasProblem !== null) {
    problems.push({
      severity: 'error',
      code: 'yaml_syntax',
      message: aliasProblem.message,
      path: [],
      ...(aliasProblem.offset === undefined ? { line: 1, column: 1 } : position(aliasProblem.offset)),
    });
  }
  if (problems.length === 0) {
    try {
      // checkAliases bounded what the aliases repeat; yaml's own count stays as a second guard.
      value = doc.toJS({ maxAliasCount: MAX_ALIAS_VALUES });
    } catch (error) {
      problems.push({
        severity: 'error',
        code: 'yaml_syntax',
        message: error instanceof Error ? firstLine(error.message) : 'the YAML could not be read',
        path: [],
        line: 1,
        column: 1,
      });
    }
  }

  return {
    value,
    problems,
    locate(path, options = {}) {
      const found = walk(path);
      const useKey = (options.key === true || found.depth < path.length) && found.key !== null;
      const node = useKey ? found.key : (found.value ?? found.key);
      const start = node?.range?.[0];
      return start === undefined ? { line: 1, column: 1 } : position(start);
    },
    isEmptyScalar(path) {
      const found = walk(path);
      return (
        found.depth === path.length && isScalar(found.value) && found.value.value === null && found.value.source === ''
      );
    },
  };
}

/**
 * Where a key repeats one earlier in its mapping, as yaml's uniqueKeys would say (two scalar keys of the
 * same value), but with one set per mapping instead of a scan of the earlier keys per key.
 */
function duplicateKeys(doc: Document): number[] {
  const offsets: number[] = [];
  visit(doc, {
    Map(_key, map) {
      const seen = new Set<unknown>();
      for (const pair of map.items) {
        if (!isScalar(pair.key)) continue;
        const key = pair.key.value;
        if (typeof key === 'number' && Number.isNaN(key)) continue; // NaN equals no key, not even NaN
        if (seen.has(key)) offsets.push(pair.key.range?.[0] ?? 0);
        seen.add(key);
      }
    },
  });
  return offsets;
}

/** At most this many aliases in one file (yaml resolves each by a scan of the file's anchors). */
const MAX_ALIASES = 1000;
/** At most this many values repeated by aliases in all: an alias bomb ("billion laughs") stops here. */
export const MAX_ALIAS_VALUES = 10_000;

/**
 * Reads the aliases of the document once, in document order, and returns the first that cannot be
 * expanded, with why: one that names no earlier anchor, one inside the very value its anchor names
 * (YAML allows `a: &x { b: *x }`, but that value would contain itself: no JSON, no end to any walk over
 * it), the alias beyond MAX_ALIASES, or the one that brings the values the aliases repeat beyond
 * MAX_ALIAS_VALUES. Linear in the size of the text: the expanded size of each anchored value is counted
 * once, when the walk leaves it, and an alias adds that count without being walked.
 */
function checkAliases(doc: Document): { message: string; offset: number | undefined } | null {
  const anchors = new Map<string, Node>(); // the latest anchor of each name, as YAML resolves an alias
  const sizes = new Map<Node, number>(); // values in each anchored node, its aliases expanded
  const open = new Set<Node>(); // anchored nodes the walk is inside
  let aliases = 0;
  let repeated = 0;
  let found: { message: string; offset: number | undefined } | null = null;
  const size = (node: unknown): number => {
    if (found !== null || !isNode(node)) return 1;
    if (isAlias(node)) {
      const at = node.range?.[0];
      const target = anchors.get(node.source);
      aliases++;
      if (target === undefined) {
        found = { message: `the alias *${node.source} names no anchor &${node.source} before it`, offset: at };
      } else if (open.has(target)) {
        found = {
          message: `the alias *${node.source} is inside the value its anchor &${node.source} names: that value would contain itself; repeat the value or move the anchor to a value that does not hold the alias`,
          offset: at,
        };
      } else if (aliases > MAX_ALIASES) {
        found = { message: `more than ${MAX_ALIASES} aliases in one file: write the values out`, offset: at };
      } else {
        const values = sizes.get(target) ?? 1;
        repeated += values;
        if (repeated > MAX_ALIAS_VALUES)
          found = {
            message: `the alias *${node.source} repeats ${values} values, which brings the values aliases repeat beyond ${MAX_ALIAS_VALUES} (an alias bomb?): write the values out`,
            offset: at,
          };
        return values;
      }
      return 1;
    }
    if (node.anchor !== undefined) {
      anchors.set(node.anchor, node);
      open.add(node);
    }
    let values = 1;
    if (isMap(node) || isSeq(node)) {
      for (const item of node.items) {
        values += isPair(item) ? size(item.key) + size(item.value) : size(item);
        if (found === null && isMap(node) && isPair(item) && isMergeKey(item.key) && !mergeable(item.value, true)) {
          const at = isNode(item.value) ? item.value.range?.[0] : undefined;
          found = { message: 'a merge key (<<) takes a mapping, an alias of one, or a list of them', offset: at };
        }
      }
    }
    if (node.anchor !== undefined) {
      open.delete(node);
      sizes.set(node, values);
    }
    return values;
  };
  // What `<<` may merge: yaml throws on anything else, without a position.
  const mergeable = (value: unknown, listAllowed: boolean): boolean => {
    const target = isAlias(value) ? anchors.get(value.source) : value;
    if (isMap(target)) return true;
    return listAllowed && isSeq(target) && target.items.every((item) => mergeable(item, false));
  };
  size(doc.contents);
  return found;
}

/** `<<` in a mapping, which `merge: true` reads as a merge key (its value a symbol, not the string). */
function isMergeKey(key: unknown): boolean {
  return isScalar(key) && typeof key.value === 'symbol';
}

function firstLine(message: string): string {
  return message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? message;
}

/**
 * The offset where the document's nesting first passes `limit`, or undefined: from the lexer's tokens
 * (linear, no recursion), a line's depth is at most its indentation plus its block indicators (`- `,
 * `? `, `: `) plus the flow collections open (`[`, `{`). Generous on purpose: it bounds the real depth.
 */
export function nestingEstimate(text: string, limit: number): number | undefined {
  let offset = 0;
  let flow = 0;
  let indent = 0;
  let indicators = 0;
  let lineStart = true;
  for (const token of new Lexer().lex(text)) {
    const first = token.charCodeAt(0);
    // The lexer's own markers (document start, scalar, flow error end…) are not source text.
    const marker = token.length === 1 && first < 0x20 && token !== '\n' && token !== '\r' && token !== '\t';
    if (token[0] === '\n' || token[0] === '\r') {
      lineStart = true;
      indent = 0;
      indicators = 0;
    } else if (lineStart && /^ +$/.test(token)) {
      indent = token.length;
      lineStart = false;
    } else if (!marker) {
      lineStart = false;
      if (token === '[' || token === '{') flow++;
      else if (token === ']' || token === '}') flow = Math.max(0, flow - 1);
      else if (flow === 0 && (token === '-' || token === '?' || token === ':')) indicators++;
      if (indent + indicators + flow > limit) return offset;
    }
    if (!marker) offset += token.length;
  }
  return undefined;
}

/** Per mapping, its pairs by key text: `locate` follows a path in time linear in its length. */
const pairIndex = new WeakMap<YAMLMap, Map<string, Pair>>();

function pairsOf(node: YAMLMap): Map<string, Pair> {
  let index = pairIndex.get(node);
  if (!index) {
    index = new Map();
    for (const pair of node.items) {
      if (!isPair(pair)) continue;
      const key = String(isScalar(pair.key) ? pair.key.value : pair.key);
      if (!index.has(key)) index.set(key, pair);
    }
    pairIndex.set(node, index);
  }
  return index;
}

/** Follows `path` as far as it exists; `depth` says how many parts were found. */
function walkPath(doc: Document, path: YamlPath): Located & { depth: number } {
  let current: Located = { key: null, value: isNode(doc.contents) ? doc.contents : null };
  let depth = 0;
  for (const part of path) {
    const node = current.value;
    let next: Located | null = null;
    if (isMap(node)) {
      const pair = pairsOf(node).get(String(part));
      if (pair) next = { key: isNode(pair.key) ? pair.key : null, value: isNode(pair.value) ? pair.value : null };
    } else if (isSeq(node) && typeof part === 'number') {
      const item: unknown = node.items[part];
      if (isNode(item)) next = { key: item, value: item };
    }
    if (next === null) break;
    current = next;
    depth++;
  }
  return { ...current, depth };
}
