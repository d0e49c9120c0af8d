/**
 * Reads service.yaml into a plain value plus a way back from any YAML path to its line and column.
 * YAML syntax errors (including duplicate keys) become problems; the rest of the pipeline runs on the
 * value only when the text parsed.
 */
import { isMap, isNode, isPair, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Document, Node } from 'yaml';
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

export function loadYaml(text: string): LoadedYaml {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false, strict: true });
  const position = (offset: number) => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };

  const problems: ConfigProblem[] = doc.errors.map((error) => {
    const { line, column } = position(error.pos[0]);
    const duplicate = error.code === 'DUPLICATE_KEY';
    return {
      severity: 'error',
      code: duplicate ? 'duplicate_key' : 'yaml_syntax',
      message: firstLine(error.message),
      path: [],
      line,
      column,
    };
  });

  const walk = (path: YamlPath): Located & { depth: number } => walkPath(doc, path);

  let value: unknown;
  if (problems.length === 0) {
    try {
      // maxAliasCount guards against alias bombs ("billion laughs").
      value = doc.toJS({ maxAliasCount: 100 });
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

function firstLine(message: string): string {
  return message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? message;
}

/** Follows `path` as far as it exists; `depth` says how many parts were found. */
function walkPath(doc: Document, path: YamlPath): Located & { depth: number } {
  let current: Located = { key: null, value: isNode(doc.contents) ? doc.contents : null };
  let depth = 0;
  for (const part of path) {
    const node = current.value;
    let next: Located | null = null;
    if (isMap(node)) {
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const keyNode = isNode(pair.key) ? pair.key : null;
        const keyValue = isScalar(pair.key) ? pair.key.value : pair.key;
        if (String(keyValue) === String(part)) {
          next = { key: keyNode, value: isNode(pair.value) ? pair.value : null };
          break;
        }
      }
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
